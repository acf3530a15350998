"""MTQA parameters (paper 004: "3×4 + Vert&Hor-0.1" is its default configuration, chunks of 1,200
tokens, 1-2 hop expansion, Table 3's ablations as switches)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from engine.methods.base import MethodParams, read_pages_field, relevance_floor_field
from engine.methods.mtqa.weights import matrix_shape, weight_matrix

WEIGHT_HELP = (
    "Communication weight matrix A preset: how much of a thought passes to the one below it "
    "(α: the share of its paragraphs, rounded up; 0 passes nothing). A is (rows−1)×(columns−1) as in "
    "the paper; the thought at row r ≥ 2, column c gets α = A[r−1][c] (1-based), and the last column "
    "reuses A's last column. uniform: random in [0,1] (seeded); gaussian: N(0,1), seeded, normalised "
    "to [0,1]; constant: every α = c; vert: δ·i on link row i (growing down a column); hor: δ·j on "
    "column j (growing across columns); vert_hor: δ·(i+j−1), growing along both (the paper's best, "
    "Vert&Hor-0.1); custom: your own matrix."
)


class MtqaParams(MethodParams):
    quick_profile = {
        "rows": 2,
        "columns": 2,
        "documents": 5,
        "top_k": 5,
        "units": 5,
        "unit_chars": 400,
        "thought_tokens": 350,
        "summary_tokens": 450,
    }

    rows: int = Field(
        default=3,
        ge=1,
        le=6,
        description=(
            "m: thoughts per column of the matrix (the paper's best: 3). 1 row makes each column a single "
            "thought: a chain of thought corrected by retrieval."
        ),
    )
    columns: int = Field(
        default=4,
        ge=1,
        le=8,
        description=(
            "n: columns of the matrix, each ending in a summary that corrects its thoughts against the "
            "knowledge units (the paper's best: 4). 1 column: the thoughts of one column, then its summary."
        ),
    )
    weight_preset: Literal["uniform", "gaussian", "constant", "vert", "hor", "vert_hor", "custom"] = Field(
        default="vert_hor", description=WEIGHT_HELP
    )
    delta: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description=(
            "δ: the step of the vert, hor and vert_hor presets (the paper compares 0.1 and 0.2; 0.1 is best)."
        ),
    )
    constant: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description=("c: every weight of the constant preset (the paper compares 0.2, 0.5, 0.8 and 1.0; 0.2 is best)."),
    )
    custom_matrix: str = Field(
        default="",
        description=(
            "The custom preset's matrix A as JSON: (rows−1) lists of (columns−1) weights in [0, 1] (one weight "
            "when there is one column), e.g. [[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]] for 3 × 4."
        ),
    )
    weight_seed: int = Field(default=0, ge=0, description="Seed of the uniform and gaussian presets.")
    scope: Literal["question", "collection"] = Field(
        default="question",
        description=(
            "Knowledge graph scope. question: a graph built from the documents retrieved for this question "
            "(the paper's setting); collection: the corpus's graph, built once and reused by every run."
        ),
    )
    collection: str = Field(
        default="",
        description=(
            "The collection whose knowledge graph the collection scope reads (e.g. hotpotqa, or files: your uploaded and ingested documents), built "
            "once with `thoughtmap kg build --collection NAME`. Unused in the question scope."
        ),
    )
    documents: int = Field(
        default=10,
        ge=1,
        le=50,
        description=(
            "Question scope: documents retrieved for the question and added to its knowledge graph (HotpotQA "
            "gives 10 paragraphs per question)."
        ),
    )
    relevance_floor: float = relevance_floor_field()
    read_pages: int = read_pages_field(10)  # each page's passage about the question is one chunk to extract
    chunk_tokens: int = Field(
        default=1200,
        ge=100,
        le=8000,
        description=(
            "Chunk size in tokens when documents are split for entity and relation extraction (paper: 1,200)."
        ),
    )
    hops: int = Field(
        default=2,
        ge=1,
        le=2,
        description=("Graph hops from the matched entities and relations when knowledge units are retrieved (1 or 2)."),
    )
    top_k: int = Field(
        default=8,
        ge=1,
        le=60,
        description=(
            "Top-k keys (entities and relations) matched to the keywords; their knowledge units are given "
            "to the thoughts (LightRAG's default is 60; fewer keep prompts inside a small model's context)."
        ),
    )
    units: int = Field(
        default=10,
        ge=1,
        le=50,
        description=(
            "Most knowledge units given to a thought or a summary, best first (each is one source chunk with "
            "its triples)."
        ),
    )
    unit_chars: int = Field(
        default=700, ge=100, le=4000, description=("Characters of a knowledge unit's source text shown in a prompt.")
    )
    thought_tokens: int = Field(
        default=700, ge=64, le=8000, description="Upper bound on one thought's length, in tokens."
    )
    summary_tokens: int = Field(
        default=900, ge=64, le=8000, description="Upper bound on a column summary's length, in tokens."
    )
    no_source_text: bool = Field(
        default=False, description=("Ablation -origin: knowledge units without their source text (triples only).")
    )
    no_triples: bool = Field(
        default=False, description=("Ablation -KG: knowledge units without knowledge-graph triples (source text only).")
    )
    no_communication: bool = Field(
        default=False,
        description=("Ablation -comm: every α is 0, so no thought sees the one above it (a tree-like structure)."),
    )
    no_correction: bool = Field(
        default=False,
        description=(
            "Ablation -RAG: the column summaries merge the thoughts without checking them against "
            "retrieved knowledge units; the next column still retrieves the knowledge units its first "
            "thought starts from."
        ),
    )

    @field_validator("custom_matrix", mode="before")
    @classmethod
    def _matrix_as_json(cls, value: Any) -> Any:
        # The CLI's --param parses JSON into lists; the form gives text: both are kept as JSON text.
        return json.dumps(value) if isinstance(value, list) else value

    def matrix(self) -> list[list[float]]:
        """The custom matrix, parsed (empty when none is given)."""
        if not self.custom_matrix.strip():
            return []
        try:
            value = json.loads(self.custom_matrix)
        except json.JSONDecodeError as exc:
            raise ValueError(f"custom_matrix is not JSON ({exc.msg}); write it like [[0.1, 0.2], [0.2, 0.3]]") from None
        if not (
            isinstance(value, list)
            and all(isinstance(row, list) for row in value)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for row in value for v in row)
        ):
            raise ValueError("custom_matrix must be a list of lists of numbers, like [[0.1, 0.2], [0.2, 0.3]]")
        return [[float(v) for v in row] for row in value]

    @model_validator(mode="after")
    def _weights_fit(self) -> MtqaParams:
        custom = self.matrix()
        if self.weight_preset == "custom":
            height, width = matrix_shape(self.rows, self.columns)
            if len(custom) != height or any(len(row) != width for row in custom):
                raise ValueError(
                    f"custom_matrix must be {height} list(s) of {width} weight(s) for "
                    f"{self.rows} rows × {self.columns} columns"
                )
            if any(not 0.0 <= v <= 1.0 for row in custom for v in row):
                raise ValueError("every weight of custom_matrix must be between 0 and 1")
        if self.scope == "collection" and not self.collection.strip():
            raise ValueError("the collection scope needs a collection name (e.g. hotpotqa, or files)")
        if self.no_source_text and self.no_triples:
            raise ValueError(
                "no_source_text and no_triples together leave the knowledge units empty; switch one of them off"
            )
        return self

    def weights(self) -> list[list[float]]:
        """A for these parameters; all zeros under the -comm ablation."""
        matrix = weight_matrix(
            self.weight_preset,
            self.rows,
            self.columns,
            delta=self.delta,
            constant=self.constant,
            custom=self.matrix(),
            seed=self.weight_seed,
        )
        if self.no_communication:
            return [[0.0] * len(row) for row in matrix]
        return matrix
