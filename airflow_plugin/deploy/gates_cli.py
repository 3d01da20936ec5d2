"""`noetlc gates` and `noetlc signal`: the commands over ``deploy.hitl`` (called lazily by
``noetl_compile.cli``). Errors are one line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..events import names
from ..templating.ids import ids_as_text
from .hitl import GateCommandError, answer_gate, connect, find_gate, waiting_gates
from .rest import AirflowApiError, AirflowClient

__all__ = ["run_gates", "run_signal"]

EXIT_OK, EXIT_FAILED = 0, 1


def _session(args: argparse.Namespace) -> AirflowClient:
    return connect(args.url, args.user, args.password)


def _fail(exc: Exception) -> int:
    print(f"noetlc: error: {exc}", file=sys.stderr)
    return EXIT_FAILED


def run_gates(args: argparse.Namespace) -> int:
    try:
        session = _session(args)
        try:
            rows = waiting_gates(session)
        finally:
            session.close()
    except (GateCommandError, AirflowApiError) as exc:
        return _fail(exc)
    _add_timeouts(rows)
    if args.json:
        for row in rows:
            print(json.dumps(ids_as_text(row), ensure_ascii=False, default=str))
        return EXIT_OK
    if not rows:
        print("no gate is waiting")
        return EXIT_OK
    for row in rows:
        print(_line(row))
    return EXIT_OK


def _add_timeouts(rows: list[dict[str, Any]]) -> None:
    """The gates' timeouts, from their ``PlaybookPaused`` events when ``NOETL_EVENTS_URL`` names
    the deployment's event log (Airflow's API does not serve a HITL request's deadline)."""
    url = os.environ.get("NOETL_EVENTS_URL")
    if not rows or not url:
        return
    from ..events.store import EventStore, StoreUnavailable

    store = EventStore(url)
    try:
        for row in rows:
            paused = [
                event
                for event in store.events(int(row["execution_id"]), names=[names.PLAYBOOK_PAUSED])
                if event.get("entity_id") == row["gate"]
            ]
            if paused:
                data = paused[-1].get("data") or {}
                row["timeout"], row["timeout_at"] = data.get("timeout"), data.get("timeout_at")
    except StoreUnavailable as exc:
        print(f"noetlc: the event log is unreachable, timeouts unknown: {exc}", file=sys.stderr)
    finally:
        store.dispose()


def _line(row: dict[str, Any]) -> str:
    kind = "input" if row["params"] else "approve"
    answer = (
        " ".join(f"--value {name}=..." for name in row["params"])
        if row["params"]
        else "--approve|--reject"
    )
    who = ", ".join(row["assignees"]) or "anyone"
    if not row["defaults"]:
        on_timeout = "fails"
    elif row["params"]:
        on_timeout = "takes the defaults"
    else:
        on_timeout = f"takes {row['defaults'][0].lower()}"
    if row.get("timeout_at"):
        on_timeout = f"timeout: {row['timeout']} (at {row['timeout_at']}), then {on_timeout}"
    else:
        on_timeout = f"on timeout: {on_timeout}"
    return (
        f"{row['execution_id']}  {row['gate']}  ({kind})  since {row['since']}\n"
        f"    {row['subject']}\n"
        f"    for: {who}; {on_timeout}; run {row['dag_id']} / {row['run_id']}\n"
        f"    answer: noetlc signal {row['execution_id']} {row['gate']} {answer}"
    )


def run_signal(args: argparse.Namespace) -> int:
    targets = list(args.target)
    if len(targets) == 2:
        execution, gate = targets
    elif len(targets) == 1 and args.dag and args.run:
        execution, gate = None, targets[0]
    else:
        return _fail(
            GateCommandError("usage: noetlc signal EXECUTION GATE, or GATE --dag D --run R")
        )
    try:
        session = _session(args)
        try:
            row = find_gate(session, gate, execution, args.dag, args.run)
            answer_gate(session, row, approve=args.approve, reject=args.reject, values=args.values)
        finally:
            session.close()
    except (GateCommandError, AirflowApiError) as exc:
        return _fail(exc)
    what = "approve" if args.approve else "reject" if args.reject else " ".join(args.values)
    print(
        f"answered gate {gate} of execution {row['execution_id']} "
        f"({row['dag_id']} / {row['run_id']}): {what}"
    )
    return EXIT_OK
