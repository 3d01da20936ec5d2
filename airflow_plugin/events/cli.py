"""``noetlc events`` and ``noetlc status``: reading the event log from a shell.

* ``noetlc events`` lists the latest executions; ``noetlc events EXECUTION`` (or ``--dag D --run
  R``) prints its timeline, one event a line, in stored order; ``--json`` prints the rows;
* ``noetlc events flush`` delivers what waits in the local outbox;
* ``noetlc status EXECUTION`` prints the execution state rebuilt from the events alone.

Which log: ``--url``, else the environment (``config``), else, when no ``AIRFLOW_HOME`` is set
and ``noetlc run``'s managed home has one, that home's log. An execution id that log does not
hold is also looked up in ``noetlc run``'s managed home (unless a URL was given), so the id
that ``noetlc run`` printed works as is whatever ``AIRFLOW_HOME`` says; the timeline's first
line names the log it came from.

Called by ``noetl_compile.cli`` (which never imports Airflow); this module needs SQLAlchemy,
which comes with the airflow extra.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ..templating.ids import ids_as_text
from . import names
from .config import settings
from .instances import entity_name, map_labels
from .outbox import Outbox
from .projection import project
from .store import EventStore, StoreUnavailable

__all__ = ["resolve", "run_events", "run_status"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def resolve(
    url: str | None,
    environ: Mapping[str, str] | None = None,
    local_dir: Path | None = None,
) -> tuple[EventStore, Outbox]:
    """The store to read: ``url``, else the configured one; with nothing configured, the log in
    ``local_dir`` (the managed home of ``noetlc run``, which the caller names) when it exists."""
    env = os.environ if environ is None else environ
    options = settings(env)
    if url:
        return EventStore(url), Outbox(options.outbox)
    explicit = any(env.get(k) for k in ("NOETL_EVENTS_URL", "NOETL_EVENTS_CONN_ID"))
    configured = explicit or env.get("AIRFLOW_HOME") or env.get("NOETL_EVENTS_DIR")
    if not configured and local_dir is not None:
        local = local_dir
        if (local / "events.db").exists():
            return EventStore(str(local / "events.db")), Outbox(local / "outbox")
    return EventStore(options.url), Outbox(options.outbox)


def _run_home_store(
    url: str | None, first: EventStore, env: Mapping[str, str], local_dir: Path | None
) -> EventStore | None:
    """`noetlc run`'s own log, when it is not the one ``resolve`` chose and nothing named a log
    explicitly: with ``AIRFLOW_HOME`` set (every Airflow user's shell) ``resolve`` reads that
    home's log, while `noetlc run` writes to its managed home. An execution id not found in the
    first is looked up there, so the id a run printed always answers."""
    if (
        local_dir is None
        or url
        or any(env.get(k) for k in ("NOETL_EVENTS_URL", "NOETL_EVENTS_CONN_ID"))
    ):
        return None
    path = local_dir / "events.db"
    if not path.exists() or first.describe() == EventStore(str(path)).describe():
        return None
    return EventStore(str(path))


def _events_with_fallback(
    url: str | None,
    store: EventStore,
    execution: int | None,
    local_dir: Path | None = None,
    **where: Any,
) -> tuple[EventStore, list]:
    rows = store.events(execution, **where)
    if rows:
        return store, rows
    other = _run_home_store(url, store, os.environ, local_dir)
    if other is not None:
        found = other.events(execution, **where)
        if found:
            return other, found
    return store, rows


def run_events(
    args: Any,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    *,
    local_dir: Path | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    store, outbox = resolve(getattr(args, "url", None), local_dir=local_dir)
    target = getattr(args, "execution", None)
    try:
        if target == "flush":
            return _flush(store, outbox, out)
        if target is None and not (args.dag and args.run):
            if args.dag or args.run:
                err.write("noetlc: error: --dag and --run go together\n")
                return EXIT_USAGE
            return _list(store, outbox, out, as_json=args.json)
        execution = _execution(target) if target is not None else None
        if target is not None and execution is None:
            err.write(f"noetlc: error: not an execution id: {target!r}\n")
            return EXIT_USAGE
        store, rows = _events_with_fallback(
            getattr(args, "url", None),
            store,
            execution,
            local_dir,
            dag_id=args.dag,
            run_id=args.run,
        )
    except StoreUnavailable as exc:
        err.write(f"noetlc: the event log is unreachable: {exc}\n")
        return EXIT_FAILED
    if not rows:
        err.write(
            f"noetlc: no events for {target or f'{args.dag} {args.run}'} in {store.describe()}\n"
        )
        return EXIT_FAILED
    if args.json:
        for row in rows:
            out.write(json.dumps(ids_as_text(row), default=str, ensure_ascii=False) + "\n")
    else:
        out.write(f"event log: {store.describe()}\n")
        out.write(timeline(rows, collapse=not getattr(args, "all", False)))
    return EXIT_OK


def run_status(
    args: Any,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    *,
    local_dir: Path | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    store, _ = resolve(getattr(args, "url", None), local_dir=local_dir)
    execution = _execution(args.execution)
    if execution is None:
        err.write(f"noetlc: error: not an execution id: {args.execution!r}\n")
        return EXIT_USAGE
    try:
        store, rows = _events_with_fallback(getattr(args, "url", None), store, execution, local_dir)
    except StoreUnavailable as exc:
        err.write(f"noetlc: the event log is unreachable: {exc}\n")
        return EXIT_FAILED
    if not rows:
        err.write(f"noetlc: no events for execution {execution} in {store.describe()}\n")
        return EXIT_FAILED
    state = project(rows)
    if args.json:
        out.write(json.dumps(ids_as_text(state), default=str, ensure_ascii=False, indent=2) + "\n")
    else:
        out.write(render_status(state))
    return EXIT_OK


def _flush(store: EventStore, outbox: Outbox, out: IO[str]) -> int:
    waiting = outbox.count()
    delivered = outbox.deliver(store.append)
    out.write(f"delivered {delivered} of {waiting} waiting event(s) to {store.describe()}\n")
    return EXIT_OK


def _list(store: EventStore, outbox: Outbox, out: IO[str], *, as_json: bool) -> int:
    rows = store.executions()
    if as_json:
        for row in rows:
            out.write(json.dumps(ids_as_text(row), default=str) + "\n")
        return EXIT_OK
    out.write(f"event log: {store.describe()}\n")
    waiting = outbox.count()
    if waiting:
        out.write(f"outbox: {waiting} event(s) waiting (noetlc events flush)\n")
    table = [("EXECUTION", "STATE", "DAG", "STARTED", "DURATION", "EVENTS", "FAILED STEP")]
    for row in rows:
        state = project(store.events(row["execution_id"]))  # at most `limit` (20) executions
        failed = [step for step, entry in state["steps"].items() if entry.get("status") == "error"]
        table.append(
            (
                str(row["execution_id"]),
                str(state.get("status") or "-"),
                row["dag_id"] or "-",
                _when(row.get("started")),
                _duration(row.get("started"), row.get("last")),
                str(row["events"]),
                ", ".join(failed) or "-",
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        out.write("\n")
    return EXIT_OK


def _as_datetime(value: Any) -> _dt.datetime | None:
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, _dt.datetime) else None


def _when(value: Any) -> str:
    moment = _as_datetime(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _duration(first: Any, last: Any) -> str:
    start, end = _as_datetime(first), _as_datetime(last)
    if start is None or end is None:
        return "-"
    seconds = (end - start).total_seconds()
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


# Loop iterations shown in full by default; the others are summed up in one line per loop.
SHOWN_ITERATIONS = 1


def _collapsed(rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any] | str]:
    """``rows`` with each loop's iterations past the first ``SHOWN_ITERATIONS`` folded into one
    line where the loop's last iteration ended; an iteration with an error is always shown."""

    def loop_of(row: Mapping[str, Any]) -> str:
        return str(row.get("loop_id") or row.get("step") or "")

    failed = {
        (loop_of(row), row["iteration"])
        for row in rows
        if row.get("iteration") is not None and row.get("status") == "error"
    }
    seen: dict[str, list[Any]] = {}  # loop -> iterations in order of first event
    for row in rows:
        if row.get("iteration") is not None:
            order = seen.setdefault(loop_of(row), [])
            if row["iteration"] not in order:
                order.append(row["iteration"])
    shown = {
        (loop, iteration) for loop, order in seen.items() for iteration in order[:SHOWN_ITERATIONS]
    } | failed
    hidden: dict[str, dict[str, Any]] = {}
    last_hidden: dict[str, int] = {}
    out: list[Mapping[str, Any] | str] = []
    for row in rows:
        if row.get("iteration") is None or (loop_of(row), row["iteration"]) in shown:
            out.append(row)
            continue
        loop = loop_of(row)
        folded = hidden.setdefault(loop, {"iterations": set(), "events": 0, "statuses": {}})
        folded["iterations"].add(row["iteration"])
        folded["events"] += 1
        if row.get("name") == names.LOOP_ITERATION_COMPLETED:
            status = str(row.get("status"))
            folded["statuses"][status] = folded["statuses"].get(status, 0) + 1
        last_hidden[loop] = len(out)
        out.append("")  # a placeholder, replaced below or dropped
    for loop, position in last_hidden.items():
        folded = hidden[loop]
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(folded["statuses"].items()))
        out[position] = (
            f"  ...  {len(folded['iterations'])} more iterations of {loop} "
            f"({folded['events']} events{': ' + statuses if statuses else ''}); --all shows them"
        )
    return [item for item in out if item != ""]


def timeline(rows: list[Mapping[str, Any]], *, collapse: bool = False) -> str:
    """One line per event: time, name, entity, status, and the correlation that applies;
    ``collapse``: a loop's iterations after the first in one line (errors always shown)."""
    first = rows[0]
    header = (
        f"execution {first['execution_id']}  {first.get('dag_id') or '-'}  "
        f"run {first.get('run_id') or '-'}  playbook {first.get('playbook_path') or '-'}"
    )
    lines = [header]
    width = max(len(str(r["name"])) for r in rows)
    labels = map_labels(rows)  # a mapped instance by the name Airflow shows, not `body[1]`
    for row in _collapsed(rows) if collapse else rows:
        if isinstance(row, str):
            lines.append(row)
            continue
        extra = []
        for key, label in (("iteration", "iter"), ("attempt", "attempt"), ("try_number", "try")):
            if row.get(key) is not None:
                extra.append(f"{label} {row[key]}")
        if row.get("duration_sec") is not None:
            extra.append(f"{row['duration_sec']:.3f}s")
        data = row.get("data") or {}
        if data.get("run_attempt"):
            extra.append(f"run attempt {data['run_attempt'] + 1}")
        if row.get("status") == "error" and data.get("error"):
            extra.append(f"error: {_short(data['error'])}")
        lines.append(
            f"  {_clock(row['timestamp'])}  {row['name']:<{width}}  {row['entity']:<8}  "
            f"{entity_name(row, labels)}  {row['status']}"
            + ("  " + "  ".join(extra) if extra else "")
        )
    return "\n".join(lines) + "\n"


def render_status(state: Mapping[str, Any]) -> str:
    header = (
        f"execution {state['execution_id']}  {state.get('dag_id') or '-'}  "
        f"{state['status']}  ({state['events']} events)"
    )
    lines = [header]
    if state.get("playbook"):
        lines.append(f"playbook {state['playbook']}")
    lines.append("steps:")
    steps = state["steps"]
    name_width = max((len(step) for step in steps), default=0)
    status_width = max((len(str(entry["status"])) for entry in steps.values()), default=0)
    for step, entry in steps.items():
        text = f"  {step:<{name_width}}  {entry['status']!s:<{status_width}}"
        if entry["runs"] or entry.get("iterations"):
            text += f"  runs {entry['runs']}"
        if entry.get("iterations"):
            text += f"  iterations {entry['iterations']}"
        if entry.get("error"):
            text += f"  error: {_short(entry['error'])}"
        lines.append(text.rstrip())
    lines.extend(history_lines(state))
    for title in ("ctx", "vars", "retries"):
        if state.get(title):
            lines.append(f"{title}: {json.dumps(state[title], default=str, sort_keys=True)}")
    for loop_id, loop in state["loops"].items():
        lines.append(
            f"loop {loop_id}: {loop['finished']}/{loop['total']} iterations, "
            f"{loop['failed']} failed, {'done' if loop['done'] else 'running'}"
        )
    for child in state["children"]:
        lines.append(f"child execution {child} (noetlc status {child})")
    for gate in state["gates"]:
        lines.append(f"waiting: gate {gate['gate']} since {gate['since']}")
    if state["results"]:
        lines.append("results:")
        width = max(len(step) for step in state["results"])
        for step, result in state["results"].items():
            lines.append(f"  {step:<{width}}  {_short(result, 200)}")
    return "\n".join(lines) + "\n"


def history_lines(state: Mapping[str, Any]) -> list[str]:
    """What came before the latest truth: every attempt of a run cleared and run again, and
    every try of a task that took more than one (the failed try before a successful re-run)."""
    lines = []
    attempts = state.get("attempts") or []
    if len(attempts) > 1:
        for attempt in attempts:
            lines.append(f"  run attempt {attempt['attempt'] + 1}  {attempt['status']}")
    for task_key, task in (state.get("tasks") or {}).items():
        tries = task.get("tries") or []
        if len(tries) < 2 and not any(t.get("error") for t in tries):
            continue
        label = task.get("label")
        if label and task_key.endswith("]"):
            task_key = f"{task_key.rsplit('[', 1)[0]} ({label})"  # as Airflow names it
        for tried in tries:
            text = f"  task {task_key} try {tried['try_number']}  {tried['status']}"
            if tried.get("error"):
                text += f"  error: {_short(tried['error'])}"
            lines.append(text)
    return ["history:", *lines] if lines else []


def _execution(text: Any) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _clock(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, _dt.datetime):
        return value.strftime("%H:%M:%S.%f")[:-3]
    return str(value)


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
