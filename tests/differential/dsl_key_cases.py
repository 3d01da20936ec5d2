"""The playbooks that record table (a)'s rows (docs/semantics.md section 5), from a compact spec.

    python -m tests.differential.dsl_key_cases [--only NAME...]
    python -m tests.differential.record --noetl CHECKOUT_138c10ed --python NOETL_PYTHON --http \
        $(python -m tests.differential.dsl_key_cases --pending canonical)

Each `dsl_key_specs.SPECS` entry is one row of the scan (engine, key, default: the row's identity in
``tests/data/noetl-dsl-keys.json``), the engine file that reads it, and two playbooks: the key
absent (the engine's default decides) and present with a value other than the default. The
generator writes ``cases/dsl_keys/<name>_absent.yaml`` and ``<name>_present.yaml`` without an
``expect``; ``record.py`` runs them on NoETL's engine and writes the ``expect`` in place (one
recorder session per engine, ``--http`` for ``@HTTP@``). A case file that already holds an
``expect`` for the same playbook is left as it is, so re-running the generator is free. Every
case carries ``row:`` (engine, key, default, variant): ``dsl_keys.py`` reads it to give the
row its status.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from tests.differential.dsl_key_specs import CANONICAL
from tests.differential.dsl_key_specs_canonical import CANONICAL_MORE
from tests.differential.dsl_key_specs_case_v2 import CASE_V2_MORE
from tests.differential.dsl_key_specs_nested import NESTED
from tests.differential.dsl_key_specs_older import CASE_V2, V1
from tests.differential.dsl_key_specs_v1 import V1_MORE
from tests.differential.dsl_key_specs_v1_calls import V1_CALLS

SPECS = CANONICAL + CANONICAL_MORE + CASE_V2 + CASE_V2_MORE + V1 + V1_MORE + NESTED + V1_CALLS

CASES = Path(__file__).parent / "cases" / "dsl_keys"
ENGINES = {
    "canonical": (
        "138c10ed7706c3a3644807e9f48e06796295f3bd",
        "noetl 138c10ed run live on loopback: server noetl/server/api/v2.py + engine "
        "noetl/core/dsl/v2/engine.py, worker noetl/worker/v2_worker_nats.py + "
        "noetl/worker/task_sequence_executor.py + noetl/tools/, Postgres event store, NATS "
        "JetStream (recorded with tests/differential/record.py)",
    ),
    "case-v2": (
        "dc55c49215151886a4239bfaeb46caaf36b6c84a",
        "noetl dc55c492 (case-v2 era) run live on loopback: server noetl/server/api/v2.py + "
        "engine noetl/core/dsl/v2/engine.py, worker noetl/worker/v2_worker_nats.py + "
        "noetl/tools/, Postgres event store, NATS JetStream (recorded with "
        "tests/differential/record.py)",
    ),
    "v1": (
        "58c2a16bc2a43bad5910e56a419ae27d9ab8d32f",
        "noetl 58c2a16b (v1 era, the last commit before 96458eef's server rewrite) run live on "
        "loopback: server noetl/server (broker noetl/server/api/event/service/), queue-polling "
        "worker pool noetl/worker/worker.py + noetl/plugin/, Postgres event store and queue, no "
        "NATS (recorded with tests/differential/record.py)",
    ),
}


def cases() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, engine, key, default, file, absent, present in SPECS:
        commit, engine_text = ENGINES[engine]
        for variant, given in (("absent", absent), ("present", present)):
            stem = f"{name}_{variant}"
            out[stem] = {
                "name": stem,
                "area": "dsl_keys",
                "dialect": engine,
                "engine": engine_text,
                "source": {"repository": "noetl/noetl", "commit": commit, "file": file},
                "row": {"engine": engine, "key": key, "default": default, "variant": variant},
                **_fragment(given),
            }
    return out


def _fragment(given: dict[str, Any]) -> dict[str, Any]:
    """A variant is a playbook, or a case fragment ``{playbook, <case keys>}`` where the row
    needs more of the recorder than a playbook (``children``, ``register_path``: README.md)."""
    return dict(given) if "playbook" in given else {"playbook": given}


def _recorded_for(old: dict[str, Any], case: dict[str, Any]) -> bool:
    """``old`` holds an ``expect`` recorded for this very case (key order included: NoETL's
    engine may read it)."""
    keys = ("playbook", "children", "register_path")
    return "expect" in old and all(json.dumps(old.get(k)) == json.dumps(case.get(k)) for k in keys)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential.dsl_key_cases")
    parser.add_argument("--only", nargs="*", help="case names to write (default: all)")
    parser.add_argument(
        "--pending",
        metavar="ENGINE",
        help="print the case files of ENGINE that hold no `expect` yet (record.py's arguments)",
    )
    args = parser.parse_args(argv)
    if args.pending:
        for path in sorted(CASES.glob("*.yaml")):
            case = yaml.safe_load(path.read_text(encoding="utf-8"))
            if (case.get("row") or {}).get("engine") == args.pending and "expect" not in case:
                print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
        return 0
    written = []
    for stem, case in cases().items():
        if args.only and stem not in args.only:
            continue
        path = CASES / f"{stem}.yaml"
        if path.exists():
            old = yaml.safe_load(path.read_text(encoding="utf-8"))
            if _recorded_for(old, case):
                continue
        path.write_text(yaml.safe_dump(case, sort_keys=False, width=100), encoding="utf-8")
        written.append(str(path))
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
