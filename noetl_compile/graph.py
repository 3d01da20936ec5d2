"""`noetlc graph PLAYBOOK`: draw the compiled step graph (Mermaid, Graphviz DOT, SVG, PNG).

What is drawn is the IR the DAG file is emitted from, so the picture shows what will run:
steps (shaped by their lowering: plain step, loop, cursor loop, nested playbook, gate), arcs
with their guards (solid: exclusive routing, thick: inclusive; ``loop.done`` and ``else`` are
labelled), joins, cyclic regions and v1 loop bodies as boxes around their steps, and steps that
are not compiled because no route reaches them. SVG and PNG go through graphviz's ``dot``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Any

__all__ = ["run", "to_dot", "to_mermaid"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
_MAX_LABEL = 60


def _short(text: Any) -> str:
    value = " ".join(str(text).split())
    if value.startswith("{{") and value.endswith("}}"):
        value = value[2:-2].strip()
    return value if len(value) <= _MAX_LABEL else value[: _MAX_LABEL - 3] + "..."


def _shape(ir: Any, name: str) -> str:
    """How a step is drawn: its own lowering (a v1 loop body step is drawn as a plain step)."""
    node = ir.graph.nodes[name]
    payload = node.get("payload") or {}
    if isinstance(payload, dict) and isinstance(payload.get("loop"), dict):
        return node.get("shape") if node.get("shape") in ("loop_seq", "cursor") else "loop"
    return node.get("shape") if node.get("shape") in ("nested", "gate") else "step"


def _node_label(ir: Any, name: str) -> str:
    node = ir.graph.nodes[name]
    shape = _shape(ir, name)
    payload = node.get("payload") or {}
    loop = payload.get("loop") if isinstance(payload, dict) else None
    lines = [name]
    if shape in ("loop", "loop_seq", "cursor") and isinstance(loop, dict):
        limit = loop.get("max_in_flight")
        lines.append(
            f"loop over {loop.get('iterator')} ({loop.get('mode')}"
            + (f", max {limit}" if limit is not None else "")
            + ")"
        )
        if shape == "loop_seq":
            lines.append("iterates in one task")
    elif shape == "nested":
        lines.append(f"playbook {(payload.get('playbook') or {}).get('path')}")
    elif shape == "gate":
        lines.append(f"gate: {(payload.get('tool') or {}).get('gate')}")
    else:
        tool = payload.get("tool") if isinstance(payload, dict) else None
        if isinstance(tool, dict) and tool.get("kind"):
            lines.append(str(tool["kind"]))
        elif isinstance(payload, dict) and payload.get("pipeline"):
            lines.append(f"pipeline of {len(payload['pipeline'])}")
    if ir.graph.in_degree(name) > 1:
        lines.append("join")
    return "\n".join(_short(line) for line in lines)


def _edge_label(arc: dict[str, Any], conditional_before: bool) -> str:
    if arc.get("event") == "loop.done":
        return "loop.done"
    when = arc.get("when")
    if when is None:
        return "else" if conditional_before and arc.get("mode") == "exclusive" else ""
    return _short(when)


def _edges(ir: Any) -> list[tuple[str, str, str, str]]:
    """(source, target, label, mode) in workflow order of the source's arcs."""
    out = []
    for source in ir.graph:
        conditional = False
        for target in ir.graph.successors(source):
            for arc in ir.graph.edges[source, target]["arcs"]:
                label = _edge_label(arc, conditional)
                conditional = conditional or arc.get("when") is not None
                out.append((source, target, label, arc.get("mode", "exclusive")))
    seen, unique = set(), []
    for edge in out:
        if edge not in seen:
            seen.add(edge)
            unique.append(edge)
    return unique


def _clusters(ir: Any) -> list[tuple[str, list[str]]]:
    from .lower.fuse import FUSED_PREFIX

    clusters = []
    for unit in ir.units:
        if unit.kind == "region":
            fused = unit.id.startswith(f"{FUSED_PREFIX}_")
            title = "fused chain: one task" if fused else "cyclic region: one task"
            clusters.append((title, unit.steps))
        elif unit.kind == "loop" and (unit.lead or unit.trail):
            clusters.append(("fused loop: head and tail run the steps around it", unit.steps))
        elif unit.kind == "loop" and len(unit.steps) > 1:
            clusters.append(("v1 loop: body mapped per item", unit.steps))
    return clusters


def _mermaid_text(text: str) -> str:
    return (
        text.replace("&", "#amp;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("|", "#124;")
        .replace("\n", "<br>")
    )


def to_mermaid(ir: Any) -> str:
    ids = {name: f"n{i}" for i, name in enumerate(ir.graph)}
    shapes = {
        "gate": ("{{", "}}"),
        "nested": ("[[", "]]"),
        "loop": ("[/", "/]"),
        "loop_seq": ("[/", "/]"),
        "cursor": ("[/", "/]"),
        "region": ("(", ")"),
        "step": ("[", "]"),
    }
    lines = ["flowchart TD"]
    clustered = {name for _, members in _clusters(ir) for name in members}

    def node(name: str, indent: str) -> str:
        left, right = shapes.get(_shape(ir, name), ("[", "]"))
        return f'{indent}{ids[name]}{left}"{_mermaid_text(_node_label(ir, name))}"{right}'

    for name in ir.graph:
        if name not in clustered:
            lines.append(node(name, "    "))
    for index, (title, members) in enumerate(_clusters(ir)):
        lines.append(f'    subgraph c{index}["{_mermaid_text(title)}"]')
        lines += [node(name, "        ") for name in members]
        lines.append("    end")
    for source, target, label, mode in _edges(ir):
        arrow = "==>" if mode == "inclusive" else "-->"
        text = f'|"{_mermaid_text(label)}"|' if label else ""
        lines.append(f"    {ids[source]} {arrow}{text} {ids[target]}")
    if ir.excluded:
        lines.append(
            f'    skipped["{_mermaid_text("not compiled (unreachable): " + ", ".join(ir.excluded[:8]))}"]'
        )
        lines.append("    style skipped stroke-dasharray: 5 5")
    if ir.entry in ids:
        lines.append(f"    style {ids[ir.entry]} stroke-width:3px")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(ir: Any) -> str:
    ids = {name: f"n{i}" for i, name in enumerate(ir.graph)}
    shapes = {
        "gate": "hexagon",
        "nested": "component",
        "loop": "box3d",
        "loop_seq": "box3d",
        "cursor": "box3d",
        "step": "box",
    }
    lines = [
        f"digraph {_dot_text(ir.dag_id)} {{",
        "    rankdir=TB;",
        '    node [fontname="Helvetica", fontsize=11, style=rounded];',
        '    edge [fontname="Helvetica", fontsize=9];',
    ]
    clustered = {name for _, members in _clusters(ir) for name in members}

    def node(name: str, indent: str) -> str:
        shape = shapes.get(_shape(ir, name), "box")
        width = ", penwidth=2.5" if name == ir.entry else ""
        return (
            f"{indent}{ids[name]} [label={_dot_text(_node_label(ir, name))}, shape={shape}{width}];"
        )

    for name in ir.graph:
        if name not in clustered:
            lines.append(node(name, "    "))
    for index, (title, members) in enumerate(_clusters(ir)):
        lines.append(f"    subgraph cluster_{index} {{")
        lines.append(f"        label={_dot_text(title)}; style=dashed;")
        lines += [node(name, "        ") for name in members]
        lines.append("    }")
    for source, target, label, mode in _edges(ir):
        attrs = [f"label={_dot_text(label)}"] if label else []
        if mode == "inclusive":
            attrs.append("penwidth=2")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"    {ids[source]} -> {ids[target]}{suffix};")
    if ir.excluded:
        lines.append(
            f"    skipped [label={_dot_text('not compiled (unreachable): ' + ', '.join(ir.excluded[:8]))},"
            " shape=note, style=dashed];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


_EXTENSIONS = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}


def _usage(message: str) -> int:
    print(f"noetlc: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def output_format(requested: str | None, output: str | None) -> str:
    """The format to draw: ``--format``, else the one ``-o FILE``'s extension names, else mermaid.
    Raises ``ValueError`` when the two disagree or the extension names no format."""
    extension = os.path.splitext(output)[1].lower() if output else ""
    implied = _EXTENSIONS.get(extension)
    if output and extension and implied is None and requested is None:
        raise ValueError(
            f"cannot tell the format from {output!r}: use an extension among "
            f"{', '.join(sorted(_EXTENSIONS))} or --format"
        )
    if requested and implied and requested != implied:
        raise ValueError(f"--format {requested} does not match the extension of {output!r}")
    return requested or implied or "mermaid"


def run(args: argparse.Namespace) -> int:
    from .check import check_results, read_file
    from .compile import lower_result
    from .report import FORMATTERS

    if os.path.isdir(args.path):
        return _usage(f"graph draws one playbook file; {args.path} is a folder")
    if not os.path.isfile(args.path):
        return _usage(f"no such file: {args.path}")
    if args.output and os.path.isdir(args.output):
        return _usage(f"-o names a file to write; {args.output} is a folder")
    try:
        fmt = output_format(args.format, args.output)
    except ValueError as exc:
        return _usage(str(exc))
    if fmt == "png" and not args.output and sys.stdout.isatty():
        return _usage("a PNG is binary: write it to a file with -o FILE.png (or redirect stdout)")
    result = read_file(args.path, args.dialect)
    check_results([result])
    errors = [d for d in result.diagnostics if d.severity.label == "error"]
    if errors or result.playbook is None:
        sys.stderr.write(FORMATTERS["concise"](errors, {result.path: result.document.text}))
        return EXIT_FINDINGS
    ir = lower_result(result, os.path.basename(args.path))
    if fmt == "mermaid":
        return _write_text(to_mermaid(ir), args.output)
    dot = to_dot(ir)
    if fmt == "dot":
        return _write_text(dot, args.output)
    binary = shutil.which("dot")
    if binary is None:
        print(
            f"noetlc: graphviz is not installed (no `dot` on PATH), so {fmt} cannot be drawn; "
            "install graphviz, or use --format mermaid or --format dot",
            file=sys.stderr,
        )
        return EXIT_USAGE
    rendered = subprocess.run(
        [binary, f"-T{fmt}"], input=dot.encode("utf-8"), capture_output=True, check=False
    )
    if rendered.returncode != 0:
        print(
            f"noetlc: dot failed: {rendered.stderr.decode('utf-8', 'replace').strip()}",
            file=sys.stderr,
        )
        return EXIT_FINDINGS
    if args.output:
        with open(args.output, "wb") as handle:
            handle.write(rendered.stdout)
    else:
        sys.stdout.buffer.write(rendered.stdout)
    return EXIT_OK


def _write_text(text: str, output: str | None) -> int:
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return EXIT_OK
