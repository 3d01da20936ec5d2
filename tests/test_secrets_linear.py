"""Every secret detector, whole, is linear: 100,000 characters of spaces and of repeated near
matches each take under 50 ms (issue 35).

tests/test_regex_budget.py bounds each pattern alone; this bounds what the detectors do around
them (the prefilters, the loops over matches, entropy, base64 decoding, the key skeleton), on
near matches of every token format (built from each format's own pattern by
tests/regex_budget.py) and of every other disguise the detectors look for.
"""

from __future__ import annotations

import time

import pytest

from noetl_compile.check.secrets import (
    is_secret_key,
    keyed_secret,
    literal_text,
    text_secrets,
    token_like,
)
from noetl_compile.check.tokens import TOKEN_SHAPES
from noetl_compile.lookalike import mixed_script, skeleton
from tests import regex_budget

LENGTH = regex_budget.LENGTH
BUDGET_S = 0.050
UNITS = (
    " ",
    "a",
    "A1b2",
    "AIza",
    "ghp_",
    "-----BEGIN ",
    "Q~",
    "8Q~",
    "dapi",
    "hvs.",
    "-us1",
    ":AA",
    "{{ '' }}",
    "{{ '",
    "s3cr3t{{ '' }}",
    "https://",
    "https://Ab1",
    "https://Ab1Cd2Ef3Gh4@",
    "postgresql://u:",
    "postgresql://u:'",
    'postgresql://u:"a',
    "password='",
    "password=x'",
    "password: ",
    "--password ",
    "Bearer ",
    "Zq8d7F6g5H4j3K2m1N0p",
    "Q1JFQVRF",
    "p\u0430ssword",
)


def _near_matches() -> list[tuple[str, str]]:
    out = [(repr(unit), (unit * (LENGTH // len(unit) + 1))[:LENGTH]) for unit in UNITS]
    for what, pattern in TOKEN_SHAPES:
        for text in regex_budget.inputs(pattern.pattern, pattern.flags, LENGTH, most=4):
            out.append((what, text))
    return out


DETECTORS = {
    "text_secrets": lambda text: list(text_secrets(text)),
    "keyed_secret": keyed_secret,
    "token_like": token_like,
    "literal_text": literal_text,
    "is_secret_key": is_secret_key.__wrapped__,
    "skeleton": skeleton.__wrapped__,
    "mixed_script": mixed_script.__wrapped__,
}


def _timed(detector, text: str) -> float:
    best = float("inf")
    for _ in range(3):  # best of three: a shared machine's pauses are not the detector's
        start = time.thread_time()
        detector(text)
        best = min(best, time.thread_time() - start)
        if best < BUDGET_S:
            break
    return best


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_is_linear(name):
    detector = DETECTORS[name]
    worst = max((_timed(detector, text), what) for what, text in _near_matches())
    assert worst[0] < BUDGET_S, f"{name} took {worst[0] * 1000:.1f} ms on {worst[1]}"
