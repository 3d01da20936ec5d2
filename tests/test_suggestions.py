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


def _exact_closest_within_one(word: str, choices: list[str]) -> str:
    """The definition the index must meet in a large namespace: the closest choice at most one
    edit away (case-blind), ties to the first in sort order."""
    found = sorted(
        (_full_table(word.lower(), c.lower()), c)
        for c in choices
        if c != word and _full_table(word.lower(), c.lower()) <= 1
    )
    return f"; did you mean {found[0][1]!r}?" if found else ""


@pytest.mark.parametrize("seed", range(3))
def test_large_namespace_suggests_the_closest_one_edit_typo(seed: int) -> None:
    rng = random.Random(seed)
    choices = sorted(
        {"".join(rng.choice("abcA") for _ in range(rng.randint(4, 7))) for _ in range(600)}
    )
    namespace = frozenset(choices)
    for _ in range(400):
        word = "".join(rng.choice("abcdA") for _ in range(rng.randint(4, 7)))
        assert did_you_mean(word, namespace) == _exact_closest_within_one(word, choices), word


def test_large_namespace_keeps_the_common_typos() -> None:
    steps = [f"load_part_{i}" for i in range(5_000)]
    assert did_you_mean("load_prt_42", steps) == "; did you mean 'load_part_42'?"  # deletion
    assert did_you_mean("load_patr_42", steps) == "; did you mean 'load_part_42'?"  # swap
    assert did_you_mean("LOAD_PART_42", steps) == "; did you mean 'load_part_42'?"  # case only
    # two edits away: the exact search would find it, the index of one-edit typos does not
    assert did_you_mean("lod_prt_42", steps) == ""


def test_thousands_of_unknown_names_in_a_large_namespace_take_linear_time(monkeypatch) -> None:
    # Not a timing assertion: the work is counted. Each question verifies a few candidates
    # instead of comparing with every name within reach of its length (5,000 here).
    from noetl_compile.read import suggest

    calls = 0
    original = suggest.edit_distance

    def counting(a: str, b: str, limit: int) -> int:
        nonlocal calls
        calls += 1
        return original(a, b, limit)

    monkeypatch.setattr(suggest, "edit_distance", counting)
    namespace = frozenset(f"step_number_{i}" for i in range(5_000))
    for i in range(2_000):
        did_you_mean(f"step_numbr_{i}x", namespace)
    assert calls <= 2_000 * 12, calls
