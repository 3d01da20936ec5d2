"""Payloads and inputs for the ``execute_step`` tests (test_runtime_step*.py): a python tool, a
step payload of a dialect, arcs, the run's inputs."""

from __future__ import annotations


def py(code, **extra):
    return {"kind": "python", "code": code, **extra}


def payload(step="s", **kw):
    return {"step": step, "dialect": kw.pop("dialect", "canonical"), **kw}


def arcs(*items, mode="exclusive"):
    return {"mode": mode, "arcs": [dict(a) for a in items]}


def inputs(**kw):
    return {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 77, **kw}


def v2(step="s", **kw):
    return payload(step, dialect="case-v2", **kw)
