"""Spelling suggestions ("did you mean"): the closest name a word is a typo of, by optimal
string alignment distance, linear in the names asked about even in a large namespace.
``read/base.py`` re-exports ``did_you_mean`` and ``edit_distance`` for the readers and checks."""

from __future__ import annotations

import functools
from collections.abc import Iterable

__all__ = ["did_you_mean", "edit_distance"]


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (typos: insert, delete, replace, swap), capped at limit+1.

    Only the band of cells within ``limit`` of the diagonal is computed (a cell outside it is
    more than ``limit`` edits away), and a row past the limit ends the search."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    cap = limit + 1
    width = len(b)
    before: list[int] = []
    previous = [j if j <= limit else cap for j in range(width + 1)]
    for i in range(1, len(a) + 1):
        ca = a[i - 1]
        current = [cap] * (width + 1)
        current[0] = row_best = i if i <= limit else cap
        for j in range(max(1, i - limit), min(width, i + limit) + 1):
            # Comparisons, not min(): this loop runs once per cell for every unknown name of a
            # file, and a builtin call per cell made it a third slower.
            cb = b[j - 1]
            cost = previous[j - 1] + (ca != cb)
            if previous[j] + 1 < cost:  # noqa: PLR1730
                cost = previous[j] + 1
            if current[j - 1] + 1 < cost:  # noqa: PLR1730
                cost = current[j - 1] + 1
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb and before[j - 2] + 1 < cost:
                cost = before[j - 2] + 1
            current[j] = cost if cost < cap else cap  # noqa: FURB136
            if cost < row_best:  # noqa: PLR1730
                row_best = cost
        if row_best > limit:
            return cap
        before, previous = previous, current
    return previous[width]


@functools.lru_cache(maxsize=64)
def _by_length(choices: frozenset[str]) -> dict[int, list[tuple[str, str]]]:
    """Choices as (lowered, original) in sorted order, grouped by length: a word is compared only
    with choices an edit within its limit could reach (a file with thousands of unknown names
    asks once per name)."""
    groups: dict[int, list[tuple[str, str]]] = {}
    for choice in sorted(choices):
        groups.setdefault(len(choice), []).append((choice.lower(), choice))
    return groups


# A word is compared with every choice within reach of its length while there are at most this
# many: past it, a file with thousands of unknown names among thousands of steps would take
# time quadratic in its size, and a one-edit index answers instead (see _closest_by_index).
_EXACT_SEARCH_LIMIT = 64
# Choices the index hands over for one word are verified in sort order up to this many: names
# differing in one rare character can share a one-deletion variant by the thousand.
_INDEX_CANDIDATE_LIMIT = 256


@functools.lru_cache(maxsize=4096)
def _closest(word: str, choices: frozenset[str]) -> str | None:
    # A typo is a small edit relative to the word: one for short names, up to three for long ones.
    limit = 1 if len(word) <= 4 else 2 if len(word) <= 10 else 3
    lowered = word.lower()
    groups = _by_length(choices)
    lengths = range(len(word) - limit, len(word) + limit + 1)
    if sum(len(groups.get(length, ())) for length in lengths) > _EXACT_SEARCH_LIMIT:
        return _closest_by_index(word, lowered, choices)
    candidates = [pair for length in lengths for pair in groups.get(length, ())]
    best: tuple[int, str] | None = None  # (distance, choice): ties go to the first in sort order
    for choice_lower, choice in candidates:
        distance = edit_distance(lowered, choice_lower, limit)
        if distance <= limit and choice != word and (best is None or (distance, choice) < best):
            best = (distance, choice)
    return best[1] if best else None


def _one_deletion_variants(word: str) -> set[str]:
    return {word, *(word[:i] + word[i + 1 :] for i in range(len(word)))}


@functools.lru_cache(maxsize=16)
def _one_deletion_index(choices: frozenset[str]) -> dict[str, list[tuple[str, str]]]:
    """Each choice (lowered, original) under itself and every string one deletion away, in sort
    order. Two words one edit apart (insert, delete, replace, swap) share an entry: the search
    in a large namespace costs a few lookups per word instead of a pass over all names."""
    index: dict[str, list[tuple[str, str]]] = {}
    for choice in sorted(choices):
        lowered = choice.lower()
        for variant in _one_deletion_variants(lowered):
            index.setdefault(variant, []).append((lowered, choice))
    return index


def _closest_by_index(word: str, lowered: str, choices: frozenset[str]) -> str | None:
    """The closest choice at most one edit from ``word`` (ties: the first in sort order), found
    through the deletion index: in a large namespace only one-edit typos are suggested."""
    index = _one_deletion_index(choices)
    candidates = sorted(
        {pair for variant in _one_deletion_variants(lowered) for pair in index.get(variant, ())},
        key=lambda pair: pair[1],
    )
    best: tuple[int, str] | None = None  # as in _closest: a case-only difference comes first
    for choice_lower, choice in candidates[:_INDEX_CANDIDATE_LIMIT]:
        distance = edit_distance(lowered, choice_lower, 1)
        if distance <= 1 and choice != word and (best is None or (distance, choice) < best):
            best = (distance, choice)
    return best[1] if best else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    # A frozenset of names is taken as it is: callers asking about many words in one large
    # namespace pass one, so each question does not rebuild the namespace.
    names = choices if isinstance(choices, frozenset) else frozenset(str(c) for c in choices)
    match = _closest(str(word), names)
    return f"; did you mean {match!r}?" if match else ""
