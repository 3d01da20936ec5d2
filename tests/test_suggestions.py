""" "did you mean" suggestions: the banded edit distance and the choice among equals."""

from __future__ import annotations

import random

import pytest

from noetl_compile.read.base import did_you_mean, edit_distance


def _full_table(a: str, b: str) -> int:
    """Optimal string alignment distance over the whole table: the definition."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        table[i][0] = i
    for j in range(len(b) + 1):
        table[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = min(
                table[i - 1][j] + 1,
                table[i][j - 1] + 1,
                table[i - 1][j - 1] + (a[i - 1] != b[j - 1]),
            )
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
    return table[len(a)][len(b)]


@pytest.mark.parametrize("seed", range(4))
def test_banded_distance_equals_the_full_table_capped_at_the_limit(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20_000):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        limit = rng.randint(0, 3)
        assert edit_distance(a, b, limit) == min(_full_table(a, b), limit + 1), (a, b, limit)


def test_suggestions_pick_the_closest_then_the_first_in_sort_order() -> None:
    assert did_you_mean("worklaod", ["workload", "workbook", "ctx"]) == "; did you mean 'workload'?"
    assert did_you_mean("ab", ["ac", "aa", "b"]) == "; did you mean 'aa'?"  # three at distance 1
    assert did_you_mean("WORKLOAD", ["workload"]) == "; did you mean 'workload'?"  # case blind
    assert did_you_mean("x", ["workload"]) == ""  # nothing within one edit
    assert did_you_mean("workload", ["workload"]) == ""  # the word itself is no suggestion
