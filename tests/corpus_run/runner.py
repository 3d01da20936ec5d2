"""Compile a corpus playbook with the real compiler and run it under ``dag.test()``.

Used by ``test_corpus_run.py`` (every runnable corpus playbook, results asserted) and
``test_differential.py`` (native lowering vs the whole playbook interpreted as one region).

A run goes like this:

* the playbook and the child playbooks it calls (same dialect folder, found by their
  ``metadata.path``) are compiled together with ``noetlc compile`` into a temporary folder;
* the DAG files are copied into ``<dags folder>/corpus_run/`` (children must be DAG files of
  the dags folder: the inline child run finds them by dag id there); the folder is emptied
  before every run, so DAGs of different dialects that share a ``metadata.path`` (hence a dag
  id) never meet, and ``dag.test()`` (which parses the whole dags folder) stays cheap;
* the run goes through the ``run_dag`` fixture with the workload overrides as ``dag_run.conf``
  (what ``noetlc run --set`` does), with a :class:`MemoryRecorder` installed as the process
  recorder: tasks run in this process under ``dag.test()``, so every runtime event lands there.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.corpus import CORPUS

__all__ = [
    "CompiledSet",
    "CorpusRun",
    "children_of",
    "compile_set",
    "install_dags",
    "run_corpus_playbook",
    "step_results_from_xcom",
    "substitute",
]

DIALECTS = ("v1", "case-v2", "canonical", "seeds")
SUBFOLDER = "corpus_run"


# --------------------------------------------------------------------------------------------
# Children: the playbooks a playbook calls, by metadata.path, inside its dialect folder
# --------------------------------------------------------------------------------------------


def _metadata_path(path: Path) -> str | None:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    value = meta.get("path") if isinstance(meta, dict) else None
    return value.strip().strip("/") if isinstance(value, str) and value.strip() else None


_PATHS: dict[str, dict[str, list[str]]] = {}


def _paths_of(dialect: str) -> dict[str, list[str]]:
    """metadata.path -> corpus files (relative) of one dialect folder."""
    if dialect not in _PATHS:
        table: dict[str, list[str]] = {}
        for path in sorted((CORPUS / dialect).rglob("*.y*ml")):
            meta = _metadata_path(path)
            if meta:
                table.setdefault(meta, []).append(path.relative_to(CORPUS).as_posix())
        _PATHS[dialect] = table
    return _PATHS[dialect]


_CALL = re.compile(r"""(?:path|playbook)\s*:\s*["']?/?([A-Za-z0-9_./-]+?)["']?\s*$""", re.MULTILINE)


def children_of(rel: str) -> list[str]:
    """Corpus files (same dialect) that ``rel`` calls by catalog path, transitively."""
    dialect = rel.split("/", 1)[0]
    table = _paths_of(dialect)
    found: list[str] = []
    pending = [rel]
    while pending:
        text = (CORPUS / pending.pop()).read_text(encoding="utf-8")
        for match in _CALL.finditer(text):
            for child in table.get(match.group(1).strip("/"), []):
                if child != rel and child not in found:
                    found.append(child)
                    pending.append(child)
    return found


# --------------------------------------------------------------------------------------------
# Compile
# --------------------------------------------------------------------------------------------

_DAG_ID = re.compile(r'dag_id="([^"]+)"')
_SHA = re.compile(r"^SHA-256: ([0-9a-f]{64})$", re.MULTILINE)


@dataclass
class CompiledSet:
    """DAG files of one compile run: the main playbook's dag id and every file's source."""

    main: str  # dag id of the playbook under test
    sources: dict[str, str]  # dag id -> DAG file text
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)  # main's PAYLOADS


def compile_set(
    rel: str, out: Path, children: list[str] | None = None, options: tuple[str, ...] = ()
) -> CompiledSet:
    """Compile ``rel`` and its children into ``out``; fail loudly with the compiler's report."""
    from noetl_compile.cli import main

    kids = children_of(rel) if children is None else children
    files = [str(CORPUS / rel), *(str(CORPUS / c) for c in kids)]
    report = io.StringIO()
    with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
        code = main(["compile", *files, "-o", str(out), *options])
    if code != 0:
        raise AssertionError(f"noetlc compile {rel} failed:\n{report.getvalue()}")
    digest = hashlib.sha256((CORPUS / rel).read_bytes()).hexdigest()
    sources: dict[str, str] = {}
    main_id = None
    for path in sorted(out.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        dag_id = _DAG_ID.search(text).group(1)
        sources[dag_id] = text
        sha = _SHA.search(text)
        if sha and sha.group(1) == digest:
            main_id = dag_id
    assert main_id, f"no DAG file for {rel} in {sorted(sources)}"
    # The PAYLOADS literal only (plain data; importing the DAG file would import Airflow).
    payloads = ast.literal_eval(_payloads_literal(sources[main_id]))
    return CompiledSet(main_id, sources, payloads)


def _payloads_literal(source: str) -> str:
    start = source.index("PAYLOADS = {") + len("PAYLOADS = ")
    end = source.index("\n}\n", start) + 2
    return source[start:end]


def install_dags(dags_folder: Path, compiled: CompiledSet) -> Path:
    """Empty ``<dags>/corpus_run`` and put the children there; returns the folder."""
    folder = dags_folder / SUBFOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for dag_id, text in compiled.sources.items():
        if dag_id != compiled.main:
            (folder / f"{dag_id}.py").write_text(text, encoding="utf-8")
    return folder


def clear_dags(dags_folder: Path, compiled: CompiledSet) -> None:
    shutil.rmtree(dags_folder / SUBFOLDER, ignore_errors=True)
    (dags_folder / f"{compiled.main}.py").unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------
# Workload overrides
# --------------------------------------------------------------------------------------------


def substitute(value: Any, placeholders: Mapping[str, str]) -> Any:
    """Replace ``{name}`` placeholders (``{http_server}``, ``{tmp}``) in strings, recursively."""
    if isinstance(value, str):
        for name, text in placeholders.items():
            value = value.replace("{" + name + "}", text)
        return value
    if isinstance(value, list):
        return [substitute(v, placeholders) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, placeholders) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def step_results_from_xcom(
    xcom: Mapping[str, Any], payloads: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Step name -> result, from the XCom values of a run.

    A step task (or a sequential loop) holds its own ``result``; a loop tail holds the loop
    step's result (and ``results`` of a v1 loop body); a region holds ``results`` of its members.
    Mapped loop bodies are skipped (their per-item values are in the tail).
    """
    out: dict[str, Any] = {}
    for task_id, value in sorted(xcom.items()):
        if not isinstance(value, Mapping):
            continue
        unit, _, inner = task_id.partition(".")
        if inner and inner != "tail":
            continue
        payload = payloads.get(unit) or {}
        inner_results = value.get("results")
        if isinstance(inner_results, Mapping):
            out.update(inner_results)
        if "region" in payload:
            continue
        if "result" in value and payload.get("step"):
            out[payload["step"]] = value["result"]
    return out


@dataclass
class CorpusRun:
    rel: str
    dag_id: str
    state: str
    run_id: str
    states: dict[str, str]
    xcom: dict[str, Any]
    results: dict[str, Any]  # step -> result (the DAG's own steps)
    events: list[Any]
    payloads: dict[str, dict[str, Any]]
    workload: dict[str, Any]  # the overrides sent as dag_run.conf
    execution_id: int

    def named(self, *names: str) -> list[Any]:
        return [e for e in self.events if e.name in names]

    def template_warnings(self, kind: str | None = None) -> list[Any]:
        return [
            e
            for e in self.named("TemplateWarning")
            if kind is None or (e.data or {}).get("kind") == kind
        ]

    def finished_results(self) -> Iterator[tuple[str, Any]]:
        """(step, result) of every successful step run, children and loop bodies included."""
        for event in self.named("StepFinished"):
            if event.status == "success":
                yield event.step or "?", (event.data or {}).get("result")

    def errors(self) -> list[str]:
        """Short descriptions of the failures the runtime reported (for assertion messages)."""
        lines = []
        for event in self.events:
            if event.name == "StepFinished" and event.status == "error":
                lines.append(f"step {event.step}: {(event.data or {}).get('error')}")
            elif event.name == "ToolErrored":
                result = (event.data or {}).get("result")
                lines.append(f"tool in {event.step}: {str(result)[:600]}")
        return lines

    def describe(self) -> str:
        failed = {t: s for t, s in self.states.items() if s not in ("success", "skipped")}
        return f"{self.rel} ({self.dag_id}) -> {self.state}; tasks not ok: {failed}\n" + "\n".join(
            self.errors()[-8:]
        )


def run_corpus_playbook(
    rel: str,
    *,
    dags_folder: Path,
    run_dag: Callable[..., Any],
    workdir: Path,
    conf: Mapping[str, Any] | None = None,
    children: list[str] | None = None,
    options: tuple[str, ...] = (),  # more `noetlc compile` options (`--fuse`)
) -> CorpusRun:
    from airflow_plugin.events import MemoryRecorder, set_default_recorder
    from airflow_plugin.runtime.ids import execution_id_for

    compiled = compile_set(rel, workdir / "compiled", children, options)
    install_dags(dags_folder, compiled)
    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        out = run_dag(compiled.sources[compiled.main], compiled.main, dict(conf or {}))
    finally:
        set_default_recorder(previous)
        clear_dags(dags_folder, compiled)
    return CorpusRun(
        rel=rel,
        dag_id=compiled.main,
        state=out.state,
        run_id=out.run_id,
        states=out.states,
        xcom=out.xcom,
        results=step_results_from_xcom(out.xcom, compiled.payloads),
        events=list(recorder.events),
        payloads=compiled.payloads,
        workload=dict(conf or {}),
        execution_id=execution_id_for(compiled.main, out.run_id),
    )


# --------------------------------------------------------------------------------------------
# Unrendered template text in results
# --------------------------------------------------------------------------------------------

_FRAGMENT = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_RAW = re.compile(r"\{%-?\s*raw\s*-?%\}(.*?)\{%-?\s*endraw\s*-?%\}", re.DOTALL)
# Keys whose string values the runtime never renders (python source, SQL/python files' text).
_LITERAL_KEYS = frozenset({"code", "code_b64"})


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def literal_texts_of(doc: Any) -> list[str]:
    """Text a playbook writes as a literal: python code, and `{% raw %}` sections anywhere."""
    out: list[str] = []

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if key in _LITERAL_KEYS:
                out.append(_squash(value))
            out.extend(_squash(m.group(1)) for m in _RAW.finditer(value))

    walk(doc, None)
    return out


def literal_texts(rels: list[str]) -> list[str]:
    out: list[str] = []
    for rel in rels:
        out += literal_texts_of(yaml.safe_load((CORPUS / rel).read_text(encoding="utf-8")))
    return out


def unrendered_fragments(value: Any, literals: list[str], where: str = "") -> list[str]:
    """``where: fragment`` for every template fragment in ``value`` that no literal text holds."""
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            found += unrendered_fragments(v, literals, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += unrendered_fragments(v, literals, f"{where}.{i}" if where else str(i))
    elif isinstance(value, str) and ("{{" in value or "{%" in value):
        for fragment in _FRAGMENT.findall(value) or [value]:
            if not any(_squash(fragment) in text for text in literals):
                found.append(f"{where}: {fragment[:160]}")
    return found
