"""Generated secrets test: a fresh random token placed in every class of literal secret the
detector knows, in all three dialects, each found at its position and in no compiled DAG file.

The hand-written suite (test_secrets_suite.py) pins one example per placement and checks every
output format; this one multiplies the classes the detector used to miss (credential-named keys
with prefixes, suffixes, capitals and list values; custom and cookie headers; query parameters in
URLs and http ``params``; SQL text in every SQL tool and field; URLs with quoted, slashed or
percent-encoded passwords; free text such as descriptions) by key names, tools, fields and value
styles, with a token nobody wrote down. The seed is printed on failure (``NOETLC_SECRETS_SEED``
replays it).

A second test does the same for the disguises of issue 35 (token formats and random-looking keys
under neutral keys, look-alike and `pin` keys, constant templates, auth lists, header pairs,
argv flags, URL token users, quoted DSN passwords) in every dialect at the workload, a tool's
input, a pipeline task, a loop, a sink and a nested call.

Cheap by construction: every playbook is checked in one ``check_paths`` call and compiled in one
``compile_paths`` call (with X601 ignored, so the second line of defence is what keeps each token
out of the DAG files).
"""

from __future__ import annotations

import os
import random
import re
import string
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.compile import compile_paths
from tests.test_secrets_suite import HEADERS, Placement, _case

MIN_PLACEMENTS = 300
SEED = int(os.environ.get("NOETLC_SECRETS_SEED", random.SystemRandom().randrange(1 << 30)))


def token(rng: random.Random) -> str:
    """14-22 letters and digits with at least one of each case and a digit: no env var name, no
    placeholder word, nothing a reference could be mistaken for."""
    alphabet = string.ascii_letters + string.digits
    while True:
        body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12, 20)))
        text = rng.choice("QZXJKW") + body + rng.choice("0123456789") + rng.choice("qzxjkw")
        lowered = text.lower()
        if not any(w in lowered for w in ("example", "test", "fake", "todo", "none", "null")):
            return text


# -- the classes -------------------------------------------------------------------------------
# Each template is a YAML fragment with the secret between «», `{t}` standing for the token.

KEY_NAMES = (
    "db_password",
    "API_KEY",
    "secretToken",
    "userPassword",
    "X_AUTH_TOKEN",
    "my-api-key-prod",
    "Stripe_Secret_Key",
    "gcpServiceAccountKey",
    "refreshToken",
    "clientSecretValue",
    "PG_PASS",
    "dbPwd",
    "AWS_SECRET_ACCESS_KEY",
    "SMTP_PASSWORD_2",
    "mysqlRootPassword",
    "OAUTH_CLIENT_SECRET",
    "slackBotToken",
    "encryptionKeyB64",
    "adminPasswd",
    "SERVICE_API_KEY_STAGING",
    "webhookSecret",
    "sessionCookie",
    "bearerToken",
    "ssh-private-key",
    "Db.Password",
    "kafka_sasl_password",
    "snowflakePrivateKeyPassphrase",
    "githubAccessToken",
    "prod_password_v2",
    "password_old",
    "api_key_primary",
)
PLURAL_KEYS = (
    "passwords",
    "api_keys",
    "secrets",
    "accessTokens",
    "DB_PASSWORDS",
    "clientSecrets",
    "api_key_list",
)


def _keys() -> list[tuple[str, str, str, str]]:
    out = []
    for i, key in enumerate(KEY_NAMES):
        style = i % 4
        if style == 0:
            out.append(("key", key, "", f"{key}: «{{t}}»"))
        elif style == 1:
            out.append(("key", key, "", f'{key}: "«{{t}}»"'))
        elif style == 2:
            out.append(("key", key, "", f"{key}: '«{{t}}»'"))
        else:
            out.append(("key", key, "", f"conn:\n  host: db\n  {key}: «{{t}}»"))
        out.append(("key", f"{key}_list", "", f"{key}:\n  - «{{t}}»"))
    for key in PLURAL_KEYS:
        out.append(("key", f"{key}_block", "", f"{key}:\n  - other1x\n  - «{{t}}»"))
        out.append(("key", f"{key}_flow", "", f"{key}: [«{{t}}», second2y]"))
    return out


HEADER_NAMES = (
    "X-Auth-Token",
    "X-Access-Token",
    "Private-Token",
    "X-Vault-Token",
    "X-Custom-Secret",
    "X-Client-Secret",
    "Api-Key",
    "X-API-TOKEN",
    "x-session-token",
    "X-Amz-Security-Token",
    "X-Shopify-Access-Token",
    "X-Webhook-Secret",
    "X-Partner-Api-Key",
    "Authentication-Token",
    "X-Auth",
)
COOKIE_HEADERS = ("Cookie", "cookie", "Set-Cookie", "X-Session-Cookie")


def _headers() -> list[tuple[str, str, str, str]]:
    out = []
    url = "url: https://api.x.org/v1\n"
    for name in HEADER_NAMES:
        out.append(("header", name, "http", f"{url}headers:\n  {name}: «{{t}}»"))
    for name in COOKIE_HEADERS:
        out.append(("cookie", name, "http", f'{url}headers:\n  {name}: "«sid={{t}}»"'))
    out += [
        ("cookie", "flow", "http", f'{url}headers: {{Cookie: "«session={{t}}»"}}'),
        ("header", "flow", "http", f"{url}headers: {{X-Auth-Token: «{{t}}»}}"),
        ("header", "bearer_custom", "http", f"{url}headers:\n  X-Upstream-Auth: Bearer «{{t}}»"),
        ("header", "token_scheme", "http", f'{url}headers:\n  Authorization: "Token «{{t}}»"'),
    ]
    # the same headers set by python code
    for name in (*HEADER_NAMES, *COOKIE_HEADERS):
        value = "«sid={t}»" if "ookie" in name else "«{t}»"
        line = f'r = httpx.get("https://api.x.org", headers={{"{name}": "{value}"}})'
        out.append(
            ("cookie" if "ookie" in name else "header", f"python_{name}", "python", _code(line))
        )
    return out


def _code(line: str) -> str:
    return f"code: |\n  import httpx\n  {line}\n  result = {{}}"


QUERY_NAMES = (
    "token",
    "access_token",
    "api_key",
    "apiKey",
    "client_secret",
    "password",
    "auth_token",
    "secret",
    "sessionToken",
    "key",
    "X-Api-Key",
    "pwd",
)
PARAM_NAMES = ("access_token", "apiKey", "client_secret", "token", "X-Api-Key", "api-key")


def _queries() -> list[tuple[str, str, str, str]]:
    out = []
    for i, name in enumerate(QUERY_NAMES):
        first = i % 2 == 0
        query = f"?{name}=«{{t}}»&page=2" if first else f"?page=2&{name}=«{{t}}»"
        out.append(("query", name, "http", f"url: https://api.x.org/v1/items{query}"))
        out.append(("query", f"{name}_workload", "", f'endpoint: "https://api.x.org/data{query}"'))
    out.append(("query", "templated_base", "http", 'url: "{{ workload.base }}/x?token=«{t}»"'))
    for name in PARAM_NAMES:
        out.append(("params", name, "http", f"url: https://api.x.org\nparams:\n  {name}: «{{t}}»"))
    out.append(("params", "flow", "http", "url: https://api.x.org\nparams: {q: x, token: «{t}»}"))
    # names that are a credential only as a query parameter or header, and cookie jars
    out.append(("params", "key", "http", "url: https://maps.x.org\nparams:\n  key: «{t}»"))
    out.append(("header", "auth", "http", "url: https://api.x.org\nheaders:\n  auth: «{t}»"))
    out.append(("cookie", "jar", "http", "url: https://api.x.org\ncookies:\n  sid: «{t}»"))
    for name in PARAM_NAMES:
        line = f'r = httpx.get("https://api.x.org", params={{"q": 1, "{name}": "«{{t}}»"}})'
        out.append(("params", f"python_{name}", "python", _code(line)))
    for name in QUERY_NAMES:
        line = f'r = httpx.get("https://api.x.org/v1?{name}=«{{t}}»&page=2")'
        out.append(("query", f"python_{name}", "python", _code(line)))
    return out


SQL_STATEMENTS = (
    "CREATE ROLE app LOGIN PASSWORD '«{t}»';",
    "ALTER USER app WITH ENCRYPTED PASSWORD '«{t}»';",
    'CREATE USER app IDENTIFIED BY "«{t}»";',
    "ALTER USER app IDENTIFIED BY «{t}»;",
    "CREATE USER 'app'@'%' IDENTIFIED WITH mysql_native_password BY '«{t}»';",
    "CREATE SECRET s3 (TYPE s3, KEY_ID '«{t}»', SECRET 'Zk2-other');",
    "CREATE SECRET s3 (TYPE s3, KEY_ID 'AKIDx', SECRET '«{t}»', REGION 'eu');",
    "CREATE OR REPLACE PERSISTENT SECRET g (TYPE gcs, KEY_ID 'k', SECRET '«{t}»');",
    "CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's', SESSION_TOKEN '«{t}»');",
    "CREATE SECRET hf (TYPE huggingface, TOKEN '«{t}»');",
    "CREATE SECRET az (TYPE azure, PROVIDER service_principal, CLIENT_SECRET '«{t}»');",
    "SET s3_secret_access_key = '«{t}»';",
    "SET s3_access_key_id='«{t}»';",
    "CREATE STAGE st URL='s3://b/p' CREDENTIALS=(AWS_KEY_ID='«{t}»' AWS_SECRET_KEY='x');",
    "CREATE STAGE st URL='s3://b/p' CREDENTIALS = (AWS_KEY_ID = 'k' AWS_SECRET_KEY = '«{t}»');",
    "CREATE STAGE az URL='azure://a/c' CREDENTIALS=(AZURE_SAS_TOKEN='«{t}»');",
    "ALTER USER svc SET PASSWORD = '«{t}»';",
    "CREATE LOGIN etl WITH PASSWORD = '«{t}»';",
    "CREATE USER MAPPING FOR app SERVER s OPTIONS (user 'u', password '«{t}»');",
    "SELECT dblink_connect('host=db user=u password=«{t}» dbname=x');",
    "ATTACH 'postgresql://etl:«{t}»@db:5432/app' AS pg (TYPE postgres);",
    "INSTALL httpfs; LOAD httpfs; SET s3_session_token = '«{t}»';",
    "ATTACH 'md:analytics?motherduck_token=«{t}»';",
    "SET motherduck_token = '«{t}»';",
    "COPY t FROM 's3://b/k' CREDENTIALS 'aws_access_key_id=k;aws_secret_access_key=«{t}»';",
)
SQL_TOOLS = (
    ("postgres", "auth: pg_local\n", ("command", "query", "sql", "script")),
    ("duckdb", "", ("commands", "query", "statement", "cmd")),
    ("snowflake", "auth: sf\n", ("command", "query", "sql")),
)


def _sql() -> list[tuple[str, str, str, str]]:
    out = []
    n = 0
    for kind, auth, fields in SQL_TOOLS:
        for statement in SQL_STATEMENTS:
            field = fields[n % len(fields)]
            n += 1
            if n % 3 == 0:
                body = f"{field}: |\n  SELECT 1;\n  {statement}"
            elif n % 3 == 1:
                body = f'{field}: "{statement.replace(chr(34), chr(92) + chr(34))}"'
            else:
                body = f"{field}:\n  - SELECT 1\n  - >-\n    {statement}"
                if field in ("command", "query", "sql", "statement", "cmd", "script"):
                    body = f"{field}: |-\n  {statement}"
            out.append(("sql", f"{kind}_{n}", kind, auth + body))
    # a transfer's source query and a DuckLake step
    for statement in SQL_STATEMENTS:
        n += 1
        source = f"source:\n  tool: postgres\n  auth: pg_local\n  query: |\n    {statement}\n"
        target = "target: {tool: postgres, auth: pg_local, table: t, mode: append}"
        out.append(("sql", f"transfer_{n}", "transfer", source + target))
        out.append(("sql", f"ducklake_{n}", "ducklake", f"command: |\n  {statement}"))
    return out


URLS = (
    "postgresql://etl:«{t}/x9»@db:5432/app",
    "postgresql://etl:«a/{t}»@db/app",
    "mysql+pymysql://root:«{t}%2F%40k»@db/x",
    "mongodb://u%40corp:«{t}%21»@m1.x.org:27017/db",
    "redis://default:«{t}»@cache:6379/0",
    "https://bot:«{t}»@git.x.org/repo.git",
    "postgresql://etl:'«{t}»'@db/app",
    'amqp://guest:"«{t}»"@rabbit/vh',
    "postgres://«{t}»@db/app?sslmode=require",
    "sftp://loader:«{t}/=+»@files.x.org:22/in",
    "snowflake://u:«{t}»@acct/db/schema?warehouse=wh",
    "clickhouse://default:«{t}»@ch:8123/default",
)


def _urls() -> list[tuple[str, str, str, str]]:
    out = []
    for i, url in enumerate(URLS):
        if url.startswith("postgres://«"):
            continue  # a user name alone (no password) is no secret: left out on purpose
        q = '"' if "'" in url else "'"
        out.append(("url", f"workload_{i}", "", f"dsn: {q}{url}{q}"))
        out.append(
            (
                "url",
                f"plain_{i}",
                "",
                f"conn_{i}: {url}" if '"' not in url else f"conn_{i}: '{url}'",
            )
        )
        code = f"engine = create_engine({q}{url}{q})"
        out.append(
            ("url", f"python_{i}", "python", f"code: |\n  import os\n  {code}\n  result = {{}}")
        )
    return out


PROSE = (
    "Loads orders. The admin password is «{t}» until rotated.",
    "Uses API key «{t}» for the partner feed",
    "Connect with token: «{t}» (expires yearly)",
    "client secret «{t}», scope read",
    "Reads the vendor API (apikey: «{t}»).",
    "DB creds: admin / «{t}»",
    "login with user etl and password «{t}».",
    "secret was «{t}» before the migration",
    "the passphrase is «{t}»",
    "access token «{t}» is shared with ops",
    "The secret key is «{t}» (prod)",
    "log in with the password '«{t}»' first",
    "pw: «{t}»",
)


def _prose() -> list[tuple[str, str, str, str]]:
    out = []
    for i, text in enumerate(PROSE):
        out.append(("prose", f"description_{i}", "", f'description: "{text}"'))
        out.append(("prose", f"note_{i}", "", f"notes: |\n  First line.\n  {text}"))
    return out


def placements(rng: random.Random) -> list[tuple[str, Placement, str]]:
    """(class, placement, token): each template with its own fresh token."""
    out = []
    for cls, name, kind, template in [
        *_keys(),
        *_headers(),
        *_queries(),
        *_sql(),
        *_urls(),
        *_prose(),
    ]:
        tok = token(rng)
        fragment = template.replace("{t}", tok)
        where = "tool" if kind else "workload"
        out.append((cls, Placement(f"{cls}-{name}", where, kind, fragment), tok))
    return out


def _secret_of(text: str) -> str:
    return re.search("«(.+?)»", text, re.DOTALL).group(1)


def test_every_generated_placement_is_found_where_it_starts_and_never_compiled(tmp_path: Path):
    rng = random.Random(SEED)
    generated = placements(rng)
    names = [p.name for _, p, _ in generated]
    assert len(set(names)) == len(names)
    classes = Counter(cls for cls, _, _ in generated)
    assert len(generated) >= MIN_PLACEMENTS, (len(generated), classes)
    assert set(classes) == {"key", "header", "cookie", "query", "params", "sql", "url", "prose"}

    cases: dict[str, tuple[str, tuple[int, int], str]] = {}
    for index, (_, placement, tok) in enumerate(generated):
        for dialect in HEADERS:
            text, secret, where = _case(dialect, placement)
            assert tok in secret
            # one catalog path per playbook (R208 would refuse them all); the header lines
            # come before the secret, so its position does not move
            text = re.sub(r"path: secrets/(\w+)", rf"path: secrets/\1/{index}", text, count=1)
            path = tmp_path / "in" / f"{index:03d}_{dialect}.yaml"
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            cases[str(path)] = (f"{dialect}:{placement.name}", where, tok)

    # One compile of everything: its report carries check's findings, and nothing compiles.
    paths = sorted(cases)
    out = tmp_path / "dags"
    report = compile_paths(paths, str(out), check_only=False)
    found: dict[str, set[tuple[int, int]]] = {path: set() for path in paths}
    for d in report.diagnostics:
        if d.code == "X601":
            found[d.path].add((d.position.line, d.position.col))
    missed = [
        f"{cases[path][0]}: X601 expected at {cases[path][1]}, got {sorted(found[path])}"
        for path in paths
        if cases[path][1] not in found[path]
    ]
    assert not missed, f"seed {SEED}: {len(missed)} of {len(cases)} missed:\n" + "\n".join(missed)
    assert sorted(report.failed) == paths

    # With X601 ignored, the second line keeps every token out: a credential-named workload key
    # loses its literal (X602) and its DAG file is written without it; a placement that would
    # put the token in the DAG text has that file refused. Every placement once, the
    # dialects in turn (a third of the lowering time).
    some = [path for i, path in enumerate(paths) if i % 3 == (i // 3) % 3]
    assert {cases[path][0].split(":")[0] for path in some} == set(HEADERS)
    report = compile_paths(some, str(out), check_only=False, ignore=["X601"])
    refused = {d.path for d in report.diagnostics if d.message.startswith("not compiled")}
    withheld = {d.path for d in report.diagnostics if d.code == "X602"}
    compiled = set(some) - set(report.failed)
    assert refused | compiled == set(some) and not refused & compiled
    # (a field the dialect's reader does not carry, v1's http `cookies`, compiles without it)
    assert len(compiled & withheld) >= 40  # the credential-named keys of the third
    assert len(list(out.rglob("*.py"))) == len(compiled)
    tokens = {tok for _, _, tok in cases.values()}
    written = list(out.rglob("*.py")) if out.exists() else []
    leaked = [(p.name, t) for p in written for t in tokens if t in p.read_text(encoding="utf-8")]
    assert not leaked, f"seed {SEED}: DAG files hold tokens: {leaked[:10]}"


@pytest.mark.parametrize("seed", [0, 1])
def test_tokens_never_look_like_references(seed):
    from noetl_compile.check.secrets import is_reference

    rng = random.Random(seed)
    assert not any(is_reference(token(rng)) for _ in range(2000))


# -- disguises (issue 35) ----------------------------------------------------------------------
# Each class of disguise in every dialect and position: the workload, a tool's input, a pipeline
# task, a loop's tool, a sink (v1's `save`), a nested playbook call's input; tool fields in a
# step's tool, a pipeline task and a loop. Fragments are mappings (`kv`) or tool fields (`tool`).

B64 = string.ascii_letters + string.digits + "+/"
HEX = "0123456789abcdef"
ALNUM = string.ascii_letters + string.digits


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _aws_secret(rng: random.Random) -> str:
    """40 base64 characters, as AWS draws them. A draw the entropy rule reads as text (a run of
    letters or too few distinct ones: about one in 300) is drawn again, so the test pins the
    rule's threshold rather than the luck of the seed."""
    from noetl_compile.check.tokens import random_token

    while True:
        text = _draw(rng, B64, 40)
        if random_token(text) and not any(w in text.lower() for w in ("example", "test")):
            return text


SHAPES = (
    lambda r: "AIza" + _draw(r, ALNUM + "_-", 35),
    _aws_secret,
    lambda r: "ghp_" + _draw(r, ALNUM, 36),
    lambda r: f"xoxb-{_draw(r, string.digits, 11)}-{_draw(r, ALNUM, 24)}",
    lambda r: "shpat_" + _draw(r, HEX, 32),
    lambda r: "dapi" + _draw(r, HEX, 32),
    lambda r: "hvs." + _draw(r, ALNUM, 28),
    lambda r: _draw(r, HEX, 32) + "-us12",
    lambda r: f"{_draw(r, '123456789', 10)}:AA{_draw(r, ALNUM + '_-', 33)}",
    lambda r: "lin_api_" + _draw(r, ALNUM, 40),
    lambda r: _draw(r, ALNUM, 3) + "8Q~" + _draw(r, ALNUM + "_~.-", 34),
    lambda r: "sk_live_" + _draw(r, ALNUM, 24),
)
NEUTRAL_KEYS = ("gkey", "value", "vendor", "conn_id", "cfg", "x", "mc", "bot", "lin", "az", "k")
DISGUISES = {
    # a known format or a random-looking key under a neutral key, alone or in a list
    "shape": [f"{NEUTRAL_KEYS[i % len(NEUTRAL_KEYS)]}: «{{s{i}}}»" for i in range(len(SHAPES))]
    + ["keys:\n  - first\n  - «{s2}»", "values: [plain, «{s1}»]"],
    # keys spelled with look-alike letters (Cyrillic а, Greek ο, Cyrillic ѕ, fullwidth) and `pin`
    "lookalike": [
        "p\u0430ssword: «{t}»",
        "t\u03bfken: «{t}»",
        "\u0455ecret: «{t}»",
        "\uff41\uff50\uff49_\uff4b\uff45\uff59: «{t}»",
        "db_p\u0430ss: '«{t}»'",
    ],
    "pin": ["pin: «{t}»", "card_pin: '«{t}»'", "PIN_CODE: «{t}»"],
    # a literal beside templates that render constants
    "constant_template": [
        "password: \"«{t}»{{{{ '' }}}}\"",
        "api_key: \"{{{{ '' }}}}«{t}»\"",
        "token: '«{t}»{{{{ \"\" }}}}'",
        "secret: \"«{t}»{{{{- '' -}}}}\"",
    ],
    # credentials by position, not by name
    "auth_block": [
        "auth:\n  basic: [etl, «{t}»]",
        "auth: {{basic: [etl, «{t}»]}}",
        "basic_auth:\n  - etl\n  - «{t}»",
        "auth: [etl, «{t}»]",
    ],
    "header_pairs": [
        "headers:\n  - [X-Api-Key, «{t}»]",
        'headers:\n  - {{name: Authorization, value: "Bearer «{t}»"}}',
        'headers: [[Cookie, "«sid={t}»"]]',
        "params:\n  - [access_token, «{t}»]",
        "headers:\n  - key: X-Auth-Token\n    value: «{t}»",
        'headers: ["X-Api-Key: «{t}»", "Accept: text/csv"]',
        "headers:\n  - 'Authorization: Bearer «{t}»'",
    ],
    "argv": [
        "argv: [psql, --password, «{t}»]",
        "command:\n  - mysql\n  - --password\n  - «{t}»",
        "flags: [-token, «{t}»]",
        "cmd: [vault, login, --api-key, «{t}»]",
    ],
    "url_user": [
        "repo: https://«{t}»@git.x.org/team/repo.git",
        'endpoint: "https://«{t}»@api.x.org/v1"',
        "remote: 'git+https://«{t}»@gitlab.x.org/a.git'",
    ],
    "dsn_quote": [
        'dsn: "postgresql://etl:«{t}\'q»@db/app"',
        "db_url: 'mysql://root:«{t}\"q»@db/x'",
        "dsn: \"postgresql://etl:'«{t} @x»'@db/app\"",
        "conn: \"host=db user=etl password='«{t}'s»' dbname=x\"",
    ],
}
# Tool fields: the same disguises where a tool reads them.
TOOL_DISGUISES = {
    "header_pairs": [
        "kind: http\nurl: https://api.x.org/v1\nheaders:\n  - [X-Api-Key, «{t}»]",
        'kind: http\nurl: https://api.x.org/v1\nheaders:\n  - {{name: Authorization, value: "Bearer «{t}»"}}',
    ],
    "auth_block": ["kind: http\nurl: https://api.x.org/v1\nauth:\n  basic: [etl, «{t}»]"],
    "url_user": ["kind: http\nurl: https://«{t}»@api.x.org/v1"],
    "shape": ["kind: http\nurl: https://api.x.org/v1\nparams:\n  q: «{s0}»"],
    "constant_template": [
        "kind: http\nurl: https://api.x.org/v1\nheaders:\n  X-Api-Key: \"«{t}»{{{{ '' }}}}\""
    ],
    "dsn_quote": [
        'kind: python\ncode: |\n  import os\n  engine = create_engine("postgresql://etl:«{t}\'q»@db/app")\n  result = {{}}'
    ],
}
KV_POSITIONS = ("workload", "input", "task", "loop", "sink", "nested")
TOOL_POSITIONS = ("tool", "task", "loop")


def _indent(text: str, spaces: int) -> str:
    return textwrap.indent(text, " " * spaces)


def _disguised(dialect: str, position: str, fragment: str, kv: bool) -> str:
    """A playbook of ``dialect`` with ``fragment`` at ``position`` (see KV_POSITIONS and
    TOOL_POSITIONS). v1 has no pipelines: its `task` is a step's own tool, as `tool`."""
    workload = "  items: [1, 2]\n"
    python = "kind: python\ncode: |\n  result = {}\n"
    body = ""  # the step's lines after `- step: start`
    if position == "workload":
        workload += _indent(fragment, 2) + "\n"
    kv = kv and position != "workload"
    if dialect == "v1":
        if position == "workload":
            tool = python
        elif kv and position != "sink":
            kind = "playbook\npath: secrets/child" if position == "nested" else "python"
            tool = f"kind: {kind}\n" + ("" if position == "nested" else "code: |\n  result = {}\n")
            tool += "args:\n" + _indent(fragment, 2) + "\n"
        elif position == "sink":
            tool = python
        else:
            tool = fragment + "\n"
        tool = re.sub(r"^kind:", "type:", tool, flags=re.MULTILINE)
        body = _indent(tool, 4)
        if position == "loop":
            body = '    loop:\n      in: "{{ workload.items }}"\n      iterator: item\n' + body
        if position == "sink":
            save = "storage:\n  type: postgres\n  table: t\n  auth: pg_local\n  args:\n"
            body += "    save:\n" + _indent(save + _indent(fragment, 4), 6) + "\n"
        route, end = "    next:\n      - step: end\n", "  - step: end\n"
    else:
        if position == "workload":
            tool = "tool: {kind: noop}\n"
        elif position in ("input", "loop") and kv:
            tool = "tool:\n" + _indent(python + "input:\n" + _indent(fragment, 2), 2) + "\n"
        elif position == "nested":
            call = "kind: playbook\npath: secrets/child\ninput:\n" + _indent(fragment, 2)
            tool = "tool:\n" + _indent(call, 2) + "\n"
        elif position == "task":
            task = fragment if not kv else python + "input:\n" + _indent(fragment, 2)
            first = "- name: first\n" + _indent(python, 2)
            tool = "tool:\n" + _indent(first, 2) + _indent("- name: t\n" + _indent(task, 2), 2)
            tool += "\n"
        elif position == "sink" and dialect == "case_v2":
            sink = "tool: {kind: postgres, auth: pg_local, table: t}\ndata:\n" + _indent(
                fragment, 2
            )
            tool = "tool:\n" + _indent(python, 2) + "sink:\n" + _indent(sink, 2) + "\n"
        elif position == "sink":  # canonical has no sink: a pipeline task writes the rows
            save = "- name: save\n  kind: postgres\n  auth: pg_local\n  command: INSERT INTO t SELECT 1\n  args:\n"
            tool = "tool:\n" + _indent("- name: first\n" + _indent(python, 2), 2)
            tool += _indent(save + _indent(fragment, 4), 2) + "\n"
        else:
            tool = "tool:\n" + _indent(fragment, 2) + "\n"
        body = _indent(tool, 4)
        if position == "loop":
            body = '    loop:\n      in: "{{ workload.items }}"\n      iterator: item\n' + body
        if dialect == "canonical":
            route = "    next:\n      arcs:\n        - step: end\n"
        else:
            route = "    next:\n      - step: end\n"
        end = "  - step: end\n    tool: {kind: noop}\n"
    return (
        HEADERS[dialect]
        + "workload:\n"
        + workload
        + "workflow:\n  - step: start\n"
        + body
        + route
        + end
    )


def disguises(rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """(class, name, dialect, position, marked playbook text) for every fragment in every
    dialect, the positions taken in turn so that each class meets most of them."""
    out = []
    n = 0
    for table, positions in ((DISGUISES, KV_POSITIONS), (TOOL_DISGUISES, TOOL_POSITIONS)):
        kv = table is DISGUISES
        for cls, fragments in table.items():
            for i, template in enumerate(fragments):
                for d, dialect in enumerate(HEADERS):
                    values = {"t": token(rng)} | {f"s{j}": f(rng) for j, f in enumerate(SHAPES)}
                    fragment = template.format(**values)
                    position = positions[(n + d) % len(positions)]
                    text = _disguised(dialect, position, fragment, kv)
                    out.append((cls, f"{cls}-{i}", dialect, position, text))
                n += 1
    return out


def test_every_disguise_is_found_in_every_position_and_never_compiled(tmp_path: Path):
    rng = random.Random(SEED)
    generated = disguises(rng)
    seen = {(cls, position) for cls, _, _, position, _ in generated}
    for cls in DISGUISES:
        assert len({p for c, p in seen if c == cls}) >= 3, cls
    assert {(d, p) for _, _, d, p, _ in generated} >= {
        (d, p) for d in HEADERS for p in KV_POSITIONS + TOOL_POSITIONS
    }
    cases: dict[str, tuple[str, tuple[int, int], str]] = {}
    for index, (cls, name, dialect, position, marked) in enumerate(generated):
        match = re.search("«(.+?)»", marked, re.DOTALL)
        secret = match.group(1)
        text = marked[: match.start()] + secret + marked[match.end() :]
        line = marked.count("\n", 0, match.start()) + 1
        col = match.start() - (marked.rfind("\n", 0, match.start()) + 1) + 1
        text = re.sub(r"path: secrets/(\w+)", rf"path: secrets/\1/{index}", text, count=1)
        path = tmp_path / "in" / f"{index:03d}_{dialect}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        cases[str(path)] = (f"{dialect}:{position}:{name}", (line, col), secret)

    paths = sorted(cases)
    out = tmp_path / "dags"
    report = compile_paths(paths, str(out), check_only=False)
    found: dict[str, set[tuple[int, int]]] = {path: set() for path in paths}
    for d in report.diagnostics:
        if d.code == "X601":
            found[d.path].add((d.position.line, d.position.col))
    missed = [
        f"{cases[path][0]}: X601 expected at {cases[path][1]}, got {sorted(found[path])}"
        for path in paths
        if cases[path][1] not in found[path]
    ]
    assert not missed, f"seed {SEED}: {len(missed)} of {len(cases)} missed:\n" + "\n".join(missed)
    assert sorted(report.failed) == paths

    # With X601 ignored, no DAG file holds a secret: the literal is left out (X602) or the file
    # is refused. The secret's longest run without quotes is what a DAG file would hold.
    report = compile_paths(paths, str(out), check_only=False, ignore=["X601"])
    refused = {d.path for d in report.diagnostics if d.message.startswith("not compiled")}
    compiled = set(paths) - set(report.failed)
    assert refused | compiled == set(paths) and not refused & compiled  # no other error
    written = list(out.rglob("*.py")) if out.exists() else []
    assert len(written) == len(compiled) > 0  # credential-named keys: their literal left out
    secrets_ = {max(re.split("['\" ]", s), key=len) for _, _, s in cases.values()}
    leaked = [(p.name, s) for p in written for s in secrets_ if s in p.read_text(encoding="utf-8")]
    assert not leaked, f"seed {SEED}: DAG files hold secrets: {leaked[:10]}"
