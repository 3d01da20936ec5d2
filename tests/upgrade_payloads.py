"""What the upgrade tests compare: the findings of a check less the D9xx infos, and each
step's payload as the runtime would receive it (shared by tests/test_upgrade*.py)."""

from __future__ import annotations

import re

from noetl_compile.check import check_text
from noetl_compile.lower.payload import loop_payload, step_payload
from noetl_compile.upgrade import ENGINE_DIFFERENCE_CODES
from noetl_compile.upgrade.guards import rebind


def findings(diagnostics) -> list[str]:
    """Codes of a check, less the D9xx infos: they say how NoETL's engine of the file's own
    generation differs, so an upgrade to another generation changes them by design."""
    return [d.code for d in diagnostics if d.code not in ENGINE_DIFFERENCE_CODES]


def step_payloads(text: str, path: str) -> dict[str, dict]:
    """Each step's payload, its routing as the set of targets, and the values passed along an
    arc laid over the target's input (as the runtime does; the upgrade moves them there when
    the arc is the target's only way in)."""
    playbook = check_text(text, path).playbook
    out = {}
    passed: dict[str, dict] = {}
    for step in playbook.steps:
        payload = step_payload(playbook, step, lambda name: name)
        arcs = payload.pop("routing")["arcs"]
        for arc in arcs:
            passed.setdefault(arc["step"], {}).update(arc.get("args") or {})
        targets = {arc["step"] for arc in arcs}
        for rule in payload.pop("case"):
            for target in rule["then"].get("next", []):
                targets.add(target["step"])
                # A case rule's args, rendered when it fires with the step's result as
                # `result`/`response`, read it by the step's name in the target's input.
                for key, value in (target.get("args") or {}).items():
                    own = rebind(value, frozenset({"result", "response"}), step.name)
                    passed.setdefault(target["step"], {})[key] = own or value
        payload.pop("dialect")
        payload["targets"] = sorted(targets)
        if step.loop is not None:
            payload["loop"] = loop_payload(step)
            if payload["loop"].get("mode") == "async":
                # case-v2 `async` is written `parallel` (the lowering gives both unbounded
                # concurrent instances); U804 states what NoETL's engines did with each.
                payload["loop"]["mode"] = "parallel"
        out[step.name] = payload
    for name, values in passed.items():
        if name in out:
            out[name]["input"] = {**(out[name].get("input") or {}), **values}
    for payload in out.values():
        if isinstance(payload.get("input"), dict):
            payload["input"] = {k: _plain_reads(v) for k, v in payload["input"].items()}
    return _vars_as_ctx(out)


# `(s.data.k if s.data is mapping and 'k' in s.data else s.k)`: how the upgrade writes a
# case-v2 `response.k` it cannot prove plain (upgrade/guards.py rebind_body_first); compared as
# `s.k`, the read it stands for (the runs compare the values).
_BODY_FIRST = re.compile(
    r"\((\w+)\.data\.(\w+) if \1\.data is mapping and '\2' in \1\.data else \1\.\2\)"
)


def _plain_reads(value):
    return _BODY_FIRST.sub(r"\1.\2", value) if isinstance(value, str) else value


def _vars_as_ctx(payloads: dict[str, dict]) -> dict[str, dict]:
    """case-v2 `vars` are the execution's variables (NoETL dc55c492 renders `vars` as its
    variable store): a step's `vars` and its canonical `set` compare as the names they write,
    and a template reads `vars.x` as `ctx.x`. The written values are compared by running both
    (tests/test_upgrade_runs.py)."""
    from noetl_compile.upgrade.guards import rebind

    def names(block) -> list[str]:
        return sorted(str(k).removeprefix("ctx.") for k in (block or {}))

    def reads(value):
        if isinstance(value, str):
            return rebind(value, frozenset({"vars"}), "ctx") or value
        if isinstance(value, dict):
            return {k: reads(v) for k, v in value.items()}
        if isinstance(value, list):
            return [reads(v) for v in value]
        return value

    out = {}
    for step, payload in payloads.items():
        payload = dict(payload)
        written = names(payload.pop("vars", None)) + names(payload.pop("set", None))
        out[step] = {**reads(payload), "writes": sorted(written)}
    return out
