"""docs/semantics.md's engine table, generated from the engine profiles (one source: a test
fails when the page and the objects disagree). ``python -m noetl_compile.engine_table
docs/semantics.md`` rewrites the table between the page's markers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from .engine_behaviours import EngineProfile
from .engine_profiles import PROFILES

__all__ = ["TABLE_BEGIN", "TABLE_END", "engine_table", "with_engine_table"]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(f"`{item}`" for item in value) or "none"
    return str(value)


def _cell(profile: EngineProfile, name: str) -> str:
    source = profile.sources[name]
    parts = source.where.split(":")
    repo = parts[0] if len(parts) == 3 else next(iter(profile.commits))
    text = f"{source.says} (`{repo}` `{':'.join(parts[-2:])}`)"
    if source.differs:
        text += f"; **noetlc differs:** {source.differs}"
    return text


def engine_table(profiles: Sequence[EngineProfile] | None = None) -> str:
    """docs/semantics.md's engine table: one row per behaviour, what each engine's source does
    (with its file and line) and what noetlc does on Airflow (the value it applies for each
    profile)."""
    profiles = list(PROFILES.values() if profiles is None else profiles)
    commits = "; ".join(
        f"{p.title}: " + ", ".join(f"`{repo}@{sha[:8]}`" for repo, sha in p.commits.items())
        for p in profiles
    )
    lines = [
        (
            f"Sources: {commits}. Generated from `noetl_compile/engine_profiles.py` by "
            "`noetl_compile/engine_table.py`; do not edit by hand."
        ),
        "",
        "| Behaviour | " + " | ".join(p.title for p in profiles) + " | noetlc on Airflow |",
        "|---" * (len(profiles) + 2) + "|",
    ]
    for f in fields(EngineProfile):
        if "doc" not in f.metadata:
            continue
        values = " · ".join(f"{p.title}: {_value(getattr(p, f.name))}" for p in profiles)
        row = [
            f"`{f.name}`: {f.metadata['doc']}",
            *(_cell(p, f.name) for p in profiles),
            f"{values}. {f.metadata['airflow']}",
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


TABLE_BEGIN, TABLE_END = "<!-- engine-table:begin -->", "<!-- engine-table:end -->"


def with_engine_table(page: str) -> str:
    """``page`` with the text between its table markers replaced by :func:`engine_table`."""
    if page.count(TABLE_BEGIN) != 1 or page.count(TABLE_END) != 1:
        raise ValueError(f"the page needs one {TABLE_BEGIN} and one {TABLE_END} line")
    head, rest = page.split(TABLE_BEGIN, 1)
    tail = rest.split(TABLE_END, 1)[1]
    return f"{head}{TABLE_BEGIN}\n{engine_table()}{TABLE_END}{tail}"


if __name__ == "__main__":  # pragma: no cover - `python -m noetl_compile.engine_table [PAGE]`
    import sys
    from pathlib import Path

    if len(sys.argv) > 1:  # rewrite the table of that page (docs/semantics.md) in place
        path = Path(sys.argv[1])
        path.write_text(with_engine_table(path.read_text()))
    else:
        print(engine_table(), end="")
