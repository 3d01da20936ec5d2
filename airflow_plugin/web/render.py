"""Server-rendered HTML of the execution view: every value through ``html.escape``.

The page works without JavaScript (the iframe Airflow's UI puts a DAG run tab in may not allow
scripts); ``static/noetl.js`` only adds a step filter and a refresh while the run is going.
Links to task logs point at Airflow's own task instance pages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import quote

from ..events.instances import instance_name, map_labels
from .data import RunView

__all__ = ["instance_name", "log_url", "map_labels", "render_run"]

_MAX_CELL = 300


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _json(value: Any, limit: int = _MAX_CELL) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clock(value: Any) -> str:
    """``HH:MM:SS.mmm`` of a timestamp (the full one is the cell's title)."""
    text = str(value)
    time_part = text.split("T", 1)[1] if "T" in text else text.split(" ", 1)[-1]
    return time_part[:12]


def log_url(dag_id: str, run_id: str, task_id: str, map_index: Any, try_number: Any) -> str:
    """Airflow 3's task instance page (its log tab) for one try."""
    path = f"/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id, safe='')}"
    if isinstance(map_index, int) and map_index >= 0:
        path += f"/mapped/{map_index}"
    if isinstance(try_number, int):
        path += f"?try_number={try_number}"
    return path


def _status(value: Any) -> str:
    return f'<span class="status s-{_e(value)}">{_e(value)}</span>'


def _section(title: str, body: str, ident: str) -> str:
    return f'<section id="{ident}"><h2>{_e(title)}</h2>{body}</section>'


def _table(head: list[str], rows: list[str], ident: str = "") -> str:
    if not rows:
        return '<p class="empty">none</p>'
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    attr = f' id="{ident}"' if ident else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _steps(state: Mapping[str, Any]) -> str:
    rows = []
    for step, entry in state["steps"].items():
        rows.append(
            f'<tr data-step="{_e(step)}"><td>{_e(step)}</td><td>{_status(entry["status"])}</td>'
            f"<td>{_e(entry['runs'])}</td><td>{_e(entry.get('error') or '')}</td>"
            f"<td>{_e(state['retries'].get(step, 0))}</td></tr>"
        )
    return _table(["step", "status", "runs", "error", "retries"], rows, "steps")


def _loops(state: Mapping[str, Any]) -> str:
    rows = []
    for loop_id, loop in state["loops"].items():
        total = loop.get("total")
        done = loop.get("finished", 0)
        percent = int(100 * done / total) if isinstance(total, int) and total > 0 else 0
        rows.append(
            f'<tr data-step="{_e(loop_id)}"><td>{_e(loop_id)}</td>'
            f'<td><progress max="100" value="{percent}"></progress> '
            f"{_e(done)}/{_e(total)}</td><td>{_e(loop.get('failed', 0))}</td>"
            f"<td>{'done' if loop.get('done') else 'running'}</td></tr>"
        )
    return _table(["loop", "iterations", "failed", "state"], rows, "loops")


def _gates(view: RunView) -> str:
    rows = []
    for gate in view.gates:
        answer = _json(gate["answer"]) if gate["answer"] is not None else ""
        rows.append(
            f'<tr data-step="{_e(gate["step"])}"><td>{_e(gate["gate"])}</td>'
            f"<td>{_e(gate['step'])}</td><td>{_e(gate['since'])}</td>"
            f"<td>{'waiting' if gate['waiting'] else 'answered ' + _e(gate['answered_at'])}</td>"
            f"<td><code>{_e(answer)}</code></td></tr>"
        )
    return _table(["gate", "step", "since", "state", "answer"], rows, "gates")


def _timeline(view: RunView, events: list[dict[str, Any]]) -> str:
    """One row per event. The number is the event's place in the run (1..N, what the header
    counts), the same on the run's page and a task's; the log's global ``seq`` is its title."""
    labels = map_labels(view.events)
    place = {id(event): number for number, event in enumerate(view.events, 1)}
    rows = []
    for event in events:
        extra = []
        for key, label in (("iteration", "iter"), ("attempt", "attempt"), ("try_number", "try")):
            if event.get(key) is not None:
                extra.append(f"{label} {event[key]}")
        if event.get("duration_sec") is not None:
            extra.append(f"{event['duration_sec']:.3f}s")
        data = event.get("data") or {}
        if data.get("run_attempt"):
            extra.append(f"run attempt {data['run_attempt'] + 1}")
        if event.get("status") == "error" and data.get("error"):
            extra.append(f"error: {_json(data['error'], 200)}")
        task = event.get("task_id")
        link = ""
        entity_id = event["entity_id"]
        if task:
            url = log_url(
                view.dag_id, view.run_id, task, event.get("map_index"), event.get("try_number")
            )
            where = instance_name(task, event.get("map_index"), labels)
            link = f'<a class="log" href="{_e(url)}">{_e(where)} log</a>'
            if event.get("entity") == "task":
                entity_id = where
        rows.append(
            f'<tr class="event" data-step="{_e(event.get("step") or "")}" '
            f'data-name="{_e(event["name"])}">'
            f'<td title="seq {_e(event["seq"])}">{_e(place.get(id(event), ""))}</td>'
            f'<td title="{_e(event["timestamp"])}">{_e(_clock(event["timestamp"]))}</td>'
            f"<td>{_e(event['name'])}</td><td>{_e(event['entity'])}</td>"
            f"<td>{_e(entity_id)}</td><td>{_status(event['status'])}</td>"
            f"<td>{_e(event.get('step') or '')}</td><td>{_e('  '.join(extra))}</td>"
            f"<td>{link}</td></tr>"
        )
    return _table(
        ["#", "time", "event", "entity", "id", "status", "step", "detail", "task"],
        rows,
        "timeline",
    )


def _history(state: Mapping[str, Any]) -> str:
    """What came before the latest truth: the run's attempts (a run cleared and run again) and
    every try of a task that took more than one, the failed ones with their errors."""
    rows = []
    attempts = state.get("attempts") or []
    if len(attempts) > 1:
        for attempt in attempts:
            rows.append(
                f"<tr><td>run</td><td>attempt {_e(attempt['attempt'] + 1)}</td>"
                f"<td>{_status(attempt['status'])}</td><td></td></tr>"
            )
    for key, task in (state.get("tasks") or {}).items():
        tries = task.get("tries") or []
        if len(tries) < 2 and not any(t.get("error") for t in tries):
            continue
        for tried in tries:
            rows.append(
                f"<tr><td>{_e(key)}</td><td>try {_e(tried['try_number'])}</td>"
                f"<td>{_status(tried['status'])}</td><td>{_e(tried.get('error') or '')}</td></tr>"
            )
    return _table(["what", "attempt", "status", "error"], rows, "history")


def render_run(view: RunView, *, static: str, task: tuple[str, int | None] | None = None) -> str:
    """The whole page; ``task`` narrows the timeline to one task instance."""
    state = view.state
    events = view.for_task(*task) if task else view.events
    title = f"NoETL execution {view.execution_id}"
    where = f" - task {task[0]}" if task else ""
    running = state["status"] in ("running", "unknown")
    results = _table(
        ["step", "result"],
        [
            f"<tr><td>{_e(step)}</td><td><code>{_e(_json(result))}</code></td></tr>"
            for step, result in state["results"].items()
        ],
        "results",
    )
    body = [
        (
            f"<header><h1>{_e(title)}{_e(where)}</h1>"
            f'<p><span id="run-status" data-running="{str(running).lower()}">{_status(state["status"])}</span> '
            f"{_e(view.dag_id)} / {_e(view.run_id)} - {_e(state['events'])} events"
            f"{f' ({len(events)} of this task)' if task else ''}"
            f"{' - playbook ' + _e(state['playbook']) if state.get('playbook') else ''}</p>"
            '<p class="filter"><label>step <input id="step-filter" type="search"></label></p>'
            "</header>"
        ),
        _section("State (noetlc status)", _steps(state), "state-section"),
        _section("History", _history(state), "history-section"),
        _section("Loops", _loops(state), "loops-section"),
        _section("Gates", _gates(view), "gates-section"),
        _section("Timeline", _timeline(view, events), "timeline-section"),
        _section("Results", results, "results-section"),
    ]
    if state["ctx"] or state["vars"]:
        body.append(
            _section(
                "ctx / vars",
                f"<pre>{_e(_json({'ctx': state['ctx'], 'vars': state['vars']}, 4000))}</pre>",
                "ctx-section",
            )
        )
    if not view.events:
        body.insert(1, '<p class="empty" id="no-events">No NoETL events for this run yet.</p>')
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title>"
        f'<link rel="stylesheet" href="{_e(static)}/noetl.css">'
        f'<script defer src="{_e(static)}/noetl.js"></script>'
        f"</head><body>{''.join(body)}</body></html>"
    )
