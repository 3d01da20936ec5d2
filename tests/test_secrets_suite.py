"""Secrets suite: literal secrets in every placement the security rule knows, in all three dialects.

Each placement is a fragment of YAML with the secret written as ``«secret»``. It goes into a
playbook of each dialect (the workload, or the tool of a step), and the test asserts that
``noetlc check`` reports X601 exactly where the secret starts, that no output format prints the
secret (the ``full`` form's quoted source line included), and that ``compile`` writes no DAG file
holding it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from noetl_compile.check import check_paths
from noetl_compile.compile import compile_paths
from noetl_compile.report import FORMATTERS

MIN_PLACEMENTS = 80
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq" + "AB" * 13 + "=="


@dataclass(frozen=True)
class Placement:
    name: str
    where: str  # "workload": lines under `workload:`; "tool": fields of a step's tool
    kind: str  # the tool kind for "tool" placements
    fragment: str


def _w(name: str, fragment: str) -> Placement:
    return Placement(name, "workload", "", fragment)


def _t(name: str, kind: str, fragment: str) -> Placement:
    return Placement(name, "tool", kind, fragment)


def _code(name: str, line: str) -> Placement:
    return _t(name, "python", f"code: |\n  import os\n  {line}\n  result = {{}}")


def _sql(name: str, statement: str) -> Placement:
    return _t(name, "postgres", f"auth: pg_local\ncommand: |\n  {statement}")


def _shell(name: str, line: str) -> Placement:
    return _code(name, f"os.system({line!r})" if "'" not in line else f'os.system("{line}")')


PLACEMENTS = [
    # -- keys naming a credential, in any case, with prefixes and suffixes ---------------------
    *[
        _w(f"key_{key}", f"{key}: «S3cr3t-Value-{i}x»")
        for i, key in enumerate(
            [
                "password",
                "passwd",
                "pass",
                "pw",
                "pwd",
                "passphrase",
                "secret",
                "token",
                "api_key",
                "apiKey",
                "api-key",
                "ApiKey",
                "credentials",
                "private_key",
                "privateKey",
                "PASSWORD",
                "DB_PASSWORD",
                "dbPassword",
                "db-pass",
                "password_prod",
                "token2",
                "Password_Value",
                "my_secret",
                "clientSecret",
                "access_token",
                "refresh_token",
                "aws_secret_access_key",
                "PGPASSWORD",
                "MYSQL_PWD",
                "signing_key",
                "private_key_pem",
                "ssh_key",
                "jwt",
                "APP_KEY",
            ]
        )
    ],
    _w("key_with_space", '"API Key": «S3cr3t-Value-sp»'),
    _w("double_quoted", 'password: "«hunter2-dq»"'),
    _w("single_quoted", "password: '«hunter2-sq»'"),
    _w("block_scalar", "password: |\n    «hunter2-block»"),
    _w("number", "password: «12345678»"),
    _w("nested", "db:\n    primary:\n      - host: db1\n        password: «nested-pw-1»"),
    _w("through_alias", "base: &pw «aliased-pw-1»\npassword: *pw"),
    _w("merge_key", "defaults: &d {password: «merged-pw-1»}\nconn:\n  <<: *d\n  host: h"),
    _w("flow_mapping", "conn: {user: u, password: «flow-pw-1»}"),
    _w("param_default", "api_token:\n  type: string\n  default: «param-default-tok-1»"),
    _w("under_value", "password:\n  value: «nested-value-pw-1»"),
    # -- templates that hide a literal ---------------------------------------------------------
    _w("template_default", "password: \"{{ env.PG_PASSWORD | default('«hunter2-def»') }}\""),
    _w("template_d", "token: \"{{ env.TOKEN | d('«tok-default-1»') }}\""),
    _w("template_literal", "password: \"{{ '«hunter2-lit»' }}\""),
    _w("template_or", "api_key: \"{{ env.KEY or '«Or-Value-91»' }}\""),
    # -- headers -------------------------------------------------------------------------------
    _t(
        "authorization_bearer",
        "http",
        "url: https://x.org\nheaders:\n  Authorization: Bearer «abc123def456»",
    ),
    _t(
        "authorization_basic",
        "http",
        'url: https://x.org\nheaders:\n  Authorization: "Basic «dXNlcjpwYXNz»"',
    ),
    _t(
        "proxy_authorization",
        "http",
        "url: https://x.org\nheaders:\n  Proxy-Authorization: Bearer «prx123abc»",
    ),
    _t("cookie", "http", "url: https://x.org\nheaders:\n  Cookie: «session=abcdef123»"),
    _t("x_api_key", "http", "url: https://x.org\nheaders:\n  X-Api-Key: «k3y-v4lue-9»"),
    _t("x_functions_key", "http", "url: https://x.org\nheaders:\n  X-Functions-Key: «fnk-123456»"),
    _t(
        "subscription_key",
        "http",
        "url: https://x.org\nheaders:\n  Ocp-Apim-Subscription-Key: «sub-Val-123»",
    ),
    _t("params_api_key", "http", "url: https://x.org\nparams:\n  api_key: «param-Val-123»"),
    _t(
        "bearer_under_any_header",
        "http",
        "url: https://x.org\nheaders:\n  X-Upstream: Bearer «ups7ream-Tok3n-0123»",
    ),
    _w("bearer_in_a_note", 'note: "pass Basic «dXNlcjpwYXNzd29yZDEyMw==» upstream"'),
    # -- URLs and DSNs -------------------------------------------------------------------------
    _w("url_postgres", 'dsn: "postgresql://noetl:«pa55w0rd»@db:5432/noetl"'),
    _w("url_mysql_driver", "dsn: mysql+pymysql://app:«Db-pw-123»@db/x"),
    _w("url_redis_no_user", "cache: redis://:«redis-pw-1»@cache:6379/0"),
    _w("url_amqp", "broker: amqp://guest:«rabbit-pw»@rabbit//"),
    _w("url_percent_encoded", "mongo: mongodb+srv://u:«p%40ss%21w0rd»@cluster0.example.net"),
    _w("url_https", "endpoint: https://user:«web-pass-1»@example.org/api"),
    _w("url_ftp", "drop: ftp://loader:«ftp-pass-1»@files.example.org/in"),
    _w("jdbc_query", 'jdbc: "jdbc:postgresql://db/x?user=u&password=«jdbc-pw-1»"'),
    _w("jdbc_sqlserver", 'jdbc: "jdbc:sqlserver://db:1433;user=u;password=«mssql-pw-1»;"'),
    _w("odbc", 'odbc: "Driver={ODBC Driver 18};Server=db;Uid=u;Pwd=«odbc-pw-1»;"'),
    _w(
        "azure_storage",
        f'storage: "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=«{AZURE_KEY}»;"',
    ),
    _w("jdbc_oracle_thin", 'dsn: "jdbc:oracle:thin:scott/«ora-thin-pw1»@db:1521/orcl"'),
    _w("config_file_line", 'config: "db:\\n  host: h\\n  password: «cfg-pw-123»\\n"'),
    _w("plural_key_list", "passwords:\n    - «list-pw-1»\n    - other"),
    _w("libpq_keywords", 'conninfo: "host=db user=u password=«libpq-pw-1» dbname=x"'),
    # -- query strings -------------------------------------------------------------------------
    _w("query_api_key", "url: https://api.example.org/v1/data?api_key=«qs-Val-123»&q=x"),
    _w("query_access_token", "url: https://api.example.org/v1?x=1&access_token=«qs-Tok-12»"),
    _w("query_apikey", "url: https://api.example.org/v1?apikey=«qs-Val-456»"),
    _w(
        "query_sas_signature", "url: https://a.blob.core.windows.net/c/b?sv=2022&sig=«sAs-Sig-0123»"
    ),
    _w(
        "query_s3_presigned",
        "url: https://b.s3.amazonaws.com/k?X-Amz-Date=1&X-Amz-Signature=«a1b2c3d4e5f6»",
    ),
    # -- SQL -----------------------------------------------------------------------------------
    _sql("sql_create_user", "CREATE USER app WITH PASSWORD '«sql-pw-123»';"),
    _sql("sql_alter_role", "ALTER ROLE app PASSWORD = '«sql-pw-456»';"),
    _sql("sql_identified_by", "CREATE USER app IDENTIFIED BY '«ora-pw-123»';"),
    _sql("sql_identified_by_bare", "ALTER USER app IDENTIFIED BY «ora-pw-456»;"),
    _sql("sql_set_password", "SET PASSWORD FOR 'app'@'%' = '«set-pw-123»';"),
    _sql("sql_set_password_function", "SET PASSWORD = PASSWORD('«set-pw-456»');"),
    _sql("sql_attach", "ATTACH 'dbname=x user=u password=«attach-pw-1»' AS db (TYPE postgres);"),
    _t(
        "duckdb_secret",
        "duckdb",
        "commands: |\n  CREATE SECRET s (TYPE postgres, USER 'u', PASSWORD '«duck-pw-12»');",
    ),
    # -- shell lines ---------------------------------------------------------------------------
    _shell("shell_export", "export PGPASSWORD=«shell-pw-1» && psql"),
    _shell("shell_inline_env", "PGPASSWORD='«shell-pw-2»' psql -h db"),
    _shell("shell_option_eq", "mysql --password=«shell-pw-3» -u root"),
    _shell("shell_option_space", "docker login --password «shell-pw-4» registry"),
    _shell("shell_curl_header", 'curl -H "Authorization: Bearer «curl-tok-123»" https://x.org'),
    _shell("shell_curl_user", "curl -u admin:«curl-pw-123» https://x.org"),
    _shell("shell_mysql_glued", "mysql -u root -p«mysql-pw-1» app"),
    _shell("shell_sshpass", "sshpass -p «ssh-pw-123» ssh host"),
    _w("netrc_line", 'netrc: "machine api.x.org login bob password «netrc-pw-1»"'),
    _w("pgpass_line", 'pgpass: "db.x.org:5432:app:bob:«pgpass-pw-1»"'),
    # -- python code ---------------------------------------------------------------------------
    _code("python_assignment", 'password = "«py-pw-123»"'),
    _code("python_constant", "API_KEY = '«py-Val-456»'"),
    _code("python_kwarg", 'conn = connect(host="db", password="«py-pw-789»")'),
    _code("python_dict", 'creds = {"user": "u", "secret": "«py-Sec-1»"}'),
    _code("python_auth_tuple", 'r = httpx.get("https://x.org", auth=("bob", "«tuple-pw-1»"))'),
    _code("python_environ", 'os.environ["PGPASSWORD"] = "«py-env-pw-1»"'),
    _code("python_header", 'headers = {"Authorization": "Bearer «py-bearer-12»"}'),
    # -- well-known token shapes, under innocent keys -------------------------------------------
    _w("aws_key_id", "note: «AKIAABCDEFGHIJKLMNOP»"),
    _w("github_token", "note: «ghp_0123456789abcdefghijABCDEFGHIJ012345»"),
    _w("github_pat", "note: «github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz»"),
    _w("gitlab_token", "note: «glpat-abcdefghij0123456789»"),
    _w("slack_token", "note: «xoxb-1234567890-abcdefghij»"),
    _w("jwt", f"note: «{JWT}»"),
    _w("google_api_key", "note: «AIzaSyA1234567890abcdefghijklmnopqrstuv»"),
    _w("stripe_key", "note: «sk_live_4eC39HqLyjWDarjtT1zdp7dc»"),
    _w("openai_key", "note: «sk-proj-abcdefghij0123456789ABCDEFGH»"),
    _w(
        "sendgrid_key",
        "note: «SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG»",
    ),
    _w("npm_token", "note: «npm_abcdefghijklmnopqrstuvwxyz0123456789»"),
    _w("huggingface_token", "note: «hf_abcdefghijklmnopqrstuvwxyzABCDEFGH»"),
    _w(
        "pem_private_key",
        "key: |\n    «-----BEGIN PRIVATE KEY-----»\n    MIIBOgIBAAJBAK\n    -----END PRIVATE KEY-----",
    ),
    _w(
        "pem_rsa_key",
        "key: |\n    «-----BEGIN RSA PRIVATE KEY-----»\n    MIIBOgIBAAJBAK\n    -----END RSA PRIVATE KEY-----",
    ),
    _w(
        "openssh_key",
        "key: |\n    «-----BEGIN OPENSSH PRIVATE KEY-----»\n    b3BlbnNzaC1rZXktdjEAAAAA\n    -----END OPENSSH PRIVATE KEY-----",
    ),
    _w(
        "pgp_key",
        "key: |\n    «-----BEGIN PGP PRIVATE KEY BLOCK-----»\n    lQOYBF0\n    -----END PGP PRIVATE KEY BLOCK-----",
    ),
    _w(
        "slack_webhook",
        "hook: https://«hooks.slack.com/services/T0ABCDEFG/B0ABCDEFG/abcdefghij0123456789ABCD»",
    ),
    _w(
        "discord_webhook",
        "hook: https://«discord.com/api/webhooks/123456789012/abcdefghijklmnopqrstuvwxyz0123456789ABCDEF»",
    ),
    _code("token_in_code", 'client = Client("«AKIAQRSTUVWXYZ234567»")'),
]

HEADERS = {
    "v1": "apiVersion: noetl.io/v1\nkind: Playbook\nname: secrets\npath: secrets/v1\n",
    "case_v2": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: secrets, path: secrets/v2}\n",
    "canonical": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: secrets, path: secrets/c}\n",
}
_SECRET = re.compile("«(.+?)»", re.DOTALL)


def _playbook(dialect: str, placement: Placement) -> str:
    workload = "  region: eu\n"
    if placement.where == "workload":
        workload += textwrap.indent(placement.fragment, "  ") + "\n"
    if placement.where == "tool":
        fields = f"kind: {placement.kind}\n{placement.fragment}"
        if dialect == "v1":
            fields = f"type: {placement.kind}\n{placement.fragment}"
            tool = textwrap.indent(fields, "    ") + "\n"
        else:
            tool = "    tool:\n" + textwrap.indent(fields, "      ") + "\n"
    else:
        tool = "" if dialect == "v1" else "    tool: {kind: noop}\n"
    if dialect == "canonical":
        route = "    next:\n      arcs:\n        - step: end\n"
        end = "  - step: end\n    tool: {kind: noop}\n"
    elif dialect == "case_v2":
        route = "    next:\n      - step: end\n"
        end = "  - step: end\n    tool: {kind: noop}\n"
    else:
        route = "    next:\n      - step: end\n"
        end = "  - step: end\n"
    return (
        HEADERS[dialect]
        + "workload:\n"
        + workload
        + "workflow:\n  - step: start\n"
        + tool
        + route
        + end
    )


def _case(dialect: str, placement: Placement) -> tuple[str, str, tuple[int, int]]:
    """(playbook text, the secret, its 1-based line and column)."""
    marked = _playbook(dialect, placement)
    match = _SECRET.search(marked)
    assert match and not _SECRET.search(marked, match.end()), placement.name
    start = match.start()
    text = marked[:start] + match.group(1) + marked[match.end() :]
    line = marked.count("\n", 0, start) + 1
    col = start - (marked.rfind("\n", 0, start) + 1) + 1
    return text, match.group(1), (line, col)


CASES = [(d, p) for p in PLACEMENTS for d in HEADERS]


def test_suite_size():
    assert len(PLACEMENTS) >= MIN_PLACEMENTS
    assert len({p.name for p in PLACEMENTS}) == len(PLACEMENTS)


@pytest.mark.parametrize(("dialect", "placement"), CASES, ids=[f"{d}-{p.name}" for d, p in CASES])
def test_secret_is_found_masked_and_never_compiled(dialect, placement, tmp_path: Path):
    text, secret, where = _case(dialect, placement)
    path = tmp_path / f"{placement.name}.yaml"
    path.write_text(text, encoding="utf-8")
    results, _ = check_paths([str(path)])
    diagnostics = results[0].diagnostics
    found = [(d.position.line, d.position.col) for d in diagnostics if d.code == "X601"]
    assert where in found, f"X601 expected at {where}, got {found}"

    sources = {str(path): text}
    for name, formatter in FORMATTERS.items():
        output = formatter(diagnostics, sources)
        assert secret not in output, f"--format {name} prints the secret"
        assert "X601" in output

    out = tmp_path / "dags"
    report = compile_paths([str(path)], str(out), check_only=False)
    assert str(path) in report.failed
    written = [p.read_text(encoding="utf-8") for p in out.rglob("*")] if out.exists() else []
    assert not any(secret in body for body in written)
