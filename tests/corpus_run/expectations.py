"""``expectations.yaml``: what every corpus playbook is expected to do when run, and the checks.

Every corpus file has exactly one entry, either

* ``run`` (one run) or ``runs`` (named variants, e.g. the hot and cold paths of a router): the
  workload overrides (``conf``, with ``{http_server}`` placeholders), the expected final state,
  setup, and assertions on step results, the database, tool calls and warnings; or
* ``skip``: exactly one reason from :data:`SKIP_REASONS` plus ``detail``.

Assertion vocabulary (``results`` list), each item names a ``step`` (or ``sql``) and one check:

=================  =========================================================================
``equals: v``      the value at ``path`` (dotted, integer segments index lists) equals ``v``
``length: n``      ``len(value) == n``
``gte``/``lte``    numeric bounds
``contains: v``    ``v in value`` (list element, substring, mapping key)
``one_of: [..]``   the value is one of these
``type: t``        ``dict | list | str | int | float | bool | null``
``each: {...}``    every element of the list value satisfies the nested check (``path`` relative)
``absent: true``   the path does not exist in the result
``tool_calls: n``  the step called its tool ``n`` times (``ToolStarted`` events of this run)
=================  =========================================================================

``sql`` items run a query on the test database after the run: ``{sql: "...", equals: [[...]]}``
(rows as lists).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CHECKS",
    "SKIP_REASONS",
    "Expectation",
    "Variant",
    "check_value",
    "load_expectations",
    "resolve_path",
]

EXPECTATIONS = Path(__file__).with_name("expectations.yaml")

# One reason per skipped playbook, from this vocabulary.
SKIP_REASONS = {
    "service": "needs a service this machine cannot run or reach (named in the value)",
    "check_error": "a mistake in the playbook that `noetlc check` reports as an error (the code)",
    "check_warning": (
        "a mistake in the playbook that `noetlc check` reports as a warning (the code), which "
        "makes the run fail or its results wrong"
    ),
    "playbook_mistake": (
        "a mistake in the playbook that NoETL's own engine would also trip over, which "
        "`noetlc check` does not report yet (a check gap for the lead)"
    ),
    "environment": (
        "needs something outside the corpus and the local services: a file of the NoETL "
        "repository, the `noetl` package, truly parallel task execution"
    ),
    "runtime_bug": "fails because of a bug in our runtime (reproduction in the detail)",
}

# Names allowed after `service:`.
SERVICES = {
    "snowflake": "Snowflake",
    "gcs": "Google Cloud Storage",
    "google_cloud": "Google Cloud APIs (Secret Manager, OAuth/ID tokens, GKE)",
    "aws_s3": "Amazon S3",
    "nats": "a NATS server (KV, object store, JetStream)",
    "ducklake": "a DuckLake catalog (the ducklake tool)",
    "kubernetes": "a Kubernetes cluster (container/script jobs, kind, GKE)",
    "shell": "a host shell with docker/kind/gcloud (the shell tool)",
    "openai": "the OpenAI API",
    "amadeus": "the Amadeus travel API",
    "auth0": "an Auth0 tenant",
    "github_api": "the public GitHub API",
    "wikipedia_api": "the public Wikipedia API",
    "open_meteo_api": "the public Open-Meteo weather API",
    "ibkr_gateway": "an Interactive Brokers client portal gateway",
    "ibm_quantum": "IBM Quantum (or another quantum provider)",
    "pcc_api": "the PointClickCare API (patient data)",
    "noetl_server": "NoETL's own server: its catalog, event log, artifact store, credential/keychain API",
    "public_api": "a public internet host (named in the detail)",
}

CHECKS = (
    "equals",
    "length",
    "gte",
    "lte",
    "contains",
    "one_of",
    "type",
    "each",
    "absent",
    "tool_calls",
)
_TYPES = {
    "dict": dict,
    "list": list,
    "str": str,
    "int": int,
    "float": (int, float),
    "bool": bool,
    "null": type(None),
}
_VARIANT_KEYS = {
    "source",
    "conf",
    "state",
    "results",
    "ran",
    "not_ran",
    "guard_warnings",
    "unrendered_warnings",
    "warnings_reason",
    "setup",
    "children",
    "seed",
}


@dataclass
class Variant:
    rel: str
    name: str  # "" for a single `run`
    source: str
    conf: dict[str, Any]
    state: str
    results: list[dict[str, Any]]
    ran: list[str]
    not_ran: list[str]
    guard_warnings: int
    unrendered_warnings: int
    setup: dict[str, Any]
    children: list[str] | None
    seed: int | None

    @property
    def test_id(self) -> str:
        return f"{self.rel}[{self.name}]" if self.name else self.rel


@dataclass
class Expectation:
    rel: str
    variants: list[Variant] = field(default_factory=list)
    skip: dict[str, Any] | None = None

    @property
    def reason(self) -> str | None:
        if not self.skip:
            return None
        return next(k for k in self.skip if k in SKIP_REASONS)


def _variant(rel: str, name: str, spec: dict[str, Any]) -> Variant:
    unknown = set(spec) - _VARIANT_KEYS
    assert not unknown, f"{rel} {name}: unknown keys {sorted(unknown)}"
    assert isinstance(spec.get("source"), str) and spec["source"].strip(), (
        f"{rel} {name}: say where the expected results come from (`source`)"
    )
    results = list(spec.get("results") or [])
    for item in results:
        _validate_check(rel, item)
    warnings = (spec.get("guard_warnings") or 0, spec.get("unrendered_warnings") or 0)
    if any(warnings):
        assert spec.get("warnings_reason"), f"{rel} {name}: expected warnings need a reason"
    return Variant(
        rel=rel,
        name=name,
        source=spec["source"],
        conf=dict(spec.get("conf") or {}),
        state=spec.get("state", "success"),
        results=results,
        ran=list(spec.get("ran") or []),
        not_ran=list(spec.get("not_ran") or []),
        guard_warnings=int(warnings[0]),
        unrendered_warnings=int(warnings[1]),
        setup=dict(spec.get("setup") or {}),
        children=spec.get("children"),
        seed=spec.get("seed"),
    )


def _validate_check(rel: str, item: dict[str, Any]) -> None:
    assert isinstance(item, dict), f"{rel}: a result check must be a mapping: {item!r}"
    if "sql" in item:
        assert set(item) <= {"sql", "equals", "why"}, f"{rel}: bad sql check {item}"
        return
    assert "step" in item, f"{rel}: a result check names a `step`: {item}"
    checks = [k for k in item if k in CHECKS]
    assert len(checks) == 1, f"{rel}: exactly one check per item: {item}"
    assert set(item) <= {"step", "path", "why", *CHECKS}, f"{rel}: unknown keys in {item}"
    if "each" in item:
        nested = item["each"]
        assert isinstance(nested, dict) and len([k for k in nested if k in CHECKS]) == 1, item


def load_expectations(path: Path = EXPECTATIONS) -> dict[str, Expectation]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out: dict[str, Expectation] = {}
    for rel, entry in data.items():
        assert isinstance(entry, dict), f"{rel}: entry must be a mapping"
        kinds = [k for k in ("run", "runs", "skip") if k in entry]
        assert len(kinds) == 1 and set(entry) == set(kinds), (
            f"{rel}: exactly one of run / runs / skip (got {sorted(entry)})"
        )
        exp = Expectation(rel)
        if "skip" in entry:
            skip = dict(entry["skip"])
            reasons = [k for k in skip if k in SKIP_REASONS]
            assert len(reasons) == 1, f"{rel}: exactly one skip reason of {sorted(SKIP_REASONS)}"
            assert set(skip) <= {reasons[0], "detail", "also_reported"}, f"{rel}: {sorted(skip)}"
            assert isinstance(skip.get("detail"), str) and len(skip["detail"].split()) >= 4, (
                f"{rel}: a skip needs a `detail` sentence"
            )
            if reasons[0] == "service":
                assert skip["service"] in SERVICES, f"{rel}: unknown service {skip['service']!r}"
            if reasons[0] in ("check_error", "check_warning"):
                assert re.fullmatch(r"[A-Z]\d{3}", str(skip[reasons[0]])), rel
            exp.skip = skip
        elif "run" in entry:
            exp.variants.append(_variant(rel, "", dict(entry["run"])))
        else:
            for name, spec in dict(entry["runs"]).items():
                exp.variants.append(_variant(rel, str(name), dict(spec)))
        out[rel] = exp
    return out


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------

_MISSING = object()


def resolve_path(value: Any, path: str | None) -> Any:
    """``a.b.0.c`` into nested mappings/lists; ``_MISSING`` when a segment is absent."""
    if not path:
        return value
    for part in str(path).split("."):
        if isinstance(value, dict):
            if part not in value:
                return _MISSING
            value = value[part]
        elif isinstance(value, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            if not -len(value) <= index < len(value):
                return _MISSING
            value = value[index]
        else:
            return _MISSING
    return value


def check_value(value: Any, item: dict[str, Any]) -> str | None:
    """None when ``value`` (already resolved) satisfies ``item``'s check, else a message."""
    if "absent" in item:
        return None if value is _MISSING else f"expected no value, found {value!r}"
    if value is _MISSING:
        return "no such path in the result"
    if "equals" in item:
        expected = item["equals"]
        ok = (
            value == expected
            and type(value) is type(expected)
            or (
                isinstance(value, (int, float))
                and isinstance(expected, (int, float))
                and not isinstance(value, bool)
                and not isinstance(expected, bool)
                and value == expected
            )
        )
        return None if ok else f"expected {expected!r}, got {value!r}"
    if "length" in item:
        try:
            size = len(value)
        except TypeError:
            return f"has no length: {value!r}"
        return None if size == item["length"] else f"expected length {item['length']}, got {size}"
    if "gte" in item or "lte" in item:
        key = "gte" if "gte" in item else "lte"
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"not a number: {value!r}"
        ok = value >= item[key] if key == "gte" else value <= item[key]
        return None if ok else f"expected {key} {item[key]!r}, got {value!r}"
    if "contains" in item:
        try:
            ok = item["contains"] in value
        except TypeError:
            ok = False
        return None if ok else f"expected to contain {item['contains']!r}: {value!r}"
    if "one_of" in item:
        return None if value in item["one_of"] else f"expected one of {item['one_of']}: {value!r}"
    if "type" in item:
        wanted = _TYPES[item["type"]]
        ok = isinstance(value, wanted) and not (
            item["type"] in ("int", "float") and isinstance(value, bool)
        )
        return None if ok else f"expected type {item['type']}, got {type(value).__name__}"
    if "each" in item:
        if not isinstance(value, list) or not value:
            return f"expected a non-empty list, got {value!r}"
        nested = item["each"]
        for index, element in enumerate(value):
            problem = check_value(resolve_path(element, nested.get("path")), nested)
            if problem:
                return f"element {index}: {problem}"
        return None
    raise AssertionError(f"no check in {item}")
