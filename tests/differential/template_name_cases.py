"""Cases for table (b) (docs/semantics.md section 6), built from a compact per-row spec.

    python -m tests.differential.template_name_cases --out DIR [--engine ENGINE] [--only NAME...]

``template_name_rows.yaml`` says, for every row of the stored scan (``tests/data/
noetl-template-names.json``), which recorded cases read that name (``cases``), or why no case can
exist (``none``), and holds the *probes*: a Jinja expression read in one place (``guard``: two
arcs on the expression and its negation; ``input``: the value passed into the next step's tool;
``set``: an arc's ``set`` read back by the next step; ``case``: a step's case rules; ``loop``: a
loop item's input; ``iterator``: a v1 iterator task's ``with``) after a first step whose result
is a ``dict``, a ``list``, a ``scalar`` or ``failed``. Each probe and result kind is one case,
``cases/template_names/<probe>_<kind>.yaml``; ``--out`` writes them without ``expect``, ready for
``python -m tests.differential.record`` (one batch per engine: the server's start-up is the cost).

The status column of section 6 is derived here too (:func:`row_status`): ``case A, B`` when every
case a row names matches noetlc, ``differs: <section-1 row> (Dnnn)`` when one is a declared
difference (``divergences.yaml``, the section-1 row citing that case and its code), else why no
case exists.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
SPEC = HERE / "template_name_rows.yaml"
CASES = HERE / "cases"
ROOT = HERE.parents[1]

# The short place ids of the spec, in the order of template_names.BUILDERS per engine.
PLACE_IDS = {
    "canonical": ("context", "output", "worker"),
    "case-v2": ("context",),
    "v1": ("render", "broker", "iterator"),
    "noetl5": ("state", "shims", "output", "set", "guard", "loop", "worker"),
}
COMMITS = {
    "canonical": "138c10ed7706c3a3644807e9f48e06796295f3bd",
    "case-v2": "dc55c49215151886a4239bfaeb46caaf36b6c84a",
    "v1": "58c2a16bc2a43bad5910e56a419ae27d9ab8d32f",
}
ENGINE_TEXT = {
    "canonical": (
        "noetl 138c10ed run live on loopback: server noetl/server/api/v2.py + engine "
        "noetl/core/dsl/v2/engine.py, worker noetl/worker/v2_worker_nats.py + "
        "noetl/worker/task_sequence_executor.py + noetl/tools/, Postgres event store, NATS "
        "JetStream (recorded with tests/differential/record.py)"
    ),
    "case-v2": (
        "noetl dc55c492 (case-v2 era) run live on loopback: server + engine "
        "noetl/core/dsl/v2/engine.py, NATS worker, Postgres event store (recorded with "
        "tests/differential/record.py)"
    ),
    "v1": (
        "noetl 58c2a16b (v1 era, the last commit before 96458eef's server rewrite) run live on "
        "loopback: server noetl/server (broker noetl/server/api/event/service/), queue-polling "
        "worker pool noetl/worker/worker.py + noetl/plugin/, Postgres event store and queue, no "
        "NATS (recorded with tests/differential/record.py)"
    ),
}
KINDS = ("dict", "list", "scalar", "failed")
_PY = {
    "dict": "result = {'a': 1}",
    "list": "result = [1, 2]",
    "scalar": "result = 7",
    "failed": "raise ValueError('boom')",
}
_V1 = {
    "dict": "def main():\n    return {'a': 1}\n",
    "list": "def main():\n    return [1, 2]\n",
    "scalar": "def main():\n    return 7\n",
    "failed": "def main():\n    raise ValueError('boom')\n",
}


def row_key(row: dict) -> str:
    from tests.differential.template_names import BUILDERS
    from tests.differential.template_names_noetl5 import RUST_BUILDERS

    builders = dict(BUILDERS, noetl5=RUST_BUILDERS)
    places = [b[0] for b in builders[row["engine"]]]
    return f"{row['engine']} {PLACE_IDS[row['engine']][places.index(row['place'])]} {row['name']}"


def load_spec() -> dict:
    return yaml.safe_load(SPEC.read_text(encoding="utf-8"))


def probe_cases(spec: dict) -> dict[str, tuple[str, dict, str]]:
    """case name -> (probe name, probe, result kind)."""
    out = {}
    for name, probe in spec["probes"].items():
        for kind in probe.get("results", KINDS):
            out[f"{name}_{kind}"] = (name, probe, kind)
    return out


def _canonical(probe: dict, kind: str, case_v2: bool) -> dict:
    expr, place = probe["expr"], probe["place"]
    code = probe.get("code", _PY[kind]) if kind == "dict" else _PY[kind]
    start: dict[str, Any] = {"step": "start", "tool": {"kind": "python", "code": code}}
    if probe.get("http"):
        start["tool"] = {"kind": "http", "url": "@HTTP@" + probe["http"]}
    took = {
        s: {"step": s, "tool": {"kind": "python", "code": f"result = {{'took': '{s}'}}"}}
        for s in ("yes", "no")
    }
    probe_step = {"step": "probe", "tool": {"kind": "python", "code": "result = {'v': v}"}}
    inputs_key = "args" if case_v2 else "input"
    steps: list[dict] = [start]

    def route(targets: list[tuple[str, str | None]]) -> None:
        if case_v2:  # case-v2 routes with a step's case rules
            start["case"] = [
                {
                    "when": when or "{{ event.name in ['call.done', 'call.error'] }}",
                    "then": {"next": [{"step": s}]},
                }
                for s, when in targets
            ]
        else:
            start["next"] = {
                "arcs": [dict({"step": s}, **({"when": w} if w else {})) for s, w in targets]
            }

    if place in ("guard", "case"):
        targets = [("yes", "{{ " + expr + " }}"), ("no", "{{ not (" + expr + ") }}")]
        if place == "case" and not case_v2:
            start["case"] = [{"when": w, "then": {"next": [{"step": s}]}} for s, w in targets]
        else:
            route(targets)
        steps += [took["yes"], took["no"]]
    elif place == "input":
        route([("probe", None)])
        if case_v2:
            probe_step["tool"]["args"] = {"v": "{{ " + expr + " }}"}
        else:
            probe_step[inputs_key] = {"v": "{{ " + expr + " }}"}
        steps.append(probe_step)
    elif place == "set":
        if case_v2:
            start["case"] = [
                {
                    "when": "{{ event.name in ['call.done', 'call.error'] }}",
                    "then": {"set": {"vars": {"v": "{{ " + expr + " }}"}}},
                },
                {
                    "when": "{{ event.name in ['call.done', 'call.error'] }}",
                    "then": {"next": [{"step": "probe"}]},
                },
            ]
            probe_step["tool"]["args"] = {"v": "{{ vars.v }}"}
        else:
            start["next"] = {"arcs": [{"step": "probe", "set": {"v": "{{ " + expr + " }}"}}]}
            probe_step["input"] = {"v": "{{ v }}"}
        steps.append(probe_step)
    elif place == "loop":
        start["loop"] = {"in": "{{ workload.items }}", "iterator": "it"}
        start["tool"]["code"] = "result = {'v': v}"
        if case_v2:
            start["tool"]["args"] = {"v": "{{ " + expr + " }}"}
            start["case"] = [
                {"when": "{{ event.name == 'loop.done' }}", "then": {"next": [{"step": "yes"}]}}
            ]
            steps.append(took["yes"])
        else:
            start["input"] = {"v": "{{ " + expr + " }}"}
    else:
        raise ValueError(f"{place}: no such place for a v2 playbook")
    return {
        "apiVersion": "noetl.io/v2",
        "kind": "Playbook",
        "metadata": {"name": "tn"},
        "workload": probe.get("workload", {"x": 5, "items": ["a", "b"]}),
        "workflow": steps,
    }


def _v1(name: str, probe: dict, kind: str) -> dict:
    expr, place = probe["expr"], probe["place"]
    first: dict[str, Any] = {"step": "a", "type": "python", "code": _V1[kind]}
    steps: list[dict] = [{"step": "start", "next": [{"step": "a"}]}, first]
    take = "def main(v):\n    return {'v': v}\n"
    if place == "guard":
        first["next"] = [
            {"when": "{{ " + expr + " }}", "step": "yes"},
            {"when": "{{ not (" + expr + ") }}", "step": "no"},
        ]
        for s in ("yes", "no"):
            steps.append(
                {
                    "step": s,
                    "type": "python",
                    "code": f"def main():\n    return {{'took': '{s}'}}\n",
                    "next": [{"step": "end"}],
                }
            )
    elif place == "input":
        first["next"] = [{"step": "probe"}]
        steps.append(
            {
                "step": "probe",
                "type": "python",
                "code": take,
                "with": {"v": "{{ " + expr + " }}"},
                "next": [{"step": "end"}],
            }
        )
    elif place == "iterator":
        steps[1] = {
            "step": "a",
            "type": "iterator",
            "collection": "{{ workload.items }}",
            "element": "it",
            "task": {"type": "python", "code": take, "with": {"v": "{{ " + expr + " }}"}},
            "next": [{"step": "end"}],
        }
    else:
        raise ValueError(f"{place}: no such place for a v1 playbook")
    steps.append({"step": "end"})
    return {
        "apiVersion": "noetl.io/v1",
        "kind": "Playbook",
        "metadata": {"name": name, "path": f"template_names/{name}"},
        "workload": probe.get("workload", {"x": 5, "items": ["a", "b"]}),
        "workflow": steps,
    }


def build_case(case_name: str, probe: dict, kind: str) -> dict:
    engine = probe["engine"]
    if engine == "v1":
        playbook = _v1(case_name, probe, kind)
    else:
        playbook = _canonical(probe, kind, engine == "case-v2")
    return {
        "name": case_name,
        "area": "template_names",
        "dialect": engine,
        "engine": ENGINE_TEXT[engine],
        "source": {
            "repository": "noetl/noetl",
            "commit": COMMITS[engine],
            "file": probe["file"],
        },
        "playbook": playbook,
    }


NOETL5_TEST = "test_template_names_noetl5.py"

# --- the status column -------------------------------------------------------------------

_CODE = re.compile(r"\b[A-Z][0-9]{3}\b")


def _section_one() -> list[tuple[str, str, str]]:
    """(behaviour, cited cases cell, codes cell) of each docs/semantics.md section-1 row."""
    text = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    section = text.split("## 1.", 1)[1].split("\n## 2.", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| behaviour", "|---")):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) >= 3:
            rows.append((cells[0], cells[-2], cells[-1]))
    return rows


def row_status(
    entry: dict,
    divergences: dict,
    section_one: list[tuple[str, str, str]],
    groups: dict[str, str] | None = None,
) -> str:
    """A row's status cell. A divergent case names its section-1 row: the one its divergence
    group maps to (the spec's reviewed ``groups``), else the one citing the case itself."""
    if entry.get("none"):
        return "no case: " + entry["none"]
    if "noetl5" in entry:  # NoETL 5 cannot run here: noetlc's value is pinned instead
        pin = entry["noetl5"]
        return f"not run (no cargo build); noetlc pinned by `{NOETL5_TEST}`: " + (
            "same as this line" if pin.get("same") else "differs: " + pin["differs"]
        )
    cases = entry["cases"]
    differs: dict[str, list[str]] = {}
    for case in cases:
        case_id = case if "/" in case else f"template_names/{case}"
        if case_id not in divergences:
            continue
        group = divergences[case_id].get("group", "")
        start = (groups or {}).get(group)
        cited = [r for r in section_one if start and r[0].startswith(start)] or [
            r for r in section_one if f"`{case_id}`" in r[1]
        ]
        short = case_id.split("/")[-1]
        if cited:
            behaviour = cited[0][0]
            behaviour = behaviour if len(behaviour) <= 48 else behaviour[:45] + "..."
            codes = ", ".join(_CODE.findall(cited[0][2])) or "none"
            differs.setdefault(f"row '{behaviour}' ({codes})", []).append(short)
        else:
            differs.setdefault(f"open, section 2 `{group}`", []).append(short)
    head = "case " + ", ".join(c.split("/")[-1] for c in cases)
    return "; ".join(
        [head]
        + [
            f"{', '.join(c)} differ{'s' if len(c) == 1 else ''}: {why}"
            for why, c in differs.items()
        ]
    )


def statuses(rows: list[dict]) -> dict[str, str]:
    """row key -> the status cell, for the rows of the stored scan."""
    from tests.differential.runner import load_divergences

    spec = load_spec()
    generated = probe_cases(spec)
    entries: dict[str, dict] = {k: dict(v) for k, v in spec["rows"].items()}
    for key, pin in spec.get("noetl5", {}).items():
        entries[f"noetl5 {key}"] = {"noetl5": pin}
    for case, (_, probe, _) in generated.items():
        for key in probe["rows"]:
            entries.setdefault(key, {}).setdefault("cases", [])
            entries[key]["cases"] = entries[key]["cases"] + [case]
    divergences, section_one = load_divergences(), _section_one()
    out = {}
    for row in rows:
        key = row_key(row)
        entry = entries.get(key)
        out[key] = (
            row_status(entry, divergences, section_one, spec.get("groups"))
            if entry
            else "no case listed"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential.template_name_cases")
    parser.add_argument("--out", type=Path, required=True, help="write <area>/<case>.yaml here")
    parser.add_argument("--engine", choices=sorted(COMMITS))
    parser.add_argument("--only", nargs="*", help="these probes only")
    args = parser.parse_args(argv)
    written = 0
    for case_name, (name, probe, kind) in probe_cases(load_spec()).items():
        if args.engine and probe["engine"] != args.engine:
            continue
        if args.only and name not in args.only:
            continue
        target = args.out / "template_names" / f"{case_name}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            yaml.safe_dump(build_case(case_name, probe, kind), sort_keys=False, width=100),
            encoding="utf-8",
        )
        written += 1
    print(f"{written} cases under {args.out}/template_names")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
