"""The second line of defence behind X601 (noetl_compile/lower/credentials.py): a credential-named
workload key never carries a literal into the DAG file, whatever the detector made of its value,
and every credential-shaped Param is masked in Airflow's trigger form by Airflow's own rule."""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

from noetl_compile.compile import compile_paths
from noetl_compile.secret_names import AIRFLOW_SENSITIVE_FIELDS, airflow_hides
from tests.harness.run_cli import noetlc_run, report_of
from tests.test_secrets_generated import KEY_NAMES, PLURAL_KEYS

# Values under credential keys that X601 takes for references (an env var name, a secret
# manager path, a named slug, a placeholder): the detector's blind spots if they are secrets.
LOOKS_LIKE_A_REFERENCE = (
    "VENDOR_KEY_{i}",
    "secrets/vendor-{i}",
    "vendor-api-key-{i}",
    "<token {i}>",
    "${{VENDOR_{i}}}",
    "********",
)
# Keys only Airflow's masker treats as sensitive: masked in the form, values kept.
AIRFLOW_ONLY = {
    "dsn": "postgresql://db/app",
    "webhook_url": "https://hooks.x.org/in",
    "service_account": "etl@proj.iam",
    "http_proxy": "http://proxy:3128",
    "secret_name": "vendor",
}


def _playbook(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    values = {
        key: LOOKS_LIKE_A_REFERENCE[i % len(LOOKS_LIKE_A_REFERENCE)].format(i=i)
        for i, key in enumerate(KEY_NAMES)
    }
    lines = [f"  {key}: {value!r}" for key, value in values.items()]
    lines += [f"  {key}: [VENDOR_A, VENDOR_B]" for key in PLURAL_KEYS]
    lines += [f"  {key}: {value!r}" for key, value in AIRFLOW_ONLY.items()]
    lines += [
        "  nested: {host: db, password: PG_PASSWORD_REF}",
        '  from_env: "{{ env.VENDOR_TOKEN }}"',
        '  apiToken: "{{ env.VENDOR_TOKEN }}"',
        "  session_token: ''",
        "  max_tokens: 100",
        "  region: eu",
    ]
    path = tmp_path / "creds.yaml"
    path.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: creds, path: tests/creds}\n"
        "workload:\n" + "\n".join(lines) + "\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"
    )
    return path, values


def _load_dag(path: Path):
    spec = importlib.util.spec_from_file_location(f"creds_dag_{id(path)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def _form_field(schema: dict) -> str:
    """The input Airflow 3.3's trigger form renders (its FieldSelector: the first non-null type
    of the schema; a string of format "password" is FieldPassword)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return "password" if kind == "string" and schema.get("format") == "password" else str(kind)


def test_credential_keys_hold_no_literal_and_are_masked_in_the_trigger_form(tmp_path):
    pytest.importorskip("airflow")
    path, values = _playbook(tmp_path)
    out = tmp_path / "dags"
    report = compile_paths([str(path)], str(out), check_only=False)
    assert not report.failed, [d.message for d in report.diagnostics]
    assert not [d for d in report.diagnostics if d.code == "X601"]  # the detector's blind spots

    text = (out / "creds.py").read_text()
    source = path.read_text().splitlines()
    for value in [*values.values(), "VENDOR_A", "VENDOR_B", "PG_PASSWORD_REF"]:
        assert value not in text, value
    withheld = {d.message.split("`")[1]: d.position for d in report.diagnostics if d.code == "X602"}
    assert set(withheld) == {*KEY_NAMES, *PLURAL_KEYS, "nested.password"}
    for key, position in withheld.items():
        line = source[position.line - 1]
        written = repr(values[key]) if key in values else "[VENDOR_A" if key in PLURAL_KEYS else ""
        assert line[position.col - 1 :].startswith(written or "PG_PASSWORD_REF"), (key, line)

    dag = _load_dag(out / "creds.py")
    fields = {key: _form_field(dag.params.get_param(key).schema) for key in dag.params}
    masked = {key for key, field in fields.items() if field == "password"}
    assert masked == {*KEY_NAMES, *PLURAL_KEYS, *AIRFLOW_ONLY, "apiToken", "session_token"}
    assert fields["max_tokens"] == "integer" and fields["region"] == "string"
    assert dag.params["nested"] == {"host": "db", "password": None}
    assert dag.params["from_env"] == "{{ env.VENDOR_TOKEN }}"  # resolved at run time
    for key, value in AIRFLOW_ONLY.items():
        assert dag.params[key] == value
    for key in (*KEY_NAMES, *PLURAL_KEYS):
        assert dag.params[key] is None
    dag.params.validate()  # a run without conf is valid: the run request may supply them


def test_airflow_agrees_on_what_is_sensitive():
    masker = pytest.importorskip("airflow._shared.secrets_masker.secrets_masker")
    assert frozenset(masker.DEFAULT_SENSITIVE_FIELDS) == AIRFLOW_SENSITIVE_FIELDS
    names = [
        *KEY_NAMES,
        *PLURAL_KEYS,
        *AIRFLOW_ONLY,
        *AIRFLOW_SENSITIVE_FIELDS,
        "region",
        "max_tokens",
        "Proxy-Authorization",
        "X API Token",
        "pg_auth",
        "credential",
        "keyfile",
        "user.name",
    ]
    instance = masker._secrets_masker()
    # The defaults, as a deployment without `[core] sensitive_var_conn_names` has them.
    instance.sensitive_variables_fields = list(masker.DEFAULT_SENSITIVE_FIELDS)
    instance.hide_sensitive_var_conn_fields = True
    disagree = [n for n in names if airflow_hides(n) != masker.should_hide_value_for_key(n)]
    assert not disagree


def test_a_withheld_credential_comes_from_the_run_request(tmp_path):
    """A real run: the value the DAG file left out arrives in the run request (`--set`)."""
    playbook = tmp_path / "withheld.yaml"
    playbook.write_text(
        textwrap.dedent(
            """\
            apiVersion: noetl.io/v2
            kind: Playbook
            metadata: {name: withheld, path: tests/withheld}
            workload:
              vendor_api_key: VENDOR_KEY_REF
            workflow:
              - step: start
                tool:
                  kind: python
                  input: {k: "{{ workload.vendor_api_key }}"}
                  code: |
                    result = {"length": len(k), "digits": sum(c.isdigit() for c in k)}
            """
        )
    )
    given = "Zq7given9Key1"
    # `--set` passes a string Param's value as typed (its schema is ["null", "string"])
    run = noetlc_run(tmp_path / "home", playbook, "--set", f"vendor_api_key={given}", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    report = report_of(run)
    assert report["steps"]["start"]["result"] == {"length": len(given), "digits": 3}
    assert given not in run.stdout + run.stderr


def test_the_installed_trigger_form_masks_password_strings():
    """The fact `format="password"` relies on: Airflow's trigger form (its React bundle) picks a
    masked input for a string Param of that format (FieldPassword)."""
    airflow = pytest.importorskip("airflow")
    assets = Path(airflow.__file__).parent / "ui" / "dist" / "assets"
    bundles = [p.read_text(encoding="utf-8", errors="replace") for p in assets.glob("*.js")]
    field = re.compile(r"===`string`&&\w{1,3}\.format===`password`")
    assert any(field.search(text) for text in bundles)
