"""``kind: secrets`` / ``secret_manager`` / ``credential`` through Airflow's real secrets lookup.

Secrets are defined the way a deployment without a metadata DB defines them: ``AIRFLOW_VAR_*``
and ``AIRFLOW_CONN_*`` environment variables, read by ``airflow.sdk.Variable``/``Connection``.
"""

from __future__ import annotations

import json

import pytest

from airflow_plugin.hooks.secrets import (
    SECRET_REF_KEY,
    SecretUnavailable,
    clear_secret_cache,
    is_secret_ref,
    lookup_secret,
    resolve_secret_refs,
    secret_ref,
)
from airflow_plugin.runtime.step import execute_step
from airflow_plugin.tools import get_tool
from airflow_plugin.tools.outcome import ToolCall
from airflow_plugin.tools.secrets import run_secrets

TOKEN = "tok-7f3a9c1e-secret"  # long enough for Airflow's masker (>= 5 characters)


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_secret_cache()
    yield
    clear_secret_cache()


def call(kind: str = "secrets", step_input: dict | None = None, **config) -> ToolCall:
    return ToolCall(
        step="get_token",
        task="get_token",
        config={"kind": kind, **config},
        step_input=step_input or {},
    )


def run(kind: str = "secrets", **config):
    return get_tool(kind)(call(kind, **config))


def assert_no_value(outcome, value: str = TOKEN) -> None:
    """Neither the result nor the error may carry the value in clear."""
    dumped = json.dumps({"data": outcome.data, "error": outcome.error, "meta": outcome.meta})
    assert value not in dumped


# -- lookups -------------------------------------------------------------------------------------


def test_airflow_variable_becomes_a_reference(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_API_TOKEN", TOKEN)
    out = run(name="api_token")
    assert out.ok, out.error
    ref = {SECRET_REF_KEY: {"provider": "airflow", "name": "api_token"}}
    assert out.data == {
        "secret_value": ref,
        "value": ref,
        "name": "api_token",
        "provider": "airflow",
    }
    assert_no_value(out)
    assert out.meta["duration_ms"] >= 0
    # Downstream templates get the value once the reference is resolved.
    assert resolve_secret_refs(out.data)["secret_value"] == TOKEN


@pytest.mark.parametrize("provider", ["gcp", "google", "aws", "azure", "vault", "AIRFLOW"])
def test_cloud_providers_go_through_airflow_backends(monkeypatch, provider):
    # The corpus writes `provider: google` + `secret_name`; the deployment's backend answers.
    monkeypatch.setenv("AIRFLOW_VAR_TEST-SECRET", TOKEN)
    out = run(provider=provider, project_id="noetl-demo-19700101", secret_name="test-secret")
    assert out.ok, out.error
    assert out.data["provider"] == provider.lower()
    assert resolve_secret_refs(out.data["secret_value"]) == TOKEN
    assert_no_value(out)


@pytest.mark.parametrize(
    "conn",
    [
        json.dumps({"conn_type": "generic", "login": "svc", "password": TOKEN}),
        f"generic://svc:{TOKEN}@api.example.test",
    ],
    ids=["json", "uri"],
)
def test_falls_back_to_a_connection_password(monkeypatch, conn):
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE_KEY", conn)
    out = run(key="warehouse_key")
    assert out.ok, out.error
    assert resolve_secret_refs(out.data)["secret_value"] == TOKEN
    assert_no_value(out)


def test_variable_wins_over_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_SHARED_NAME", "from-the-variable")
    monkeypatch.setenv("AIRFLOW_CONN_SHARED_NAME", "generic://u:from-the-connection@h")
    assert lookup_secret("airflow", "shared_name") == "from-the-variable"


def test_credential_kind_reads_its_credential_key(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_GCS_SERVICE_ACCOUNT", f"generic://sa:{TOKEN}@gcs")
    out = run("credential", credential="gcs_service_account")
    assert out.ok, out.error
    assert out.data["name"] == "gcs_service_account"
    assert resolve_secret_refs(out.data["value"]) == TOKEN


def test_secret_manager_kind_and_env_provider(monkeypatch):
    # case-v2 v2_actions_test: `kind: secrets, provider: env, name: TEST_SECRET`.
    monkeypatch.setenv("NOETL_TEST_SECRET", TOKEN)
    out = run("secret_manager", provider="env", name="NOETL_TEST_SECRET")
    assert out.ok, out.error
    assert out.data["provider"] == "env"
    assert resolve_secret_refs(out.data)["value"] == TOKEN
    assert_no_value(out)


def test_name_may_come_from_the_step_input(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_FROM_INPUT", TOKEN)
    out = run_secrets(call(step_input={"name": "from_input"}))
    assert out.ok and out.data["name"] == "from_input"


def test_resolved_values_are_masked_in_airflow_logs(monkeypatch):
    from airflow_plugin.compat import masker_redact

    redact = masker_redact()  # airflow.sdk.log's on 3.2+, the execution-time masker's before

    secret = "env-only-value-58c1d2"  # never seen by Airflow's own lookup, so only we mask it
    monkeypatch.setenv("NOETL_MASK_ME", secret)
    assert redact(f"header={secret}") == f"header={secret}"
    out = run(provider="env", name="NOETL_MASK_ME")
    assert out.ok
    assert redact(f"header={secret}") == "header=***"


# -- failures ------------------------------------------------------------------------------------


def test_missing_secret_is_a_non_retryable_failure_naming_where_it_looked(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_NO_SUCH_SECRET", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_SECRET", raising=False)
    out = run(provider="gcp", secret_name="no_such_secret")
    assert out.status == "error" and out.data is None
    assert out.error["kind"] == "secrets"
    assert out.error["type"] == "SecretNotFound"
    assert out.error["retryable"] is False
    message = out.error["message"]
    assert "'no_such_secret'" in message and "provider 'gcp'" in message
    assert "AIRFLOW_VAR_NO_SUCH_SECRET" in message and "AIRFLOW_CONN_NO_SUCH_SECRET" in message


def test_missing_env_secret_names_the_variable(monkeypatch):
    monkeypatch.delenv("NOETL_ABSENT_SECRET", raising=False)
    out = run(provider="env", name="NOETL_ABSENT_SECRET")
    assert out.error["type"] == "SecretNotFound" and out.error["retryable"] is False
    assert "environment variable 'NOETL_ABSENT_SECRET'" in out.error["message"]


def test_connection_without_password_is_not_found(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_NO_PASSWORD", '{"conn_type": "generic", "login": "svc"}')
    out = run(name="no_password")
    assert out.error["type"] == "SecretNotFound"
    assert "exists but has no password" in out.error["message"]


def test_defined_but_unreadable_connection_is_not_reported_missing(monkeypatch):
    # Airflow's connection lookup logs a backend's exception at debug level and answers "not
    # defined"; a set AIRFLOW_CONN_ that Airflow cannot read must not read as a missing secret.
    # (On Airflow 3.1 with cryptography 51 every password-holding Connection failed this way.)
    monkeypatch.delenv("AIRFLOW_VAR_BROKEN_KEY", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN_KEY", '{"conn_type": "generic", "password": "' + TOKEN)
    out = run(name="broken_key")
    assert out.status == "error"
    assert out.error["type"] == "SecretUnreadable" and out.error["retryable"] is False
    assert "AIRFLOW_CONN_BROKEN_KEY is set" in out.error["message"]
    assert "(JSONDecodeError)" in out.error["message"]
    assert_no_value(out)


def test_backend_error_is_retryable_and_names_no_value(monkeypatch):
    # A deployment whose configured secrets backend cannot be loaded: Airflow's lookup raises.
    monkeypatch.setenv("AIRFLOW_VAR_BACKEND_PROBE", TOKEN)
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", "noetl_no_such_module.SecretsBackend")
    out = run(name="backend_probe")
    assert out.status == "error"
    assert out.error["type"] == "SecretBackendError"
    assert out.error["retryable"] is True
    assert "AirflowConfigException" in out.error["message"]
    assert "'backend_probe'" in out.error["message"]
    assert_no_value(out)
    monkeypatch.delenv("AIRFLOW__SECRETS__BACKEND")
    assert run(name="backend_probe").ok  # nothing stale was cached by the failed lookup


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({}, "needs the secret's `name`"),
        ({"name": "x", "provider": "keepass"}, "unknown secrets provider 'keepass'"),
        ({"name": "x", "version": "3"}, "version '3' cannot be pinned"),
    ],
)
def test_config_errors(config, needle):
    out = run(**config)
    assert out.error["type"] == "ConfigError" and out.error["retryable"] is False
    assert needle in out.error["message"]


def test_latest_version_is_accepted(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_VERSIONED", TOKEN)
    assert run(name="versioned", version="latest").ok


# -- references ----------------------------------------------------------------------------------


def test_is_secret_ref():
    assert is_secret_ref(secret_ref("env", "X"))
    assert not is_secret_ref({SECRET_REF_KEY: {"provider": "env"}})
    assert not is_secret_ref({SECRET_REF_KEY: {"provider": "env", "name": "X"}, "other": 1})
    assert not is_secret_ref({"provider": "env", "name": "X"})
    assert not is_secret_ref("X")


def test_resolve_walks_containers_without_mutating(monkeypatch):
    monkeypatch.setenv("NOETL_NESTED_SECRET", TOKEN)
    ref = secret_ref("env", "NOETL_NESTED_SECRET")
    value = {"a": [ref, {"b": ref}], "c": 1, "t": (ref, 2), "plain": {"x": [1, 2]}}
    resolved = resolve_secret_refs(value)
    assert resolved == {
        "a": [TOKEN, {"b": TOKEN}],
        "c": 1,
        "t": (TOKEN, 2),
        "plain": {"x": [1, 2]},
    }
    assert value["a"][0] == ref  # the input is left as it was
    assert resolved["plain"] is value["plain"]  # containers without references are not copied
    untouched = {"rows": [[1, "a"]], "n": 1}
    assert resolve_secret_refs(untouched) is untouched


def test_cache_serves_values_until_cleared(monkeypatch):
    monkeypatch.setenv("NOETL_CACHED_SECRET", TOKEN)
    ref = secret_ref("env", "NOETL_CACHED_SECRET")
    assert resolve_secret_refs(ref) == TOKEN
    monkeypatch.delenv("NOETL_CACHED_SECRET")
    assert resolve_secret_refs(ref) == TOKEN  # same process: no second lookup
    clear_secret_cache()
    with pytest.raises(SecretUnavailable) as info:
        resolve_secret_refs({"auth": ref})
    assert info.value.name == "NOETL_CACHED_SECRET" and info.value.retryable is False
    assert "NOETL_CACHED_SECRET" in str(info.value) and TOKEN not in str(info.value)


def test_step_result_holds_the_reference_not_the_value(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_STEP_TOKEN", TOKEN)
    payload = {
        "step": "get_token",
        "dialect": "canonical",
        "tool": {"kind": "secrets", "provider": "gcp", "secret_name": "step_token"},
    }
    out = execute_step(
        payload, {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 1}
    )
    assert out.status == "ok"
    assert is_secret_ref(out.result["secret_value"])
    assert TOKEN not in json.dumps(out.result)


def test_downstream_template_sees_the_value_while_results_keep_the_reference(monkeypatch):
    from airflow_plugin.runtime.step import execute_step

    monkeypatch.setenv("AIRFLOW_VAR_API_TOKEN", "s3cr3t-token-value")
    base = {"workload": {}, "ctx": {}, "vars": {}, "execution_id": 5}
    fetch = execute_step(
        {"step": "get_token", "tool": {"kind": "secrets", "name": "api_token"}},
        {**base, "results": {}},
    )
    assert "s3cr3t" not in repr(fetch.result)  # XCom and events get the reference only
    use = execute_step(
        {
            "step": "use",
            "tool": {
                "kind": "python",
                "input": {"t": "{{ get_token.secret_value }}"},
                "code": "result = {'length': len(t), 'starts': t[:6]}",
            },
        },
        {**base, "results": {"get_token": fetch.result}},
    )
    assert use.result == {"length": len("s3cr3t-token-value"), "starts": "s3cr3t"}
