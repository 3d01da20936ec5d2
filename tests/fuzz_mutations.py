"""Hypothesis strategies that mutate real playbooks the way people break them: keys deleted,
duplicated and retyped, text truncated, unicode and huge values injected. Shared by the
robustness test (thousands of cases) and bench/fuzz_check.py (a hundred thousand)."""

from __future__ import annotations

import functools
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.corpus import corpus_files

HOSTILE_SCALARS = [
    None,
    True,
    0,
    -1,
    10**30,
    3.5,
    float("nan"),
    "",
    " ",
    "{{",
    "{{ x }",
    "{% if %}",
    "}}",
    "{{ a | nofilter }}",
    "é\u202e\u0000x",
    "\U0001f600" * 50,
    "x" * 200_000,
    "\t\tindent",
    "'\"\\",
    "def main(:\n  return",
    "- a\n- b",
    "*alias",
    "&anchor x",
    "[1, 2",
    "{a: 1",
    "step",
    "next",
    "start",
    "end",
    "workload",
    "ctx.x",
    "kind: python",
]


@functools.cache
def corpus_texts() -> tuple[str, ...]:
    return tuple(p.read_text(encoding="utf-8") for p in corpus_files())


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, prefix + (index,))
    return found


def _parent(root: Any, path: tuple) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


@st.composite
def mutated_playbook(draw) -> str:
    text = draw(st.sampled_from(corpus_texts()))
    how = draw(
        st.sampled_from(["truncate", "splice", "delete", "retype", "duplicate", "rename", "many"])
    )
    if how == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if how == "splice":
        at = draw(st.integers(0, len(text)))
        junk = draw(
            st.one_of(st.text(max_size=40), st.sampled_from([str(s) for s in HOSTILE_SCALARS]))
        )
        return text[:at] + junk + text[at:]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    rounds = draw(st.integers(2, 6)) if how == "many" else 1
    for _ in range(rounds):
        data = _mutate_data(
            draw,
            data,
            how
            if how != "many"
            else draw(st.sampled_from(["delete", "retype", "duplicate", "rename"])),
        )
    out = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6)
    if how == "duplicate" and draw(st.booleans()):
        lines = out.splitlines(keepends=True)
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        out = "".join(
            lines[: at + 1] + lines[at : at + 1] + lines[at + 1 :]
        )  # a duplicated key line
    return out


def _mutate_data(draw, data: Any, how: str) -> Any:
    paths = [p for p in _paths(data) if p]
    if not paths:
        return draw(st.sampled_from(HOSTILE_SCALARS))
    path = draw(st.sampled_from(paths))
    parent = _parent(data, path)
    key = path[-1]
    if how == "delete":
        del parent[key]
    elif how == "retype":
        parent[key] = draw(
            st.one_of(
                st.sampled_from(HOSTILE_SCALARS),
                st.text(max_size=20),
                st.lists(st.integers(), max_size=3),
                st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
            )
        )
    elif how == "duplicate" and isinstance(parent, list):
        parent.insert(key, parent[key])
    elif how == "rename" and isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=12))] = parent.pop(key)
    return data
