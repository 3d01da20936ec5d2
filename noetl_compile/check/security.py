"""Rule family: security (X601 literal secrets).

The whole document is walked (workload, keychain, tool configs, code and SQL text). A secret is
reported where its value starts (inside a longer string: at its offset there) and never echoed.
Signals: a secret-named key holding a literal (an `Authorization` value: the part after
`Bearer`), a password inside a URL or an SQL `PASSWORD '...'` clause, and token shapes that are
secrets wherever they appear (AWS key ids, GitHub/Slack tokens, private key blocks).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from ..load import YList, YMap
from .context import CheckContext

# Key names (snake, kebab or camel case) that hold a secret: exact or as a suffix (`db_password`).
_SECRET_WORDS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "client_secret",
    "authorization",
)
_TEMPLATE = re.compile(r"\{\{|\{%")
# Values that name a secret instead of holding it.
_REFERENCE = re.compile(
    r"""^(?:
        [A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*          # an environment variable name: MY_TOKEN
      | \$\{[^}]*\} | \$[A-Za-z_]\w*           # ${VAR}, $VAR
      | <[^<>]*> | \[[^\[\]]*\]                # <your token>, [token]
      | [*x.X#-]{3,}                           # ****, xxx, ...
      | (?:projects/[^/\s]+/)?secrets/\S+      # GCP secret manager
      | arn:aws:(?:secretsmanager|ssm):\S+ | (?:vault|secret|sm|gcp|aws|azure|env|keychain)://?\S*
      | https://[\w.-]+\.vault\.azure\.net/\S*
    )$""",
    re.VERBOSE,
)
# Obvious stand-ins: `your-token`, `changeme`, `test_session_123`, `<token>` ...
_PLACEHOLDER_WORDS = re.compile(
    r"^(?:your|my|enter|insert|replace|test|fake|sample|mock|dummy)(?:[-_ ]|$)"
    r"|changeme|placeholder|redacted|example|^none$|^null$|^todo$",
    re.IGNORECASE,
)
# A lowercase slug that says what it names (`openai-api-key`, `github_token`) is a reference.
_NAMED_REFERENCE = re.compile(r"^[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)*$")
_NAME_HINTS = ("key", "token", "secret", "password", "passwd", "credential", "cred", "auth")

# Bounded repeats keep the scan linear on long code blocks.
_URL_CREDENTIALS = re.compile(
    r"\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@'\"]{1,256}:(?P<secret>[^\s@/'\"]{1,256})@", re.IGNORECASE
)
# `CREATE SECRET (... PASSWORD 'x')`, `CREATE USER u PASSWORD 'x'` in SQL text.
_SQL_PASSWORD = re.compile(r"\bPASSWORD\s+'(?P<secret>[^'\s]+)'", re.IGNORECASE)
_BEARER = re.compile(r"^\s*(?:Bearer|Basic|Token)\s+(?P<secret>\S.*?)\s*$", re.IGNORECASE)
_TOKEN_SHAPES = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
    ),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("a Slack token", re.compile(r"\bxox[bpars]-[A-Za-z0-9-]{10,}")),
)

_ANY_TOKEN_SHAPE = re.compile("|".join(pattern.pattern for _, pattern in _TOKEN_SHAPES))


def check(ctx: CheckContext) -> None:
    if not isinstance(ctx.playbook.raw, YMap):
        return
    seen: set[tuple[int, int]] = set()  # an aliased value is built once per use, at one place
    for key, value, holder in _strings(ctx.playbook.raw):
        span = getattr(value, "span", None)
        if span is not None:
            if (span.start, span.end) in seen:
                continue
            seen.add((span.start, span.end))
        _check_value(ctx, key, value, holder)


def _strings(root: YMap) -> Iterator[tuple[Any, str, Any]]:
    """(key, string value, container) for every string in the document; list items have no
    key. Iterative: the loader accepts nesting deeper than a recursive walk would survive."""
    stack: list[tuple[Any, Any, Any]] = [(None, root, None)]
    while stack:
        key, node, holder = stack.pop()
        if isinstance(node, str):
            yield key, node, holder
        elif isinstance(node, YMap):
            stack.extend((k, v, node) for k, v in reversed(list(node.items())))
        elif isinstance(node, YList):
            stack.extend((None, v, node) for v in reversed(node))


_SECRET_SUFFIX = re.compile("(?:" + "|".join(w.replace("_", "") for w in _SECRET_WORDS) + ")$")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: Any) -> bool:
    """`password`, `db_password`, `dbPassword`, `X-Api-Key`, `PGPASSWORD` ... (a name ending in a
    secret word, whatever the separators); `password_file` or `token_url` are not secrets."""
    if not isinstance(key, str):
        return False
    return _SECRET_SUFFIX.search(_NOT_ALNUM.sub("", key.lower())) is not None


def is_reference(value: str) -> bool:
    """Does this literal name a secret (env var, secret manager path, placeholder) rather than hold one?"""
    text = value.strip()
    if _REFERENCE.match(text) or _PLACEHOLDER_WORDS.search(text):
        return True
    return bool(_NAMED_REFERENCE.match(text)) and any(hint in text for hint in _NAME_HINTS)


def _check_value(ctx: CheckContext, key: Any, value: str, holder: Any) -> None:
    if not value.strip():
        return
    if is_secret_key(key) and isinstance(holder, YMap) and not _TEMPLATE.search(value):
        offset = _secret_offset(value)
        if offset is not None:
            _report(ctx, value, offset, f"`{key}` holds a literal secret")
            return
    reported: set[int] = set()  # one finding per secret, however many rules see it
    # Cheap substring tests first: almost no string holds a URL with credentials or SQL PASSWORD.
    patterns = []
    if "://" in value and "@" in value:
        patterns.append((_URL_CREDENTIALS, "a URL holds a literal password"))
    if "assword" in value or "ASSWORD" in value:
        patterns.append((_SQL_PASSWORD, "an SQL statement holds a literal password"))
    for pattern, what in patterns:
        for match in pattern.finditer(value):
            secret = match.group("secret")
            if (
                _TEMPLATE.search(secret)
                or is_reference(secret)
                or secret.startswith(("{", "$", "%"))
            ):
                continue
            reported.add(match.start("secret"))
            _report(ctx, value, match.start("secret"), what)
    if not _ANY_TOKEN_SHAPE.search(value):
        return
    for what, pattern in _TOKEN_SHAPES:
        for match in pattern.finditer(value):
            if match.start() not in reported:
                reported.add(match.start())
                _report(ctx, value, match.start(), f"{what} is written into the playbook")


def _secret_offset(value: str) -> int | None:
    """Offset of the secret part of a literal value, or None when it is only a reference."""
    bearer = _BEARER.match(value)
    if bearer:
        secret = bearer.group("secret")
        return None if is_reference(secret) else bearer.start("secret")
    if is_reference(value):
        return None
    return len(value) - len(value.lstrip())


def _report(ctx: CheckContext, value: str, offset: int, what: str) -> None:
    ctx.report(
        "X601",
        ctx.position_in_string(value, offset),
        f"{what} ({_mask(value, offset)})",
        hint="keep secrets out of playbooks: use `auth: <credential name>`, a keychain entry or "
        "`{{ env.NAME }}`",
    )


def _mask(value: str, offset: int) -> str:
    """A description that never reveals any character of the secret."""
    length = len(re.split(r"[\s@'\"]", value[offset:], maxsplit=1)[0]) or len(value) - offset
    return f"{'*' * min(length, 8)}, {length} characters, masked"
