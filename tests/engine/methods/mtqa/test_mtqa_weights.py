"""MTQA's communication weights (paper 004, eq. 9 and the weight-matrix analysis): each preset's
exact matrix A, how A maps onto the cells, the ceil rounding of α × paragraphs, and the parameters
that refuse a matrix of the wrong shape."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from engine.methods.mtqa.params import MtqaParams
from engine.methods.mtqa.weights import (
    cell_alpha,
    matrix_shape,
    passed_count,
    passed_paragraphs,
    weight_matrix,
)


def test_a_is_rows_minus_one_by_columns_minus_one():
    assert matrix_shape(3, 4) == (2, 3)
    assert matrix_shape(1, 4) == (0, 3)
    assert matrix_shape(3, 1) == (2, 1)  # one column still needs its links' weights


@pytest.mark.parametrize(
    "preset, kwargs, expected",
    [
        ("constant", {"constant": 0.5}, [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]),
        ("constant", {"constant": 0.0}, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
        ("vert", {"delta": 0.1}, [[0.1, 0.1, 0.1], [0.2, 0.2, 0.2]]),
        ("vert", {"delta": 0.2}, [[0.2, 0.2, 0.2], [0.4, 0.4, 0.4]]),
        ("hor", {"delta": 0.1}, [[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]]),
        ("hor", {"delta": 0.2}, [[0.2, 0.4, 0.6], [0.2, 0.4, 0.6]]),
        ("vert_hor", {"delta": 0.1}, [[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]]),
        ("vert_hor", {"delta": 0.2}, [[0.2, 0.4, 0.6], [0.4, 0.6, 0.8]]),
        ("vert", {"delta": 0.6}, [[0.6, 0.6, 0.6], [1.0, 1.0, 1.0]]),  # 1.2 is clipped to 1
        ("custom", {"custom": [[0.0, 0.5, 1.0], [0.25, 0.75, 0.1]]}, [[0.0, 0.5, 1.0], [0.25, 0.75, 0.1]]),
    ],
)
def test_each_deterministic_preset_gives_its_exact_matrix(preset, kwargs, expected):
    assert weight_matrix(preset, 3, 4, **kwargs) == expected


def test_uniform_is_seeded_uniform_values_in_0_1():
    rng = random.Random(7)
    expected = [[round(rng.random(), 9) for _ in range(3)] for _ in range(2)]
    assert weight_matrix("uniform", 3, 4, seed=7) == expected
    assert weight_matrix("uniform", 3, 4, seed=7) != weight_matrix("uniform", 3, 4, seed=8)


def test_gaussian_is_seeded_standard_normal_normalised_to_0_1():
    rng = random.Random(3)
    samples = [rng.gauss(0.0, 1.0) for _ in range(6)]
    low, high = min(samples), max(samples)
    expected = [round((v - low) / (high - low), 9) for v in samples]
    matrix = weight_matrix("gaussian", 3, 4, seed=3)
    assert [v for row in matrix for v in row] == expected
    flat = [v for row in matrix for v in row]
    assert min(flat) == 0.0 and max(flat) == 1.0
    assert weight_matrix("gaussian", 2, 2, seed=3) == [[0.5]]  # a single weight cannot be spread


def test_a_maps_onto_the_cells_and_the_last_column_reuses_the_one_before():
    a = weight_matrix("vert_hor", 3, 4, delta=0.1)
    grid = [[cell_alpha(a, r, c) for c in range(4)] for r in range(3)]
    assert grid == [
        [None, None, None, None],  # a column's first thought has nothing above it
        [0.1, 0.2, 0.3, 0.3],
        [0.2, 0.3, 0.4, 0.4],
    ]


@pytest.mark.parametrize(
    "alpha, paragraphs, passed",
    [
        (0.1, 3, 1),
        (0.2, 5, 1),
        (0.3, 5, 2),
        (0.4, 3, 2),
        (0.5, 3, 2),
        (1.0, 4, 4),
        (0.3, 10, 3),  # 0.3 × 10 is 3.0000000000000004 in floating point: still 3
        (0.7, 10, 7),
        (0.0, 5, 0),
        (None, 5, 0),
        (0.5, 0, 0),
    ],
)
def test_alpha_passes_the_ceiling_of_its_share_of_paragraphs(alpha, paragraphs, passed):
    assert passed_count(alpha, paragraphs) == passed


def test_the_last_paragraphs_are_passed():
    assert passed_paragraphs(0.4, ["a", "b", "c", "d", "e"]) == ["d", "e"]
    assert passed_paragraphs(0.0, ["a", "b"]) == []


def test_params_default_to_the_papers_configuration():
    params = MtqaParams()
    assert (params.rows, params.columns, params.weight_preset, params.delta) == (3, 4, "vert_hor", 0.1)
    assert (params.chunk_tokens, params.hops, params.scope) == (1200, 2, "question")
    assert params.weights() == [[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]]
    assert MtqaParams(no_communication=True).weights() == [[0.0] * 3, [0.0] * 3]
    assert "A[r−1][c]" in MtqaParams.model_fields["weight_preset"].description


def test_a_custom_matrix_comes_as_json_text_from_the_form_or_as_lists_from_the_cli():
    typed = MtqaParams(weight_preset="custom", rows=2, columns=3, custom_matrix="[[0.5, 1]]")
    assert typed.weights() == [[0.5, 1.0]]
    from engine.methods.params import build_params, parse_assignments

    given = build_params(
        MtqaParams,
        parse_assignments(["weight_preset=custom", "custom_matrix=[[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]]"]),
        method="mtqa",
    )
    assert given.weights() == [[0.1, 0.2, 0.3], [0.2, 0.3, 0.4]]
    assert MtqaParams(custom_matrix="").matrix() == []


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"weight_preset": "custom"}, r"custom_matrix must be 2 list\(s\) of 3"),
        ({"weight_preset": "custom", "custom_matrix": [[0.1, 0.2], [0.1, 0.2]]}, "custom_matrix must be"),
        ({"weight_preset": "custom", "custom_matrix": [[0.1, 0.2, 1.5], [0.1, 0.2, 0.3]]}, "between 0 and 1"),
        ({"weight_preset": "custom", "custom_matrix": "[[0.1, 0.2"}, "is not JSON"),
        ({"weight_preset": "custom", "custom_matrix": '{"a": 1}'}, "list of lists of numbers"),
        ({"no_source_text": True, "no_triples": True}, "leave the knowledge units empty"),
        ({"hops": 3}, "less than or equal to 2"),
        ({"scope": "collection"}, "needs a collection name"),
        ({"weight_preset": "diagonal"}, "weight_preset"),
    ],
)
def test_params_refuse_what_cannot_run(values, problem):
    with pytest.raises(ValidationError, match=problem):
        MtqaParams(**values)
