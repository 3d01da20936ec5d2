"""Which values the event log, `noetlc status` and the NoETL view mask: those under a key X601
calls a credential, and the strings under a key Airflow's masker calls sensitive; no other rule.

A result such as ``{"token_length": 8, "looks_like_token": true}`` (playbooks/secrets_use.yaml)
was shown as ``***`` everywhere: no secret is there, and Airflow itself shows it."""

from __future__ import annotations

import pytest

from airflow_plugin.events.cli import render_status
from airflow_plugin.events.projection import project
from airflow_plugin.hooks.redact import REDACTED, redact
from airflow_plugin.web.data import redacted_state
from noetl_compile.check.secrets import is_secret_key

KEYS = [
    "token",
    "token_length",
    "looks_like_token",
    "max_tokens",
    "tokens_used",
    "api_token",
    "password",
    "db_password",
    "password_file",
    "credential_name",
    "dsn",
    "proxy",
    "webhook_url",
    "city",
    "total",
]


def airflow_masker():
    from airflow._shared.secrets_masker import secrets_masker as masker

    instance = masker.SecretsMasker()
    instance.sensitive_variables_fields = list(masker.DEFAULT_SENSITIVE_FIELDS)
    instance.hide_sensitive_var_conn_fields = True
    return instance


@pytest.mark.parametrize("key", KEYS)
def test_strings_are_masked_where_airflow_or_x601_says_so(key):
    masked = redact({key: "opaque-value-1"})[key] == REDACTED
    airflow = airflow_masker().redact("opaque-value-1", key) != "opaque-value-1"
    assert masked == (airflow or is_secret_key(key)), key


@pytest.mark.parametrize("key", KEYS)
def test_numbers_and_booleans_stay_unless_x601_names_a_credential(key):
    for value in (8, True):
        shown = redact({key: value})[key]
        airflow = airflow_masker().redact(value, key)
        assert airflow == value  # Airflow masks only strings under its names
        expected = REDACTED if is_secret_key(key) and value is not True else value
        assert shown == expected, (key, value)


def test_status_and_view_show_a_result_about_a_token_and_still_mask_the_token():
    """The view redacts the projection once more (data.redacted_state): the step `use_token`
    keeps its name and entry, its result's `token` string alone is masked."""
    rows = [
        {
            "name": "StepFinished",
            "step": "use_token",
            "status": "success",
            "data": {
                "result": {"token_length": 8, "looks_like_token": True, "token": "tok-12345678"}
            },
        },
    ]
    text = render_status(redacted_state(project(rows)))
    assert "  use_token  success  runs 1" in text, text
    assert '"token_length": 8' in text and '"looks_like_token": true' in text, text
    assert '"token": "***"' in text and "tok-12345678" not in text
