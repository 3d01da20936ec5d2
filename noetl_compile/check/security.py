"""Rule family: security (X601 literal secrets).

The whole document is walked (workload, keychain, tool configs, code and SQL text). A secret is
reported where its value starts (inside a longer string: at its offset there) and never echoed:
the diagnostic carries the secret only so that every output format can mask it. What counts as
a secret is decided in ``secrets.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from ..load import YList, YMap
from .context import CheckContext
from .secrets import Finding, is_reference, is_secret_key, keyed_secret, text_secrets

__all__ = ["check", "is_reference", "is_secret_key"]

_HINT = (
    "keep secrets out of playbooks: use `auth: <credential name>`, a keychain entry or "
    "`{{ env.NAME }}`"
)


def check(ctx: CheckContext) -> None:
    if not isinstance(ctx.playbook.raw, YMap):
        return
    reported: set[tuple[int, int]] = set()  # an aliased value is visited once per use
    for key, value, holder, parent in _values(ctx.playbook.raw):
        credential = _credential(key, parent)
        if isinstance(value, str):
            for finding in _findings(key, value, holder, credential):
                position = ctx.position_in_string(value, finding.offset)
                _report(
                    ctx,
                    position,
                    value[finding.offset : finding.offset + finding.length],
                    finding.what or f"`{key}` holds a literal secret",
                    reported,
                )
        elif credential and isinstance(holder, YMap):
            # `password: 12345678` is a secret even though YAML reads it as a number.
            position = ctx.pos(holder, key)
            _report(ctx, position, str(value), f"`{key}` holds a literal secret", reported)


_VALUE_KEYS = frozenset({"value", "default", "literal", "plain", "raw", "data", "current"})
# Names that are a credential only inside a request's query parameters or headers
# (`params: {key: x}`, Google's APIs; `headers: {auth: x}`), and mappings whose every value is
# one (`cookies: {session: x}`).
_REQUEST_PARTS = frozenset({"params", "query", "query_params", "headers"})
_REQUEST_SECRETS = frozenset({"key", "auth", "sig", "signature"})
_ALL_SECRET = frozenset({"cookies"})


def _credential(key: Any, parent: Any) -> bool:
    if is_secret_key(key):
        return True
    where = str(parent).lower() if isinstance(parent, str) else ""
    return where in _ALL_SECRET or (
        where in _REQUEST_PARTS and isinstance(key, str) and key.lower() in _REQUEST_SECRETS
    )


def _values(root: YMap) -> Iterator[tuple[Any, Any, Any, Any]]:
    """(key, scalar, container, the container's own key) for every string or number in the
    document; a list's items carry the list's key (`passwords: [a, b]`). Iterative: the loader
    accepts nesting deeper than a recursive walk would survive."""
    stack: list[tuple[Any, Any, Any, Any]] = [(None, root, None, None)]
    while stack:
        key, node, holder, parent = stack.pop()
        if isinstance(node, YMap):
            # Under a credential key, a mapping's value-like entries are the credential:
            # `password: {default: x}` (a gate or Param default), `token: {value: x}`.
            inherit = is_secret_key(key)
            pushed = [
                (key if inherit and str(k).lower() in _VALUE_KEYS else k, v, node, key)
                for k, v in node.items()
            ]
        elif isinstance(node, YList):
            pushed = [(key, v, node, parent) for v in node]
        else:
            if isinstance(node, str) or (
                isinstance(node, (int, float)) and not isinstance(node, bool)
            ):
                yield key, node, holder, parent
            continue
        pushed.reverse()  # popped in document order
        stack += pushed


def _findings(key: Any, value: str, holder: Any, credential: bool) -> tuple[Finding, ...]:
    if isinstance(holder, (YMap, YList)) and credential:
        keyed = keyed_secret(value)
        if keyed is not None:
            return (keyed._replace(what=_keyed_what(key, keyed.what)),)
    return _text_secrets(str(value))


@functools.lru_cache(maxsize=8192)
def _text_secrets(value: str) -> tuple[Finding, ...]:
    # The same strings recur across the steps and files of a run (tool kinds, templates, SQL
    # of copied playbooks): scan each once.
    return tuple(text_secrets(value))


def _keyed_what(key: Any, what: str) -> str:
    return f"`{key}` holds {what or 'a literal secret'}"


def _report(ctx: CheckContext, position, secret: str, what: str, reported: set) -> None:
    where = (position.line, position.col)
    if where in reported:
        return
    reported.add(where)
    ctx.report("X601", position, f"{what} ({mask(secret)})", hint=_HINT, secret=secret)


def mask(secret: str) -> str:
    """A description that never reveals any character of the secret."""
    return f"{'*' * min(len(secret), 8)}, {len(secret)} characters, masked"
