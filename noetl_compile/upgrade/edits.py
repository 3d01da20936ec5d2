"""Line edits on the original text, with ruamel.yaml rendering the new blocks.

Only the lines of a construct that changes are rewritten; every other byte of the file stays
as written (a whole-document round trip through a YAML library normalises flow-mapping spacing
and sequence indentation the author chose). ruamel.yaml's round-trip loader gives the
positions of keys and items and keeps each scalar's quoting, so a value carried into a new block
is printed as it was quoted.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

COMMENT_PREFIX = "noetlc upgrade:"


@dataclass
class Edit:
    start: int  # first line replaced (0-based)
    end: int  # line after the last replaced
    lines: list[str]  # the new lines, each ending in "\n"


@dataclass
class Edits:
    text: str
    items: list[Edit] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    def replace(self, start: int, end: int, lines: list[str]) -> None:
        self.items.append(Edit(start, end, lines))

    def apply(self) -> str:
        lines = self.lines
        blocks = [(e.start, e.end) for e in self.items if e.end > e.start]
        items = []
        for edit in self.items:
            if edit.start == edit.end:
                # A note inside a block that is replaced goes above the block.
                for start, end in blocks:
                    if start < edit.start < end:
                        edit = Edit(start, start, _outdent(edit.lines, lines[start]))
            items.append(edit)
        taken: list[tuple[int, int]] = []
        for edit in sorted(items, key=lambda e: (e.start, e.end), reverse=True):
            for start, end in taken:
                # Two edits of one line range would each undo part of the other.
                assert edit.end <= start or edit.start >= end or edit.start == edit.end, edit
            taken.append((edit.start, edit.end))
            lines[edit.start : edit.end] = edit.lines
        return "".join(lines)


def _outdent(moved: list[str], first: str) -> list[str]:
    """Comment lines moved above a replaced block, shifted left to the block's own indent (a
    note deeper than the block's key, after a block scalar, would be read as its text)."""
    indent = len(first) - len(first.lstrip())
    depths = [len(line) - len(line.lstrip()) for line in moved if line.strip()]
    shift = min(depths, default=indent) - indent
    if shift <= 0:
        return moved
    return [line[shift:] if line.strip() else line for line in moved]


def round_trip_loader() -> YAML:
    yaml = YAML()  # round trip: keeps comments, key order, quoting
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long line the author wrote on one line
    return yaml


def load(text: str) -> Any:
    return round_trip_loader().load(text)


def render(key: str, value: Any, indent: int) -> list[str]:
    """``key: value`` as block YAML whose first line starts at column ``indent``."""
    yaml = round_trip_loader()
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    block = CommentedMap()
    block[key] = value
    yaml.dump(block, out)
    pad = " " * indent
    # A line of spaces only is block-scalar text (code with an indented blank line): it keeps
    # its spaces and gets the pad too; only a truly empty line stays empty.
    return [pad + line if line.rstrip("\n") else line for line in out.getvalue().splitlines(True)]


def flow(mapping: dict) -> CommentedMap:
    out = CommentedMap(mapping)
    out.fa.set_flow_style()
    return out


def seq(items: list) -> CommentedSeq:
    return CommentedSeq(items)


def comment_lines(lines: list[str]) -> list[str]:
    """The comments written inside lines that are replaced: kept above the new block (a whole
    line comment as it is, an end-of-line comment on a line of its own), so no note is lost."""
    kept = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            kept.append(line if line.endswith("\n") else line + "\n")
            continue
        hash_at = _comment_start(line)
        if hash_at is not None:
            indent = len(line) - len(line.lstrip())
            kept.append(" " * indent + line[hash_at:].rstrip("\n") + "\n")
    return kept


def _comment_start(line: str) -> int | None:
    """Where an end-of-line comment starts (outside quotes), if any."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and index > 0 and line[index - 1] in " \t":
            return index
    return None


def note(indent: int, message: str) -> str:
    return " " * indent + f"# {COMMENT_PREFIX} {message}\n"
