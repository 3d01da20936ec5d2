"""What a bare name in a template can mean in a given playbook.

The engines flatten workload keys and ctx writes to the top level, expose step results by step
name, bind loop iterators, and add runtime namespaces; `classify` answers which one a name is
(step results win over everything else, as in the engine).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..ast import Playbook
from ..load import YMap
from ..read.base import did_you_mean
from ..read.noetl5_schema import SCOPED_PREFIXES  # a task `set` key outside them binds a plain name
from .dataflow import ctx_writes, vars_writes

# Namespaces some runtime location provides (engine, worker, pipeline, case, retry, v1).
RUNTIME_NAMES = frozenset(
    {
        "workload",
        "vars",
        "ctx",
        "iter",
        "execution_id",
        "catalog_id",
        "job",
        "event",
        "output",
        "response",
        "result",
        "this",
        "error",
        "_retry",
        "_prev",
        "_task",
        "_attempt",
        "results",
        "input",
        "args",
        "keychain",
        "env",
        "loop",
        "loop_index",
        "parent_execution_id",
        "secrets",
        "step",
        "context",
        "data",
        "status_code",
        "page",
        "token",
        "spec",
    }
)
JINJA_GLOBALS = frozenset(
    {
        "range",
        "dict",
        "lipsum",
        "cycler",
        "joiner",
        "namespace",
        "true",
        "false",
        "none",
        "True",
        "False",
        "None",
    }
)
# Filters the NoETL worker registers on top of Jinja's built-ins.
NOETL_FILTERS = frozenset({"b64encode", "b64decode", "tojson", "encrypt_secret", "fromjson"})
# NoETL 5's renderers (minijinja: noetl/server `TemplateRenderer`, noetl/tools `TemplateEngine`)
# add these; the runtime registers the ones Jinja lacks (airflow_plugin/templating/filters5.py).
# They register no functions: `now()` is not NoETL 5's (T302 says so).
NOETL5_FILTERS = frozenset(
    {"keys", "values", "items", "get", "split", "len", "string", "int", "float", "trim", "safe"}
)


@dataclass
class NameTable:
    steps: set[str] = field(default_factory=set)
    workload: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)  # iterators, set/vars keys, inputs, task names...
    iterators: set[str] = field(default_factory=set)  # loop iterators (also in ``bound``)
    variables: set[str] = field(default_factory=set)  # ctx/vars names steps write (in ``bound``)

    def classify(self, name: str) -> str | None:
        if name in self.steps:
            return "step"
        if name in RUNTIME_NAMES or name in JINJA_GLOBALS:
            return "runtime"
        if name in self.workload:
            return "workload"
        if name in self.bound:
            return "bound"
        return None

    # Computed once, after name_table has filled the table: every unknown name of a playbook is
    # looked up in them, and a fresh union per name made a large playbook quadratic.
    @functools.cached_property
    def all_names(self) -> frozenset[str]:
        return frozenset(self.steps | self.workload | self.bound | RUNTIME_NAMES)

    @functools.cached_property
    def declared_names(self) -> frozenset[str]:
        """The names a playbook declares in plain sight (steps, workload keys, loop iterators):
        an unknown name one typo away from one of these is a misspelling, not a runtime name."""
        return frozenset(self.steps | self.workload | self.iterators)

    def namespace_typo(self, name: str) -> str:
        """The did-you-mean of a name read as `workload.x`/`ctx.x`/`vars.x` that resolves to
        nothing but is one typo away from a declared name ("" otherwise)."""
        if name in self.all_names:
            return ""
        return did_you_mean(name, self.variable_names)

    @functools.cached_property
    def variable_names(self) -> frozenset[str]:
        return self.declared_names | frozenset(self.variables)


def _keys(mapping: object) -> set[str]:
    return {str(k) for k in mapping} if isinstance(mapping, dict) else set()


def name_table(playbook: Playbook) -> NameTable:
    """Computed once per playbook (templates and flow both ask)."""
    return playbook.analysis("name_table", _name_table)


def _name_table(playbook: Playbook) -> NameTable:
    table = NameTable(steps=set(playbook.step_names), workload=_keys(playbook.workload))
    bound = table.bound
    bound |= set(playbook.workbook)
    table.variables |= set(ctx_writes(playbook))
    table.variables |= {name for names in vars_writes(playbook).values() for name in names}
    bound |= table.variables
    keychain = playbook.keychain if isinstance(playbook.keychain, list) else []
    bound |= {str(k["name"]) for k in keychain if isinstance(k, dict) and "name" in k}
    for task in playbook.workbook.values():
        bound |= _input_keys(task.config)
    for step in playbook.steps:
        bound |= _keys(step.input) | _keys(step.vars)
        if step.loop and step.loop.iterator:
            bound.add(step.loop.iterator)
            table.iterators.add(step.loop.iterator)
            bound.add(f"{step.name}_results")  # v1 loop aggregation name
        for task in step.tasks:
            if task.name:
                bound.add(task.name)
            bound |= _input_keys(task.config)
            if playbook.generation == "noetl5":
                bound |= _noetl5_task_names(task.config)
        for arc in step.router.arcs:
            bound |= _keys(arc.args)
        for rule in step.case:
            then = rule.then if isinstance(rule.then, YMap) else {}
            collect = then.get("collect")
            if isinstance(collect, dict) and isinstance(collect.get("into"), str):
                bound.add(collect["into"])
        bound |= _retry_names(step)
    return table


def _noetl5_task_names(config: object) -> set[str]:
    """Names a NoETL 5 task binds: plain `set` keys, `output.as` and `output.select[].as`."""
    if not isinstance(config, dict):
        return set()
    names = {k for k in _keys(config.get("set")) if not k.startswith(SCOPED_PREFIXES)}
    output = config.get("output")
    if isinstance(output, dict):
        if isinstance(output.get("as"), str):
            names.add(output["as"])
        for entry in output.get("select") or []:
            if isinstance(entry, dict) and isinstance(entry.get("as"), str):
                names.add(entry["as"])
    return names


def _input_keys(config: object) -> set[str]:
    if not isinstance(config, dict):
        return set()
    names: set[str] = set()
    for key in ("input", "args", "with", "data"):
        names |= _keys(config.get(key))
    return names


def _retry_names(step) -> set[str]:
    """Unified retry `collect.into` names become visible after the step (spec §6)."""
    names: set[str] = set()
    for holder in (
        step.retry,
        step.tool.config.get("retry") if step.tool and isinstance(step.tool.config, dict) else None,
    ):
        policies = holder if isinstance(holder, list) else []
        for policy in policies:
            then = policy.get("then") if isinstance(policy, dict) else None
            collect = then.get("collect") if isinstance(then, dict) else None
            if isinstance(collect, dict) and isinstance(collect.get("into"), str):
                names.add(collect["into"])
    return names
