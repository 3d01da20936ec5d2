"""Rule family "security" (X601 literal secrets) on small inline playbooks."""

from __future__ import annotations

import textwrap

import pytest

from noetl_compile.check import check_paths
from noetl_compile.check.security import is_reference, is_secret_key

HEADER = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: t}
"""
STEPS = """\
workflow:
  - step: start
    tool: {kind: noop}
"""
MASK = "****, 4 characters, masked"


def x601(tmp_path, body: str, *, steps: bool = True) -> list[tuple[int, int, str]]:
    path = tmp_path / "playbook.yaml"
    path.write_text(HEADER + textwrap.dedent(body) + (STEPS if steps else ""))
    results, _ = check_paths([str(path)])
    return [
        (d.position.line, d.position.col, d.message)
        for d in results[0].diagnostics
        if d.code == "X601"
    ]


def test_secret_named_keys_with_literals(tmp_path):
    found = x601(
        tmp_path,
        """\
    workload:
      db_password: hunter2x
      apiKey: "abcd1234efgh"
      nested:
        - PGPASSWORD: 's3cr3t!'
      headers: {X-Api-Key: k3y-v4lue-9}
    """,
    )
    assert found == [
        (5, 16, "`db_password` holds a literal secret (********, 8 characters, masked)"),
        (6, 12, "`apiKey` holds a literal secret (********, 12 characters, masked)"),
        (8, 20, "`PGPASSWORD` holds a literal secret (*******, 7 characters, masked)"),
        (9, 24, "`X-Api-Key` holds a literal secret (********, 11 characters, masked)"),
    ]


def test_references_templates_and_placeholders_are_fine(tmp_path):
    assert (
        x601(
            tmp_path,
            """\
    workload:
      password: "{{ secret.pg_password }}"
      token: MY_SERVICE_TOKEN
      api_key: ${OPENAI_API_KEY}
      client_secret: projects/123/secrets/oauth-client/versions/latest
      aws_secret_access_key: arn:aws:secretsmanager:eu-west-1:1:secret:x
      pg_password_secret: postgres-dev-password
      secret_name: openai-api-key
      auth_token: ""
      session_token: test_session_123
      github_token: <your token>
      token_url: https://auth.example.org/token
      password_file: /run/secrets/pg
      max_tokens: 100
    keychain:
      - name: openai
        kind: secret_manager
        map: {api_key: "{{ secret.value }}"}
    """,
        )
        == []
    )


def test_url_credentials_are_reported_at_the_password(tmp_path):
    found = x601(
        tmp_path,
        """\
    workload:
      dsn: "postgresql://noetl:pa55@db:5432/noetl"
      templated: "postgresql://{{ user }}:{{ password }}@db/x"
      no_password: "https://user@example.org/x"
    """,
    )
    assert found == [(5, 28, f"a URL holds a literal password ({MASK})")]


def test_bearer_header_and_token_shapes(tmp_path):
    found = x601(
        tmp_path,
        """\
    workflow:
      - step: start
        tool:
          kind: http
          url: https://api.example.org
          headers:
            Authorization: Bearer abcdef123456
            X-Other: "Bearer {{ keychain.token }}"
        next: [{step: code}]
      - step: code
        tool:
          kind: python
          code: |
            KEY = "AKIAABCDEFGHIJKLMNOP"
            gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
            slack = 'xoxb-1234567890-abcdefghij'
            result = 1
        next: [{step: sql}]
      - step: sql
        tool:
          kind: duckdb
          command: "CREATE SECRET s (TYPE POSTGRES, USER 'pw', PASSWORD 'pw');"
    """,
        steps=False,
    )
    assert found == [
        (10, 31, "`Authorization` holds a literal secret (********, 12 characters, masked)"),
        (
            17,
            16,
            "an AWS access key id is written into the playbook (********, 20 characters, masked)",
        ),
        (18, 15, "a GitHub token is written into the playbook (********, 40 characters, masked)"),
        (19, 18, "a Slack token is written into the playbook (********, 26 characters, masked)"),
        (25, 70, "an SQL statement holds a literal password (**, 2 characters, masked)"),
    ]


def test_private_key_block(tmp_path):
    found = x601(
        tmp_path,
        """\
    workload:
      service_account:
        key: |
          -----BEGIN RSA PRIVATE KEY-----
          MIIBOgIBAAJBAK
          -----END RSA PRIVATE KEY-----
    """,
    )
    assert found == [
        (7, 7, "a private key is written into the playbook (********, 31 characters, masked)")
    ]


def test_messages_never_contain_the_secret(tmp_path):
    secret = "Zq9-very-secret-value"
    found = x601(
        tmp_path,
        f"""\
    workload:
      password: {secret}
      url: "https://u:{secret}@h/x"
    """,
    )
    assert len(found) == 2
    assert all(secret not in message and "Zq9" not in message for _, _, message in found)


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "db_password",
        "dbPassword",
        "X-Auth-Token",
        "PGPASSWORD",
        "api_key",
        "apikey",
        "client_secret",
        "aws_secret_access_key",
        "private_key",
        "Authorization",
        "pwd",
        "private_key_pem",
        "credentials_json",
        "ssh_key",
        "bearer",
        "jwt",
        "creds",
        "license_key",
        "APP_KEY",
        "totp_seed",
    ],
)
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "secret_name",
        "token_url",
        "password_file",
        "max_tokens",
        "token_type",
        "auth",
        "credential",  # NoETL's name of a stored credential, not the credential
        "keychain",
        "kms_key",  # a key id or ARN
        "pem_path",
        "jwt_issuer",
        3,
    ],
)
def test_not_secret_keys(key):
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    "value",
    [
        "MY_TOKEN",
        "${PG_PASS}",
        "$PG_PASS",
        "<password>",
        "****",
        "projects/p/secrets/s/versions/1",
        "vault://kv/pg",
        "changeme",
        "openai-api-key",
    ],
)
def test_references(value):
    assert is_reference(value)


def test_new_classes_leave_ordinary_text_alone(tmp_path):
    # Free text, SQL, URLs and request fields that only look like the classes X601 reads since
    # issue 23 (prose, SQL options, slashed URL passwords, `key` in params): none is a secret.
    assert (
        x601(
            tmp_path,
            """\
    description: |
      - password: Auth0 user password
      - token_type: Token type (Bearer)
      The password is required; the token expired at 10:00:00; API key for GPT4o users.
      Rotate the secret key every 90 days. Token URL: https://auth.x.org/oauth2/token
      See https://x.org:8443/path/to@me and the access token endpoint /v1/token2x.
    workload:
      base: "https://x.org:8080/a/b@c"
      sink_key: id
    workflow:
      - step: start
        tool:
          kind: postgres
          auth: pg_local
          command: |
            CREATE TABLE users (id int, password varchar(255), token text, secret_hash bytea);
            CREATE SECRET s (TYPE s3, KEY_ID '{{ secret.key_id }}', SECRET '{{ secret.value }}');
            SELECT token_count, password_reset_at FROM users WHERE token IS NOT NULL;
        next: [{step: fetch}]
      - step: fetch
        tool:
          kind: http
          url: https://maps.x.org
          params: {key: "{{ workload.maps_key }}", q: "password is required"}
          headers: {auth: "{{ keychain.api.token }}"}
        sink: {tool: postgres, auth: pg_local, table: t, key: id}
    """,
            steps=False,
        )
        == []
    )


# -- issue 35: disguises -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "p\u0430ssword",
        "t\u03bfken",
        "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44",
        "pässword",
        "pin",
        "card_pin",
        "PIN_CODE",
    ],
)
def test_look_alike_and_pin_keys_name_credentials(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["spin", "pin_memory", "pinned", "ping", "descripción", "密码_count"]
)
def test_keys_near_those_are_not_credentials(key):
    assert not is_secret_key(key)


def test_mixed_script_keys_are_X603_at_the_key(tmp_path):
    path = tmp_path / "playbook.yaml"
    body = "workload:\n  p\u0430ssword: x\n  descripción: y\n  名前_id: z\n  region: eu\n"
    path.write_text(HEADER + body + STEPS)
    results, _ = check_paths([str(path)])
    found = [(d.code, d.position.line, d.position.col) for d in results[0].diagnostics]
    assert ("X603", 5, 3) in found
    assert [f for f in found if f[0] == "X603"] == [("X603", 5, 3)]  # accents and Han+Latin pass
    assert any("reads as `password`" in d.message for d in results[0].diagnostics)


def test_entropy_flags_random_scalars_but_not_digests_ids_or_encoded_text(tmp_path):
    aws = "Zk3QpW9xLmN2bV7tRy4uA8sD6fG1hJ0kL5zX2cV9"
    found = x601(
        tmp_path,
        f"""\
    workload:
      value: {aws}
      sha256: {aws}
      requestId: {aws}
      command_b64: U0VMRUNUIGlkLCBtZXNzYWdlIEZST00gcHVibGljLmRlbW8gTElNSVQgNTs=
      name: customerOrdersSummary2024
      uuid: 3f1c2b9e-8d7a-4c6b-9e5f-1a2b3c4d5e6f
    """,
    )
    assert [(line, col) for line, col, _ in found] == [(5, 10)]
    assert "high-entropy" in found[0][2]


def test_constant_templates_do_not_hide_a_literal(tmp_path):
    found = x601(
        tmp_path,
        """\
    workload:
      password: "s3cr3t-V4l{{ '' }}"
      api_key: "{{ '' }}Zq8d7F6g5H4"
      token: "{{ env.TOKEN }}"
      secret: "{{ '' }}{{ env.SECRET }}"
    """,
    )
    assert [(line, col) for line, col, _ in found] == [(5, 14), (6, 21)]
