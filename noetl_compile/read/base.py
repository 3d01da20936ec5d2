"""Shared reading machinery: typed access to loaded YAML with diagnostics at exact positions.

A dialect reader subclasses ``Reader`` and only states what its generation accepts; the
type checks, unknown-key checks ("did you mean") and position lookups live here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ast import Arc, PolicyRule, Router
from ..diagnostics import DiagnosticSink, Position, Severity
from ..load import Document, Span, YList, YMap, span_of
from .suggest import did_you_mean, edit_distance

# Tool kinds an engine of each generation can execute (from its models), plus our extensions.
_V2_KINDS = {
    "http",
    "postgres",
    "duckdb",
    "ducklake",
    "python",
    "workbook",
    "playbook",
    "playbooks",
    "secrets",
    "iterator",
    "container",
    "script",
    "snowflake",
    "transfer",
    "snowflake_transfer",
    "gcs",
    "noop",
    "shell",
}
_CANONICAL_KINDS = _V2_KINDS | {"gateway", "nats", "agent", "artifact", "task_sequence", "rhai"}
EXTENSION_KINDS = {"gate", "quantum"}
TOOL_KINDS = {
    "v1": _CANONICAL_KINDS | {"end", "router", "start", "loop", "save"},
    "case-v2": _V2_KINDS | EXTENSION_KINDS,
    "canonical": _CANONICAL_KINDS | EXTENSION_KINDS,
}
# Kinds NoETL 5 added (its tool crates and CLI, noetl/noetl@3badb77a and noetl/tools): a
# playbook of that generation may name them; the April engine refused them (S110).
NOETL5_KINDS = frozenset(
    {"subscription", "mcp", "auth", "provider", "wasm", "result_fetch", "sink"}
)


def tool_kinds(dialect: str, generation: str | None) -> frozenset[str] | set[str]:
    """The tool kinds a playbook of this dialect and generation may name."""
    kinds = TOOL_KINDS[dialect]
    return kinds | NOETL5_KINDS if generation == "noetl5" else kinds


# Keys that carry a step's edges. One where no engine reads it (`next` indented under `tool:`,
# `arcs` beside `next`) drops the edges: the run ends after the step and looks fine (S118).
ROUTING_KEYS = frozenset({"next", "arcs"})


def misplaced_routing(key: str, mapping: dict, known: Iterable[str], where: str) -> str | None:
    """The S118 message for ``key`` of ``mapping`` (read against ``known``), or None when the
    key is no routing in the wrong place."""
    known = set(known)
    if key in known:
        return None
    if key == "arcs" and "next" in known:
        return (
            f"`arcs` directly in {where}: arcs belong under `next` (`next: {{arcs: [...]}}`); "
            "as written the step has no edges and the run ends after it"
        )
    if key in ROUTING_KEYS:
        return (
            f"`{key}` inside {where}, where no engine reads routing: the step's edges are "
            "dropped and the run ends after it; move it out to the step, beside `tool:`"
        )
    if "next" in known and "next" not in mapping and did_you_mean(key, {"next"}):
        return (
            f"unknown key {key!r} in {where}; did you mean 'next'? As written the step has no "
            "edges and the run ends after it"
        )
    return None


# Tool settings that people put on the step by mistake; check/tools.py reports them (C513)
# instead of the generic unknown-key warning.
TOOL_SETTING_KEYS = frozenset(
    {
        "code",
        "code_b64",
        "command",
        "commands",
        "command_b64",
        "commands_b64",
        "query",
        "queries",
        "sql",
        "statement",
        "script",
        "url",
        "endpoint",
        "method",
        "headers",
        "params",
        "payload",
        "body",
        "auth",
        "credential",
        "credentials",
        "catalog_connection",
        "catalog_name",
        "data_path",
        "database",
        "libs",
        "cmd",
        "cmds",
        "output",
        "query_b64",
        "queries_b64",
        "cmd_b64",
        "cmds_b64",
        "sql_b64",
        "statement_b64",
        "script_b64",
        "verify_ssl",
        "follow_redirects",
        "pool",
        "path",
        "return_step",
        "operation",
        "bucket",
        "runtime",
        "gate",
        "subject",
        "circuit",
        "shots",
        "job_id",
    }
)
POLICY_ACTIONS = ("continue", "retry", "break", "jump", "fail")
# The engine computes a delay for any backoff value; these are the ones it names.
BACKOFFS = ("none", "fixed", "linear", "exponential")
# Value sets the readers check (S112) and `noetlc schema` publishes as enums.
ROUTER_MODES = ("exclusive", "inclusive")
LOOP_MODES = ("sequential", "parallel", "async")  # v1 and case-v2 `loop.mode`
CANONICAL_LOOP_MODES = ("sequential", "parallel", "cursor")  # canonical `loop.spec.mode`
EXECUTOR_PROFILES = ("local", "distributed", "auto")
LOOP_EXEC = ("distributed", "local")

TYPE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def type_name(value: Any) -> str:
    for kind, name in TYPE_NAMES.items():
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return name
    return type(value).__name__


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class Reader:
    """Base for dialect readers: holds the document and the diagnostic sink."""

    dialect = "canonical"

    generation: str | None = None  # "noetl5" for the NoETL 5 reader

    def __init__(self, document: Document, sink: DiagnosticSink) -> None:
        self.document = document
        self.sink = sink

    # -- positions -----------------------------------------------------------------------------
    @staticmethod
    def span(container: Any, key: Any = None) -> Span | None:
        """Span of ``container[key]`` (or of the container itself)."""
        if key is not None:
            if isinstance(container, YMap) and key in container:
                return span_of(container[key]) or container.value_span(key)
            if isinstance(container, YList) and isinstance(key, int):
                return container.item_span(key)
        return span_of(container)

    def pos(self, container: Any, key: Any = None) -> Position:
        span = self.span(container, key)
        return span.position if span else Position(1, 1)

    def key_pos(self, mapping: Any, key: Any) -> Position:
        if isinstance(mapping, YMap) and key in mapping:
            return mapping.key_span(key).position
        return self.pos(mapping)

    def report(self, code: str, position: Position, message: str, **kwargs: Any) -> None:
        self.sink.add(code, position, message, **kwargs)

    def left_empty(self, container: Any, key: Any, code: str, what: str) -> bool:
        """Whether ``key`` is written with nothing after it (`key:`) where a value is needed;
        reported at the key as "``what`` is empty". Silently read as absent, such a key would
        drop the step, arc, tool or loop it belongs to without a word."""
        if isinstance(container, dict) and key in container and container[key] is None:
            self.report(code, self.key_pos(container, key), f"{what} is empty")
            return True
        return False

    # -- typed access ----------------------------------------------------------------------------
    def expect(self, container: Any, key: Any, types: tuple[type, ...], what: str) -> bool:
        """Report S102 unless ``container[key]`` is one of ``types``."""
        value = container[key]
        if isinstance(value, bool) and bool not in types:
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            wanted = " or ".join(dict.fromkeys(TYPE_NAMES.get(t, t.__name__) for t in types))
            self.report(
                "S102", self.pos(container, key), f"{what} must be {wanted}, not {type_name(value)}"
            )
        return ok

    def mapping(self, container: Any, key: Any, what: str) -> YMap | None:
        if not isinstance(container, dict) or key not in container or container[key] is None:
            return None
        return container[key] if self.expect(container, key, (dict,), what) else None

    def sequence(self, container: Any, key: Any, what: str) -> YList | None:
        if not isinstance(container, dict) or key not in container or container[key] is None:
            return None
        return container[key] if self.expect(container, key, (list,), what) else None

    def string(self, container: Any, key: Any, what: str, *, required: bool = False) -> str | None:
        if not isinstance(container, dict) or key not in container or container[key] is None:
            if required:
                self.report("S101", self.pos(container), f"{what} is required")
            return None
        value = container[key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # `step: 1` names a step "1"; YAML typed it as a number
        return value if self.expect(container, key, (str,), what) else None

    def iterator_name(self, container: Any, key: Any, what: str) -> str | None:
        """The name a loop binds each item to: written out and not blank, because the loop
        operator checks it when the DAG file is parsed, before anything is rendered."""
        value = self.string(container, key, what)
        if value is None and isinstance(container, dict) and container.get(key, 0) is None:
            self.report("S108", self.key_pos(container, key), f"{what} is empty: give it a name")
        elif value is not None and (not value.strip() or is_template(value)):
            problem = "is empty" if not value.strip() else "cannot be a template"
            self.report("S108", self.pos(container, key), f"{what} {problem}: give it a name")
        return value

    def choice(
        self,
        container: Any,
        key: Any,
        choices: Iterable[str],
        what: str,
        *,
        allow_template: bool = True,
    ) -> str | None:
        """A value from a fixed set; templated values pass only where the engine renders them."""
        value = self.string(container, key, what)
        choices = tuple(choices)
        if value is None or (allow_template and is_template(value)):
            return value
        if value not in choices:
            self.report(
                "S112",
                self.pos(container, key),
                f"{what} must be one of {', '.join(choices)}, not {value!r}"
                + did_you_mean(value, choices),
            )
            return None
        return value

    def check_keys(
        self,
        mapping: YMap,
        known: Iterable[str],
        where: str,
        *,
        foreign: dict[str, tuple[str, Severity]] | None = None,
        reported_elsewhere: frozenset[str] = frozenset(),
    ) -> None:
        """Unknown keys get S103 with a suggestion; keys of another generation get S114."""
        known = set(known)
        for key in mapping:
            if key in known or key in reported_elsewhere:
                continue
            if foreign and key in foreign:
                advice, severity = foreign[key]
                self.report(
                    "S114",
                    self.key_pos(mapping, key),
                    f"`{key}` is not part of the {self.dialect} dialect ({where}): {advice}",
                    severity=severity,
                )
                continue
            routing = misplaced_routing(str(key), mapping, known, where)
            if routing is not None:
                self.report("S118", self.key_pos(mapping, key), routing)
                continue
            self.report(
                "S103",
                self.key_pos(mapping, key),
                f"unknown key {str(key)!r} in {where}" + did_you_mean(key, known),
            )

    # -- shared building blocks ------------------------------------------------------------------
    def tool_kind(self, mapping: YMap, key: str, where: str) -> str | None:
        kind = self.string(mapping, key, f"{where} kind")
        self.left_empty(mapping, key, "S101", f"`{key}` of {where}")
        if kind is None or is_template(kind):
            return kind
        kinds = tool_kinds(self.dialect, self.generation)
        if kind not in kinds:
            self.report(
                "S110",
                self.pos(mapping, key),
                f"unknown tool kind {kind!r} for the {self.dialect} dialect"
                + did_you_mean(kind, kinds),
            )
        return kind

    def policy_rules(self, task: YMap, label: str) -> list[PolicyRule]:
        """Canonical `spec.policy.rules` of one tool/task."""
        spec = self.mapping(task, "spec", f"`spec` of {label}")
        if spec is None:
            return []
        misplaced = TOOL_SETTING_KEYS | {"input", "method"}
        self.check_keys(
            spec, ("policy", "timeout"), f"the spec of {label}", reported_elsewhere=misplaced
        )
        for key in spec:
            if key in misplaced:
                self.report(
                    "C513",
                    self.key_pos(spec, key),
                    f"tool setting `{key}` of {label} sits inside `spec`, where the engine does "
                    "not read it; move it up into the tool",
                )
        policy = self.mapping(spec, "policy", f"`spec.policy` of {label}")
        if policy is None:
            return []
        self.check_keys(
            policy,
            ("mode", "on_unmatched", "rules", "before", "after", "finally"),
            f"the policy of {label}",
        )
        if "rules" not in policy:
            self.report("S101", self.pos(policy), f"`spec.policy` of {label} needs a `rules` list")
            return []
        rules = self.sequence(policy, "rules", f"`spec.policy.rules` of {label}")
        return [r for i, item in enumerate(rules or []) if (r := self.policy_rule(rules, i, label))]

    def policy_rule(self, rules: YList, index: int, label: str) -> PolicyRule | None:
        item = rules[index]
        where = f"rule {index + 1} of {label}"
        if not isinstance(item, YMap):
            self.report("C514", self.pos(rules, index), f"{where} must be a mapping")
            return None
        self.check_keys(
            item, ("when", "then", "else"), where, foreign={"expr": ("use `when`", Severity.ERROR)}
        )
        then = item.get("then")
        is_else = "else" in item
        if is_else:
            block = item["else"]
            if isinstance(block, YMap) and "then" in block:
                then = block["then"]
            elif isinstance(block, YMap) and then is None:
                then = block
        elif "when" not in item:
            self.report("C514", self.pos(rules, index), f"{where} needs `when` or `else`")
            return None
        elif not isinstance(item["when"], (str, bool)):
            self.report(
                "S102", self.pos(item, "when"), f"`when` of {where} must be a template string"
            )
        if not isinstance(then, YMap):
            self.report("C514", self.pos(rules, index), f"{where} needs a `then` mapping with `do`")
            return None
        self.check_keys(
            then, ("do", "attempts", "backoff", "delay", "to", "set", "allow"), f"`then` of {where}"
        )
        action = self.choice(then, "do", POLICY_ACTIONS, f"`do` of {where}")
        if "do" not in then and "allow" not in then:
            self.report(
                "C514",
                self.pos(then),
                f"`then` of {where} needs `do` ({', '.join(POLICY_ACTIONS)})",
            )
        if "attempts" in then and not is_template(then["attempts"]):
            self.expect(then, "attempts", (int,), f"`attempts` of {where}")
        if "delay" in then and not is_template(then["delay"]):
            self.expect(then, "delay", (int, float), f"`delay` of {where}")
        backoff = (
            self.choice(then, "backoff", BACKOFFS, f"`backoff` of {where}")
            if "backoff" in then
            else None
        )
        target = self.string(then, "to", f"`to` of {where}")
        if action == "jump" and target is None:
            self.report("C514", self.pos(then), f"`jump` in {where} needs `to` naming a task")
        if "set" in then:
            self.mapping(then, "set", f"`set` of {where}")
        return PolicyRule(
            span=span_of(item),
            when=None if is_else else item.get("when"),
            is_else=is_else,
            action=action,
            attempts=then.get("attempts"),
            backoff=backoff,
            delay=then.get("delay"),
            to=target,
            to_span=self.span(then, "to"),
            set=then.get("set"),
        )

    def arc(self, target_holder: YMap, where: str, **fields: Any) -> Arc | None:
        """An arc from a mapping with a `step` key (v2 next entries, canonical arcs)."""
        if "step" not in target_holder:
            self.report("S101", self.pos(target_holder), f"{where} needs `step`")
            return None
        if self.left_empty(target_holder, "step", "S101", f"`step` of {where}"):
            return None
        target = self.string(target_holder, "step", f"`step` of {where}")
        if target is None:
            return None
        return Arc(span=self.span(target_holder, "step"), target=target, **fields)

    def trivial_next(self, item: YMap, where: str) -> Router | None:
        """`next:` empty or a single step name: the same in every generation."""
        value = item["next"]
        if value is None:
            return Router(mode="exclusive")
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            arc = self.arc_from_name(item, "next", where)
            return Router(mode="exclusive", arcs=[arc] if arc else [])
        return None

    def arc_from_name(self, container: Any, index: Any, where: str, **fields: Any) -> Arc | None:
        value = container[index]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            self.report(
                "S102",
                self.pos(container, index),
                f"{where} must be a step name or a mapping with `step`, not {type_name(value)}",
            )
            return None
        return Arc(span=self.span(container, index), target=value, **fields)


def event_of(when: Any) -> str | None:
    """The event a guard waits for: `event.name == 'loop.done'` -> 'loop.done'."""
    if not isinstance(when, str) or "event.name" not in when:
        return None
    for name in ("loop.done", "call.done", "call.error", "step.exit", "step.enter"):
        if f"'{name}'" in when or f'"{name}"' in when:
            return name
    return None


__all__ = [
    "NOETL5_KINDS",
    "ROUTING_KEYS",
    "TOOL_KINDS",
    "TOOL_SETTING_KEYS",
    "Reader",
    "did_you_mean",
    "edit_distance",
    "event_of",
    "is_template",
    "misplaced_routing",
    "tool_kinds",
    "type_name",
]
