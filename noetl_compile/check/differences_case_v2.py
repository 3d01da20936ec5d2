"""D953, D960: case-v2 constructs that dc55c492 fails on without stopping, or stops on where
noetlc goes on (table (a) rows of the sink's `tool` and an auth mapping's `tool`).

Kept apart from ``differences`` (the canonical and case-v2 rows found earlier) so that each
module stays under the size the project keeps; ``differences`` calls both from its case-v2 step
and tool detectors.
"""

from __future__ import annotations

from typing import Any

from ..ast import Step
from ..read.base import is_template
from ..spans import YMap
from .context import CheckContext

# dc55c492 core/storage/executor.py 262-330: the kinds its sink executor has a handler for
# (`event`, `event_log` and `''` are the event log); any other kind raises "Unsupported sink
# tool type". A `tool` missing or empty is `event` there (core/storage/config.py 119).
_SINK_KINDS = frozenset({"", "event", "event_log", "postgres", "python", "duckdb", "http", "gcs"})
# dc55c492 worker/auth_resolver.py 26-29: a mapping with one of these keys is one auth item (not
# a map of aliases), and 277-282: its service is `service`, else `type`, else `tool`, else the
# stored credential's type.
_SINGLE_AUTH_KEYS = frozenset(
    {"source", "key", "name", "service", "secret_name", "scope", "fields", "inject", "type"}
)
_SERVICE_KEYS = ("service", "type", "tool")


def swallowed_sink(ctx: CheckContext, step: Step, then: YMap) -> None:
    """D953: a case rule's `sink` that dc55c492's worker cannot run. Its `_execute_case_sinks`
    (v2_worker_nats.py 1123-1210) catches the error, records a `sink.error` event and goes on;
    a postgres sink that cannot connect returns an error summary instead (core/storage/
    postgres.py 349-359), recorded as `sink.done`. Either way the step and the run complete and
    nothing is written. Reported where the text alone makes the failure certain: a `tool` that
    is neither text nor a mapping (null included: 1124-1129 call `.get` on it), a kind the sink
    executor has no handler for, or a postgres sink with no `auth` and no `spec` (its only
    sources of a connection there: the worker passes no `with` to a case sink)."""
    sink = then.get("sink")
    if not isinstance(sink, dict) or "tool" not in sink:
        return
    tool = sink.get("tool")
    what = _why_it_fails(sink, tool)
    if what is None:
        return
    ctx.report(
        "D953",
        ctx.pos(sink, "tool"),
        f"`sink` in a case rule of step {step.name!r} with {what}: the case-v2 engine "
        "(dc55c492) records only a `sink.error` (or error `sink.done`) event, completes the "
        "step and the run, and writes nothing; noetlc fails the step when the sink cannot run",
        hint="name a kind the engine writes (`tool: {kind: postgres, auth: ..., table: ...}`, "
        "or duckdb, python, http, event_log) and its `auth`; on dc55c492 a mistake here loses "
        "the rows without a failure",
    )


def _why_it_fails(sink: dict[str, Any], tool: Any) -> str | None:
    if isinstance(tool, str):
        kind: Any = tool
    elif isinstance(tool, dict):
        kind = tool.get("type") or tool.get("kind") or "event"
    else:
        return f"a `tool` that is neither a kind nor a mapping ({_shape(tool)})"
    if not isinstance(kind, str):
        return f"a kind that is not text ({_shape(kind)})"  # `.strip()` raises there
    if is_template(kind):
        return None  # a rendered kind: which one is known only at run time
    kind = kind.strip().lower()
    if kind not in _SINK_KINDS:
        return f"kind {kind!r}, which its sink executor has no handler for"
    # core/storage/config.py get_config_value: a key of the tool mapping, else of the sink.
    layers = [tool, sink] if isinstance(tool, dict) else [sink]
    if kind == "postgres" and not any(m.get(k) for m in layers for k in ("auth", "spec")):
        return "a postgres kind and no `auth`, so no connection"
    return None


def _shape(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a mapping" if isinstance(value, dict) else "text"


def auth_service(ctx: CheckContext, step: Step, config: dict[str, Any]) -> None:
    """D960: a postgres tool whose `auth` mapping names a service other than postgres.
    dc55c492's postgres tool maps the credential's fields only when the resolved service is
    exactly 'postgres' (tools/postgres/auth.py 54); otherwise it takes none and the call fails
    ('Postgres connection is not configured'). noetlc reads the connection name only."""
    auth = config.get("auth")
    if not isinstance(auth, dict) or not _SINGLE_AUTH_KEYS & set(auth):
        return
    if auth.get("source", "credential") != "credential":
        return  # a secret/env/inline item reads `service`/`type` only, and other rows
    key = next((k for k in _SERVICE_KEYS if auth.get(k)), None)
    service = auth.get(key) if key else None
    if not isinstance(service, str) or service == "postgres" or "{{" in service:
        return
    ctx.report(
        "D960",
        ctx.pos(auth, key),
        f"`auth` of postgres step {step.name!r} names service {service!r} (its `{key}`): the "
        "case-v2 engine (dc55c492) then takes no connection field from the credential and "
        "fails the call ('Postgres connection is not configured'); noetlc connects with the "
        "Airflow connection the mapping names",
        hint=f"drop `{key}` (the credential's own type decides) or write `{key}: postgres` if "
        "the playbook must also run on dc55c492",
    )
