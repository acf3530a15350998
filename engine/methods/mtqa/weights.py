"""The column-cell communication weights of the Matrix of Thought (paper 004, Step 4, eq. 9) and how
many of a thought's paragraphs they let through.

The paper gives the weight matrix A as (m−1)×(n−1) for an m×n matrix of thoughts: one weight per
link between two vertically neighbouring cells (m−1 links per column), for n−1 columns. We keep A in
that shape, row i (0-based) being the link into thought row i+1, and map it onto the cells so:

    α(row r, column c) = A[r−1][min(c, n−2)]      for r ≥ 1 (the first thought of a column has no
                                                   neighbour above it, so no α)

i.e. the last column, which A has no column for, reuses the weights of column n−1 (the paper's
matrix stops one column short; repeating its last column keeps the trend of every preset). With
m = 1 there is no link at all; with n = 1 the single column uses A's only column.

Presets (the paper's "Weight Matrix Analysis", 3×4 example), each value clipped to [0, 1]:
- uniform: uniform random values in [0, 1] (seeded);
- gaussian: N(0, 1) samples (seeded), min-max normalised to [0, 1] (all equal: 0.5);
- constant: every weight c;
- vert: δ·(i+1), growing row by row;
- hor: δ·(j+1), growing column by column;
- vert_hor: δ·(i+j+1), growing along both (Vert&Hor-0.1, the paper's best and our default);
- custom: your own (m−1)×(n−1) matrix.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal

Preset = Literal["uniform", "gaussian", "constant", "vert", "hor", "vert_hor", "custom"]
PRESETS: tuple[str, ...] = ("uniform", "gaussian", "constant", "vert", "hor", "vert_hor", "custom")


def matrix_shape(rows: int, columns: int) -> tuple[int, int]:
    """A's shape for an m×n matrix of thoughts: (m−1) links per column, for max(n−1, 1) columns
    (a single column still needs its links' weights)."""
    return max(rows - 1, 0), max(columns - 1, 1)


def _clip(value: float) -> float:
    return min(1.0, max(0.0, round(value, 9)))


def weight_matrix(
    preset: str,
    rows: int,
    columns: int,
    *,
    delta: float = 0.1,
    constant: float = 0.2,
    custom: Sequence[Sequence[float]] = (),
    seed: int = 0,
) -> list[list[float]]:
    """A, (m−1)×(n−1) (see the module's docstring for each preset)."""
    height, width = matrix_shape(rows, columns)
    if preset == "custom":
        if len(custom) != height or any(len(row) != width for row in custom):
            raise ValueError(f"the custom matrix must be {height}×{width} for {rows} rows × {columns} columns")
        return [[_clip(v) for v in row] for row in custom]
    if preset == "constant":
        return [[_clip(constant)] * width for _ in range(height)]
    if preset == "vert":
        return [[_clip(delta * (i + 1))] * width for i in range(height)]
    if preset == "hor":
        return [[_clip(delta * (j + 1)) for j in range(width)] for _ in range(height)]
    if preset == "vert_hor":
        return [[_clip(delta * (i + j + 1)) for j in range(width)] for i in range(height)]
    rng = random.Random(seed)
    if preset == "uniform":
        return [[_clip(rng.random()) for _ in range(width)] for _ in range(height)]
    if preset == "gaussian":
        samples = [[rng.gauss(0.0, 1.0) for _ in range(width)] for _ in range(height)]
        flat = [v for row in samples for v in row]
        if not flat:
            return [[] for _ in range(height)]
        low, high = min(flat), max(flat)
        if high == low:
            return [[0.5] * width for _ in range(height)]
        return [[_clip((v - low) / (high - low)) for v in row] for row in samples]
    raise ValueError(f"unknown weight preset '{preset}' (one of: {', '.join(PRESETS)})")


def cell_alpha(matrix: Sequence[Sequence[float]], row: int, column: int) -> float | None:
    """α of the cell at (row, column), 0-based; None for a column's first thought."""
    if row == 0:
        return None
    weights = matrix[row - 1]
    return weights[min(column, len(weights) - 1)]


def passed_count(alpha: float | None, paragraphs: int) -> int:
    """How many paragraphs α lets through: ⌈α × paragraphs⌉ (the paper rounds up); 0 when α is 0.
    Rounded to 9 decimals first, so 0.3 × 10 is 3, not the 4 that floating point would give."""
    if not alpha or paragraphs <= 0:
        return 0
    return min(paragraphs, math.ceil(round(alpha * paragraphs, 9)))


def passed_paragraphs(alpha: float | None, paragraphs: Sequence[str]) -> list[str]:
    """The paragraphs passed to the next thought: the last ones, which carry a thought's strategy and
    direction (the paper: "typically the last few paragraphs of the thought node")."""
    count = passed_count(alpha, len(paragraphs))
    return list(paragraphs[len(paragraphs) - count :]) if count else []
