"""Generated secrets test: a fresh random token placed in every class of literal secret the
detector knows, in all three dialects, each found at its position and in no compiled DAG file.

The hand-written suite (test_secrets_suite.py) pins one example per placement and checks every
output format; this one multiplies the classes the detector used to miss (credential-named keys
with prefixes, suffixes, capitals and list values; custom and cookie headers; query parameters in
URLs and http ``params``; SQL text in every SQL tool and field; URLs with quoted, slashed or
percent-encoded passwords; free text such as descriptions) by key names, tools, fields and value
styles, with a token nobody wrote down. The seed is printed on failure (``NOETLC_SECRETS_SEED``
replays it).

test_secrets_disguises.py does the same for the disguises of issue 35.

Cheap by construction: every playbook is checked in one ``check_paths`` call and compiled in one
``compile_paths`` call (with X601 ignored, so the second line of defence is what keeps each token
out of the DAG files).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.compile import compile_paths
from tests.secret_tokens import SEED, token
from tests.test_secrets_suite import HEADERS, Placement, _case

MIN_PLACEMENTS = 300


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
