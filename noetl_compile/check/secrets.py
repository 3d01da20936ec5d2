"""What a literal secret looks like: credential key names, secrets inside longer text (URLs,
query strings, SQL, shell and python lines) and token shapes that are secrets wherever they sit.

Pure text functions, no playbook: ``check/security.py`` walks the document and reports; compile
uses the same findings to refuse writing a secret into a DAG file. Every pattern is linear (no
nested unbounded repeats), so a long code block costs one pass per pattern.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator
from typing import NamedTuple

from ..secret_names import is_secret_key
from .tokens import SHAPE_HINTS, SHAPE_LITERALS, TOKEN_SHAPES, random_token, token_user

# Credential key names (`is_secret_key`) live in a leaf the runtime's redaction shares.


# Values that name a secret instead of holding it.
_REFERENCE = re.compile(
    r"""^(?:
        [A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*          # an environment variable name: MY_TOKEN
      | \$\{[^}]*\} | \$[A-Za-z_]\w* | \$\(\S*\)   # ${VAR}, $VAR, $(cmd)
      | %\([\w.]+\)s | %[\w.]+%                # %(name)s, %NAME%
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
_TEMPLATE = re.compile(r"\{\{|\{%")


def is_reference(value: str) -> bool:
    """Does this literal name a secret (env var, secret manager path, placeholder) rather than hold one?"""
    text = value.strip()
    if not text or _REFERENCE.match(text) or _PLACEHOLDER_WORDS.search(text):
        return True
    return bool(_NAMED_REFERENCE.match(text)) and any(hint in text for hint in _NAME_HINTS)


@functools.lru_cache(maxsize=4096)  # a long text repeats its candidates: judge each once
def _literal(secret: str) -> bool:
    return (
        bool(secret.strip())
        and not _TEMPLATE.search(secret)
        and not secret.startswith(("{", "$", "%("))
        and not is_reference(secret)
    )


class Finding(NamedTuple):
    offset: int  # where the secret starts in the value
    length: int
    what: str


_BEARER = re.compile(
    r"^\s*+(?:Bearer|Basic|Token|Digest|ApiKey|Key)\s++(?P<secret>\S(?:.*\S)?+)\s*+$", re.IGNORECASE
)
# Literals a template hides: `{{ env.X | default('hunter2') }}`, `{{ 'hunter2' }}`, `or 'x'`.
_TEMPLATE_LITERAL = re.compile(
    r"""(?:\{\{-?+|\bd(?:efault)?+\(|\bor)\s*+(?P<q>['"])(?P<secret>[^'"\n]{1,512}+)(?P=q)"""
)


# Templates whose output is a constant: `{{ '' }}`, `{{ "x" }}`, `{{ 42 }}`, `{# a comment #}`.
# `"s3cr3t{{ '' }}"` renders to its literal text: it is judged as that literal.
_CONSTANT_TEMPLATE = re.compile(
    r"""\{\{-?+[ \t]{0,8}+(?:'(?P<s>[^'\n{}]{0,256}+)'|"(?P<d>[^"\n{}]{0,256}+)"|(?P<n>\d{1,32}+))"""
    r"""[ \t]{0,8}+-?+\}\}|\{#[^#\n]{0,256}+#\}"""
)


def literal_text(value: str) -> str | None:
    """What ``value`` renders to when every template in it is a constant, else None."""
    if not _TEMPLATE.search(value):
        return value
    rendered = _CONSTANT_TEMPLATE.sub(
        lambda m: m.group("s") or m.group("d") or m.group("n") or "", value
    )
    return None if _TEMPLATE.search(rendered) else rendered


def _constant_parts(value: str) -> Finding | None:
    """The first literal stretch of a value that is literal text plus constant templates (the
    text the DAG file would hold as written), or None when a template depends on anything."""
    rendered = literal_text(value)
    if rendered is None or not rendered.strip() or is_reference(rendered.strip()):
        return None
    start = 0
    for m in _CONSTANT_TEMPLATE.finditer(value):
        if value[start : m.start()].strip():
            break
        start = m.end()
    end = _CONSTANT_TEMPLATE.search(value, start)
    stretch = value[start : end.start() if end else len(value)]
    if not stretch.strip():  # only the templates hold text (`{{ 'x' }}`): the default rule
        return None
    lead = len(stretch) - len(stretch.lstrip())
    return Finding(
        start + lead, len(stretch.strip()), "a literal secret (its templates add constants)"
    )


def keyed_secret(value: str) -> Finding | None:
    """The secret in the literal value of a credential-named key, or None for a reference."""
    if not value.strip():
        return None
    if _TEMPLATE.search(value):
        constant = _constant_parts(value)
        if constant is not None:
            return constant
        for match in _TEMPLATE_LITERAL.finditer(value):
            secret = match.group("secret")
            if _literal(secret):
                return Finding(
                    match.start("secret"), len(secret), "a literal secret in a template default"
                )
        return None
    bearer = _BEARER.match(value)
    if bearer:
        secret = bearer.group("secret")
        return None if is_reference(secret) else Finding(bearer.start("secret"), len(secret), "")
    if is_reference(value):
        return None
    start = len(value) - len(value.lstrip())
    return Finding(start, len(value.strip()), "")


# Secrets inside longer text. Bounded repeats keep every scan linear on long code blocks.
# The password may hold slashes (`u:ab/cd@h`, unencoded) or be quoted (`u:'p w'@h`); a slash
# right after a port (`https://h:8080/a@b`) is a path, not a password.
# A password may hold any character: a quote inside (`u:ab'cd@h`), an `@` or a space when quoted.
_URL_CREDENTIALS = re.compile(
    r"\b[a-z][a-z0-9+.-]{0,30}+://[^\s:/@'\"]{0,256}+:"
    r"(?:'(?P<quoted>[^'\n]{1,256}+)'|\"(?P<dquoted>[^\"\n]{1,256}+)\"|(?P<secret>[^\s@'\"][^\s@]{0,255}+))@",
    re.IGNORECASE,
)
# `https://TOKEN@host/`: userinfo that is a user alone, reported when it reads as a token
# (``_token_user``), not as a login name (`postgres://etl@db`).
_URL_USER = re.compile(
    r"\b[a-z][a-z0-9+.-]{0,30}+://(?P<secret>[^\s:/@'\"?#]{12,256}+)@", re.IGNORECASE
)
_PORT_PATH = re.compile(r"\d{1,5}+/")
# `?api_key=x&`, `;Password=x;` (JDBC, ODBC, ADO.NET, Azure connection strings).
_PARAMETER = re.compile(
    r"(?:^|[?&;,\s])(?P<name>[\w.-]{1,64})=(?P<q>['\"]?)(?P<secret>[^&;,\s'\"()\[\]{}]{1,512})"
    r"(?![(\[])",
    re.IGNORECASE,
)
# `PASSWORD 'x'`, `PASSWORD = 'x'`, `IDENTIFIED BY 'x'` / `IDENTIFIED BY x` in SQL text.
_SQL_PASSWORD = re.compile(
    r"\b(?:PASSWORD\s*+(?:=\s*+)?+(?P<q>['\"])"
    r"|IDENTIFIED\s++(?:WITH\s++\w{1,64}+\s++)?+BY\s++(?P<q2>['\"]?+))"
    r"(?P<secret>[^'\"\s;,)]{1,512}+)(?:(?P=q)|(?P=q2))",
    re.IGNORECASE,
)
# `KEY_ID 'x'`, `SECRET 'x'`, `SESSION_TOKEN 'x'`: an option and its quoted value with no `=`
# (DuckDB's CREATE SECRET, postgres OPTIONS (...), Snowflake credentials); with `=` it is an
# assignment below.
_SQL_OPTION = re.compile(
    r"(?<![\w.$-])(?P<name>[A-Za-z_]\w{0,64}+)[ \t\n]{1,8}+'(?P<secret>[^'\n]{1,512}+)'"
)
# Access key ids name half of a credential pair: in SQL options and assignments they are
# reported with the secret (`CREATE SECRET (KEY_ID 'x', SECRET 'y')`, `SET s3_access_key_id=`).
_KEY_IDS = frozenset(
    {"key_id", "aws_key_id", "access_key_id", "aws_access_key_id", "s3_access_key_id", "gcs_key_id"}
)
# A query parameter named `key` (`?key=x`, Google's APIs): only after `?` or `&`.
_QUERY_KEYS = frozenset({"key"})
# Free text: `the password is x`, `API key x`, `token: x`, `creds: admin / x` in a description,
# a note or a comment. The value must have 8+ characters mixing letters and digits and no slash
# (checked after the match), so prose like "password is required", "token expired" or "the
# token endpoint /v1/token2" is not a secret.
_PROSE = re.compile(
    r"(?<![\w.$/-])(?P<name>pass(?:word|wd|phrase|code)|pwd|pw|secret|token|apikey"
    r"|(?:api|secret|access|private|encryption|signing|master|client)[ _-]?key"
    r"|client[ _-]secret|(?:access|auth|api|bearer|refresh)[ _-]token|creds|credentials)"
    r"(?![\w.-])(?:[ \t]{0,8}+:|[ \t]{1,8}+(?:is|was)(?!\w))?+[ \t]{1,8}+"
    r"(?:[\w.@-]{1,64}+[ \t]{0,4}+/[ \t]{0,4}+)?+['\"`]?+"
    r"(?P<secret>[^\s'\"`<>(){}\[\],;|]{8,256}+)(?!\()",
    re.IGNORECASE,
)
_PROSE_TRAIL = ".:!?"
# `export PGPASSWORD=x`, `--password=x`, `--token x`, `password = "x"`, `"api_key": "x"`.
_ASSIGNMENT = re.compile(
    r"""(?<![\w.-])(?P<name>[A-Za-z_][\w.-]{0,64}+)(?P<kq>['"]?+\]?+)\s{0,8}+(?::=|=>|:|=)\s{0,8}+"""
    r"""(?P<q>['"])(?P<secret>[^'"\n]{1,512}+)(?P=q)"""
)
# `--password x` (the `=` form is a parameter above).
_OPTION = re.compile(
    r"(?:^|\s)--(?P<name>[A-Za-z][\w-]{0,64}+) ++(?P<secret>[^\s'\"=;&|()-][^\s'\";&|()]{0,511}+)"
)
# `SET PASSWORD FOR 'u'@'h' = 'x'`, `SET PASSWORD = PASSWORD('x')` (MySQL).
_SQL_SET_PASSWORD = re.compile(
    r"\bSET\s++PASSWORD\b[^=;\n]{0,256}+=\s*+(?:PASSWORD\s*+\(\s*+)?+(?P<q>['\"])"
    r"(?P<secret>[^'\"\n]{1,512}+)(?P=q)",
    re.IGNORECASE,
)
# Command lines whose password is an option of its own: `curl -u user:x`, `wget --user=u:x`,
# `mysql -px` (the password glued to `-p`), `sshpass -p x`.
# The option is found first and its command looked for before it on its line (at most 512
# characters back): a command-first pattern re-read up to 512 characters after every `mysql`.
_COMMAND_WORD = re.compile(r"\b(?:(?P<curl>curl)|(?P<mysql>mysql)(?:dump|admin|import|show)?+)\b")
_COMMAND_OPTION = re.compile(
    r"\s(?:(?:-u|--user)[ =]['\"]?+[^\s:'\"]{1,128}+:(?P<curl>[^\s'\"]{1,256}+)"
    r"|-p(?P<mysql>[^\s'\"-][^\s'\"]{0,255}+))"
    r"|\bsshpass\s++-p\s*+['\"]?+(?P<sshpass>[^\s'\"]{1,256}+)"
)
_COMMAND_REACH = 512
# `auth=("user", "x")`: basic auth as a python tuple (httpx, requests).
_AUTH_TUPLE = re.compile(
    r"""\bauth\s{0,8}+=\s{0,8}+[(\[]\s{0,8}+(?P<q1>['"])[^'"\n]{0,256}+(?P=q1)\s{0,8}+,\s{0,8}+"""
    r"""(?P<q2>['"])(?P<secret>[^'"\n]{1,512}+)(?P=q2)"""
)
# `jdbc:oracle:thin:user/x@host:1521/db`: Oracle's user/password form.
_ORACLE_THIN = re.compile(
    r"\bjdbc:oracle:[a-z]{1,16}+:[^/@\s:'\"]{1,128}+/(?P<secret>[^@\s'\"]{1,256}+)@", re.IGNORECASE
)
# `password: x` as a line of a config file written in a string (YAML, INI, .env with `:`).
# Unquoted values with a digit or a symbol only: `password: str` is a python annotation.
_CONFIG_LINE = re.compile(
    r"^[ \t]{0,64}(?P<name>[A-Za-z_][\w.-]{0,64})[ \t]{0,8}:[ \t]{1,8}"
    r"(?P<secret>(?=[^\s'\"#]{0,511}[0-9!@$%^&*+=~?])[^\s'\"#{\[][^\s'\"#]{0,511})[ \t]*$",
    re.MULTILINE,
)
# `machine host login u password x` (.netrc) and `host:port:db:user:x` (.pgpass) lines.
_NETRC = re.compile(
    r"\bmachine\s++\S{1,253}+\s++login\s++\S{1,256}+\s++password\s++(?P<secret>[^\s'\"]{1,256}+)"
)
_PGPASS = re.compile(
    r"(?:^|[\s'\">])(?P<host>[\w.-]{1,253}):(?:\d{1,5}|\*):[\w.*-]{1,63}:[\w.*-]{1,63}"
    r":(?P<secret>[^\s:'\"]{1,256})(?=$|[\s'\"])",
    re.MULTILINE,
)
# A credential scheme and its token, whatever header or key holds it (`X-Upstream: Bearer x`).
# Long and with a digit, so that prose ("Basic authentication") is not a token.
_SCHEME_TOKEN = re.compile(
    r"(?:^|[\s'\"])(?:Bearer|Basic)\s++(?P<secret>(?=[^\s'\"\d]{0,511}+\d)[\w.~+/-]{16,512}+=*+)",
    re.IGNORECASE,
)
# Query parameters of signed URLs (Azure SAS, S3 and GCS presigned): the signature is the secret.
_SIGNED_URL_PARAMETERS = frozenset(
    {"sig", "signature", "x-amz-signature", "x-goog-signature", "x-amz-security-token"}
)
_HEADER_LINE = re.compile(
    r"\b(?:Authorization|Proxy-Authorization)\s*+:\s*+(?:Bearer|Basic|Token)\s++(?P<secret>[\w.~+/=-]{4,512}+)",
    re.IGNORECASE,
)
# Every credential key name holds one of these (lowercased): strings without any cannot hold a
# `name=secret` or `name: "secret"` pair, so the name-based scans are skipped (most code and SQL).
_KEY_HINTS = re.compile(r"pass|pw|secret|token|key|cred|auth|cookie")


@functools.lru_cache(maxsize=8192)  # strings recur across steps and files
def token_like(value: str) -> tuple[Finding, ...]:
    """A whole scalar that reads as a random token (``tokens.random_token``), unless it names one."""
    if not 20 <= len(value) <= 160:  # most scalars: a length test, nothing else
        return ()
    text = value.strip()
    if not random_token(text) or is_reference(text):
        return ()
    start = value.index(text[0])
    return (
        Finding(
            start, len(text), "a high-entropy string (a token or key) is written into the playbook"
        ),
    )


def _after_command(value: str, option: int, command: str, words: list, ends: list[int]) -> bool:
    """Does a ``command`` word (curl, mysql...) end before ``option`` on its line, at most
    ``_COMMAND_REACH`` characters back?"""
    line = value.rfind("\n", 0, option) + 1
    index = bisect.bisect_right(ends, option) - 1
    while index >= 0 and ends[index] >= max(line, option - _COMMAND_REACH):
        if words[index][1] == command:
            return True
        index -= 1
    return False


def text_secrets(value: str) -> Iterator[Finding]:
    """Secrets inside a longer string: one finding per secret, at its first character."""
    # Cheap substring tests first: most strings hold none of these.
    lowered = value.lower()
    named_key = _KEY_HINTS.search(lowered) is not None  # also true for `password`, `authorization`
    signed = "sig=" in lowered or "signature=" in lowered
    shaped = SHAPE_HINTS.search(value) is not None
    commands = any(word in lowered for word in ("curl", "mysql", "sshpass"))
    schemed = "bearer" in lowered or "basic" in lowered
    pgpass = value.count(":") >= 4
    if not (
        named_key
        or "jdbc:oracle" in lowered
        or signed
        or shaped
        or commands
        or schemed
        or pgpass
        or "identified" in lowered
        or ("://" in value and "@" in value)
    ):
        return  # no pattern below can match: most strings of a playbook end here
    found: set[int] = set()

    def add(offset: int, length: int, what: str) -> Iterator[Finding]:
        if offset not in found:  # one finding per secret, however many patterns see it
            found.add(offset)
            yield Finding(offset, length, what)

    def literal(pattern: re.Pattern[str], what: str) -> Iterator[Finding]:
        """A finding for each match of ``pattern`` whose `secret` group is a literal."""
        for m in pattern.finditer(value):
            if _literal(m.group("secret")):
                yield from add(m.start("secret"), len(m.group("secret")), what)

    def named(
        pattern: re.Pattern[str], what: str, also: frozenset[str] = frozenset()
    ) -> Iterator[Finding]:
        """As ``literal``, for patterns with a `name` group that must name a credential (or be
        one of ``also``); ``what`` is formatted with the name."""
        for m in pattern.finditer(value):
            name = m.group("name")
            credential = is_secret_key(name) or name.lower() in also
            if credential and _literal(m.group("secret")):
                yield from add(m.start("secret"), len(m.group("secret")), what.format(name=name))

    if "://" in value and "@" in value:
        for m in _URL_USER.finditer(value):
            if token_user(m.group("secret")) and _literal(m.group("secret")):
                yield from add(
                    m.start("secret"), len(m.group("secret")), "a URL's user is a literal token"
                )
        for m in _URL_CREDENTIALS.finditer(value):
            group = next(g for g in ("quoted", "dquoted", "secret") if m.group(g) is not None)
            secret = m.group(group)
            if group == "secret" and _PORT_PATH.match(secret):
                continue
            if _literal(secret):
                yield from add(m.start(group), len(secret), "a URL holds a literal password")
    if (named_key or signed) and "=" in value:
        for m in _PARAMETER.finditer(value):
            name = m.group("name")
            lowered_name = name.lower()
            credential = (
                is_secret_key(name)
                or lowered_name in _SIGNED_URL_PARAMETERS
                or (lowered_name in _QUERY_KEYS and m.start() > 0 and value[m.start()] in "?&")
            )
            if credential and _literal(m.group("secret")):
                yield from add(
                    m.start("secret"), len(m.group("secret")), f"`{name}=` holds a literal secret"
                )
    if "password" in lowered or "identified" in lowered:
        yield from literal(_SQL_PASSWORD, "an SQL statement holds a literal password")
        if "set" in lowered:
            yield from literal(_SQL_SET_PASSWORD, "an SQL statement holds a literal password")
        if "machine" in lowered:
            yield from literal(_NETRC, "a .netrc line holds a password")
    if named_key and "\n" in value:
        yield from named(_CONFIG_LINE, "`{name}` is set to a literal secret")
    if "auth" in lowered:
        yield from literal(_AUTH_TUPLE, "basic auth holds a literal password")
    if "jdbc:oracle" in lowered:
        yield from literal(_ORACLE_THIN, "a JDBC URL holds a literal password")
    if commands:
        words = [(m.end(), "curl" if m["curl"] else "mysql") for m in _COMMAND_WORD.finditer(value)]
        ends = [end for end, _ in words]
        for m in _COMMAND_OPTION.finditer(value):
            group = next(g for g in ("curl", "mysql", "sshpass") if m.group(g) is not None)
            if group != "sshpass" and not _after_command(value, m.start(), group, words, ends):
                continue
            if _literal(m.group(group)):
                yield from add(
                    m.start(group), len(m.group(group)), "a command line holds a literal password"
                )
    if pgpass:
        for m in _PGPASS.finditer(value):
            # A host has a letter or a dot: `12:30:00:00:x` is not a .pgpass line.
            if re.search(r"[A-Za-z.]", m.group("host")) and _literal(m.group("secret")):
                yield from add(
                    m.start("secret"), len(m.group("secret")), "a .pgpass line holds a password"
                )
    if schemed:
        yield from literal(
            _SCHEME_TOKEN, "a credential scheme (Bearer, Basic) is followed by a literal token"
        )
    if named_key and ("'" in value or '"' in value):
        for m in _ASSIGNMENT.finditer(value):
            bearer = _BEARER.match(m.group("secret"))
            if bearer:  # `"Authorization": "Bearer x"`: the secret is the part after the scheme
                start = m.start("secret") + bearer.start("secret")
                if is_secret_key(m.group("name")) and _literal(bearer.group("secret")):
                    yield from add(
                        start,
                        len(bearer.group("secret")),
                        "an Authorization header holds a literal secret",
                    )
                continue
            name = m.group("name")
            if (is_secret_key(name) or name.lower() in _KEY_IDS) and _literal(m.group("secret")):
                yield from add(
                    m.start("secret"),
                    len(m.group("secret")),
                    f"`{name}` is assigned a literal secret",
                )
    if named_key and "'" in value:
        for m in _SQL_OPTION.finditer(value):
            name = m.group("name")
            if (is_secret_key(name) or name.lower() in _KEY_IDS) and _literal(m.group("secret")):
                yield from add(
                    m.start("secret"), len(m.group("secret")), f"`{name}` holds a literal secret"
                )
    if named_key:
        for m in _PROSE.finditer(value):
            secret = m.group("secret").rstrip(_PROSE_TRAIL)
            if (
                any(c.isdigit() for c in secret)
                and any(c.isalpha() for c in secret)
                and "/" not in secret  # paths and URLs in prose (`endpoint /v1/token2`)
                and _literal(secret)
            ):
                yield from add(
                    m.start("secret"),
                    len(secret),
                    f"the text gives a literal {m.group('name').lower()}",
                )
    if named_key and "--" in value:
        yield from named(_OPTION, "`{name}` is set to a literal secret")
    if "authorization" in lowered:
        yield from literal(_HEADER_LINE, "an Authorization header holds a literal secret")
    if shaped:
        for what, pattern in TOKEN_SHAPES:
            if not any(literal in value for literal in SHAPE_LITERALS[what]):
                continue
            for m in pattern.finditer(value):
                yield from add(m.start(), len(m.group()), f"{what} is written into the playbook")
