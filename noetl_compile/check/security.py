"""Rule family: security (X601 literal secrets).

The whole document is walked (workload, keychain, tool configs, code and SQL text). A secret is
reported where its value starts (inside a longer string: at its offset there) and never echoed:
the diagnostic carries the secret only so that every output format can mask it. What counts as
a secret is decided in ``secrets.py``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from ..load import YList, YMap
from ..lookalike import mixed_script, skeleton
from .context import CheckContext
from .secrets import (
    Finding,
    is_reference,
    is_secret_key,
    keyed_secret,
    text_secrets,
    token_like,
)

__all__ = ["check", "is_reference", "is_secret_key"]

_HINT = (
    "keep secrets out of playbooks: use `auth: <credential name>`, a keychain entry or "
    "`{{ env.NAME }}`"
)


def check(ctx: CheckContext) -> None:
    if not isinstance(ctx.playbook.raw, YMap):
        return
    reported: set[tuple[int, int]] = set()  # an aliased value is visited once per use
    # An ASCII file (almost every playbook) has no look-alike key: its keys are not scanned.
    mixed: list[tuple[YMap, str]] | None = None if ctx.document.text.isascii() else []
    for key, value, holder, parent, where, forced in _values(ctx.playbook.raw, mixed):
        credential = forced is not None or _credential(key, parent)
        if isinstance(value, str):
            for finding in _findings(key, value, holder, credential, forced):
                position = ctx.position_in_string(value, finding.offset)
                _report(
                    ctx,
                    position,
                    value[finding.offset : finding.offset + finding.length],
                    finding.what or f"`{key}` holds a literal secret",
                    reported,
                )
        elif credential and isinstance(holder, (YMap, YList)):
            # `password: 12345678` is a secret even though YAML reads it as a number.
            position = ctx.pos(holder, where)
            _report(
                ctx, position, str(value), forced or f"`{key}` holds a literal secret", reported
            )
    for holder, key in mixed or ():
        _mixed_script(ctx, holder, key, reported)


def _mixed_script(ctx: CheckContext, holder: Any, key: str, reported: set) -> None:
    if not isinstance(holder, YMap) or key not in holder:
        return
    position = ctx.key_pos(holder, key)
    where = ("X603", position.line, position.col)
    if where in reported:
        return
    reported.add(where)
    ctx.report(
        "X603",
        position,
        f"the key `{key}` mixes letters of several scripts; it reads as `{skeleton(key)}`",
        hint="spell keys in one script (a look-alike letter hides what a key names)",
    )


_VALUE_KEYS = frozenset({"value", "default", "literal", "plain", "raw", "data", "current"})
# Names that are a credential only inside a request's query parameters or headers
# (`params: {key: x}`, Google's APIs; `headers: {auth: x}`), and mappings whose every value is
# one (`cookies: {session: x}`).
_REQUEST_PARTS = frozenset({"params", "query", "query_params", "headers"})
_REQUEST_SECRETS = frozenset({"key", "auth", "sig", "signature"})
_ALL_SECRET = frozenset({"cookies"})
_PAIRED = _REQUEST_PARTS | _ALL_SECRET


def _credential(key: Any, parent: Any) -> bool:
    if is_secret_key(key):
        return True
    where = str(parent).lower() if isinstance(parent, str) else ""
    return where in _ALL_SECRET or (
        where in _REQUEST_PARTS and isinstance(key, str) and key.lower() in _REQUEST_SECRETS
    )


# Credential positions that are not a credential-named key (issue 35): `auth: {basic: [u, p]}`,
# `auth: [u, p]`; argv lists (`[--password, x]`); header, query and cookie pairs written as
# lists (`headers: [[Authorization, x]]`, `[{name: X-Api-Key, value: x}]`).
_AUTH_SCHEMES = frozenset(
    {"auth", "basic", "basic_auth", "basicauth", "digest", "ntlm", "http_auth"}
)
_FLAG = re.compile(r"^-{1,2}+(?P<name>[A-Za-z][\w.-]{0,64}+)$")
_PAIR_NAMES = ("name", "key", "header")
# Keys whose random-looking values are digests and identifiers, not secrets (`sha256:`,
# `checksum`, `etag`, `request_id`, `requestId`): the entropy rule passes them by (token
# formats and credential names still apply).
_DIGEST_KEY = re.compile(
    r"(?:^|[^A-Za-z0-9])(?i:id|ids|uuid|guid|hash|sha(?:1|256|384|512)?+|md5|checksum|digest"
    r"|etag|fingerprint|integrity|commit|revision|nonce)$"
    r"|[a-z0-9](?:Ids?+|IDs?+|Uuid|UUID|Guid|GUID|Hash|Sha\d{0,3}+|SHA\d{0,3}+|Md5|MD5|Checksum"
    r"|Digest|E[Tt]ag|Fingerprint|Integrity|Commit|Revision|Nonce)$"
)
# `headers: ["X-Api-Key: x"]`: a header written as its line.
_HEADER_ITEM = re.compile(r"^(?P<name>[A-Za-z][\w-]{0,64}+)[ \t]*+:[ \t]*+(?P<value>\S[^\n]*+)$")
_HEADER_LINE = "a header line"


def _scalar(node: Any) -> bool:
    return isinstance(node, str) or (isinstance(node, (int, float)) and not isinstance(node, bool))


def _forced(key: Any, items: YList) -> dict[int, str] | None:
    """Indices of ``items`` (a list under ``key``) that hold a credential by their position;
    None for most lists (cheap tests first: this runs for every list of every playbook)."""
    out: dict[int, str] = {}
    if (
        len(items) == 2
        and isinstance(key, str)
        and skeleton(key).lower() in _AUTH_SCHEMES
        and _scalar(items[0])
        and _scalar(items[1])
    ):
        out[1] = "basic auth holds a literal password"
    for index in range(len(items) - 1):
        item = items[index]
        if not (isinstance(item, str) and item[:1] == "-"):
            continue
        flag = _FLAG.match(item)
        if flag and is_secret_key(flag.group("name")) and _scalar(items[index + 1]):
            out[index + 1] = f"the argument after `{item}` is a literal secret"
    return out or None


def _pair(item: Any) -> tuple[Any, Any, Any] | None:
    """(name, value, holder) of a header / parameter pair written as a list or a name-value map."""
    if isinstance(item, YList) and len(item) == 2 and isinstance(item[0], str):
        return item[0], item[1], item
    if isinstance(item, YMap) and "value" in item:
        for field in _PAIR_NAMES:
            if isinstance(item.get(field), str):
                return item[field], item["value"], item
    return None


def _values(root: YMap, mixed: list | None) -> Iterator[tuple[Any, Any, Any, Any, Any, str | None]]:
    """(key, scalar, container, the container's own key, the scalar's key or index there, why
    its position makes it a credential or None) for every string or number in the document; a
    list's items carry the list's key (`passwords: [a, b]`). Iterative: the loader accepts
    nesting deeper than a recursive walk would survive. Keys mixing scripts go to ``mixed``
    (None: not looked for)."""
    stack: list[tuple[Any, Any, Any, Any, Any, str | None]] = [(None, root, None, None, None, None)]
    while stack:
        key, node, holder, parent, where, forced = stack.pop()
        if isinstance(node, YMap):
            # Under a credential key, a mapping's value-like entries are the credential:
            # `password: {default: x}` (a gate or Param default), `token: {value: x}`.
            inherit = is_secret_key(key)
            if mixed is not None:
                mixed += [(node, k) for k in node if isinstance(k, str) and mixed_script(k)]
            pushed = [
                (key if inherit and str(k).lower() in _VALUE_KEYS else k, v, node, key, k, None)
                for k, v in node.items()
            ]
        elif isinstance(node, YList):
            positional = _forced(key, node)
            pairs = isinstance(key, str) and key.lower() in _PAIRED
            if not pairs and positional is None:  # most lists: items under the list's key
                pushed = [(key, item, node, parent, i, None) for i, item in enumerate(node)]
                pushed.reverse()
                stack += pushed
                continue
            pushed = []
            for index, item in enumerate(node):
                pair = _pair(item) if pairs else None
                if pair is not None:  # `[Authorization, Bearer x]`: the value under its name
                    name, value, holder_ = pair
                    where_ = 1 if isinstance(holder_, YList) else "value"
                    pushed.append((name, value, holder_, key, where_, None))
                    continue
                line = _HEADER_ITEM.match(item) if pairs and isinstance(item, str) else None
                if line is not None and _credential(line.group("name"), key.lower()):
                    # `headers: ["X-Api-Key: x"]`: the value after the header's name
                    pushed.append((line.group("name"), item, node, key, index, _HEADER_LINE))
                    continue
                forced_ = positional.get(index) if positional else None
                pushed.append((key, item, node, parent, index, forced_))
        else:
            if _scalar(node):
                yield key, node, holder, parent, where, forced
            continue
        pushed.reverse()  # popped in document order
        stack += pushed


def _findings(
    key: Any, value: str, holder: Any, credential: bool, forced: str | None
) -> tuple[Finding, ...]:
    if forced == _HEADER_LINE:
        start = _HEADER_ITEM.match(value).start("value")
        keyed = keyed_secret(value[start:])
        if keyed is not None:
            what = f"the header `{key}` holds {keyed.what or 'a literal secret'}"
            return (keyed._replace(offset=start + keyed.offset, what=what),)
        return ()
    if isinstance(holder, (YMap, YList)) and credential:
        keyed = keyed_secret(value)
        if keyed is not None:
            what = forced if forced and not keyed.what else _keyed_what(key, keyed.what)
            return (keyed._replace(what=what),)
    found = _text_secrets(str(value))
    if not found and isinstance(holder, (YMap, YList)):
        token = token_like(str(value))
        return token if token and not _DIGEST_KEY.search(str(key)) else ()
    return found


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
