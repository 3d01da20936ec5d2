"""`noetlc run`: what is refused before anything runs (usage errors, a bad `--set` or connections
file, compile errors and check findings), each with exit status 2 or 1 and no secret printed."""

from __future__ import annotations

import json

import pytest

from noetl_compile.connections import ConnectionsError, load_connections_file
from tests.harness.run_cli import noetlc_run, report_of, write_playbook
from tests.noetlc_run.playbook_texts import DIVIDE

# -- errors before anything runs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["playbooks/missing.yaml"], "no such playbook file: playbooks/missing.yaml"),
        (["playbooks/hello_world.yaml", "--set", "message"], "--set expects KEY=VALUE"),
        (["playbooks/hello_world.yaml", "--conf", "{nope"], "--conf is not valid JSON"),
        (["playbooks/hello_world.yaml", "--conf", "[1]"], "--conf must be a JSON object"),
        (["playbooks/hello_world.yaml", "--bogus"], "unrecognized arguments: --bogus"),
        # a key the workload does not declare would run with the default of the one meant
        (
            ["playbooks/hello_world.yaml", "--set", "mesage=hi"],
            "--set mesage: playbooks/hello_world.yaml declares no workload key 'mesage'; "
            "did you mean 'message'? (declared: message); to add a new key on purpose: "
            "--set-new mesage=hi",
        ),
        (
            ["playbooks/hello_world.yaml", "--conf", '{"Message": 1}'],
            "--conf Message: playbooks/hello_world.yaml declares no workload key 'Message'; "
            "did you mean 'message'?",
        ),
        (
            ["playbooks/hello_world.yaml", "--set-new", "message=x"],
            "--set-new message: playbooks/hello_world.yaml already declares 'message'; use --set",
        ),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    result = noetlc_run(tmp_path / "unused-home", *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_set_value_the_workload_rejects_is_a_usage_error(first_run, home, tmp_path):
    playbook = write_playbook(tmp_path, "divide", DIVIDE)
    result = noetlc_run(home, playbook, "--set", "divisor=two")
    assert result.returncode == 2
    assert "noetlc: error: --set divisor: expected integer (JSON), got 'two'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_connections_file_is_a_usage_error_without_the_secret(tmp_path):
    connections = tmp_path / "connections.yaml"
    connections.write_text("warehouse: not-a-uri-but-a-s3cret\n")
    result = noetlc_run(
        tmp_path / "unused-home", "playbooks/hello_world.yaml", "--connections", connections
    )
    assert result.returncode == 2
    assert "connection 'warehouse'" in result.stderr and "s3cret" not in result.stderr
    with pytest.raises(ConnectionsError, match="needs `conn_type`"):
        connections.write_text("api: {host: h, password: pw}\n")
        load_connections_file(str(connections))
    connections.write_text("- plain_name\n- {conn_id: pg, conn_type: postgres, port: 5432}\n")
    loaded = load_connections_file(str(connections))
    assert loaded.names == {"plain_name", "pg"}
    assert json.loads(loaded.env["AIRFLOW_CONN_PG"]) == {"conn_type": "postgres", "port": 5432}


def test_compile_errors_print_in_check_format_and_run_nothing(home, tmp_path):
    playbook = write_playbook(
        tmp_path,
        "broken",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata:
          name: broken
          path: tests/broken
        workflow:
          - step: start
            tool: {kind: noop}
            next:
              arcs:
                - step: strat
        """,
    )
    text = noetlc_run(home, playbook)
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].startswith(f"{playbook}:11:")
    assert " R201 " in text.stdout.splitlines()[0]
    as_json = noetlc_run(home, playbook, "--json")
    assert as_json.returncode == 1
    report = report_of(as_json)
    assert report["state"] == "failed" and report["diagnostics"][0]["code"] == "R201"


def test_check_findings_print_before_the_run_and_dropped_edges_refuse_it(home, tmp_path):
    """A warning is shown before the run starts (stdout; stderr under --json, whose stdout
    stays one object); a `next` indented under `tool:` is S118, an error: nothing runs."""
    warned = write_playbook(
        tmp_path,
        "warned",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: warned, path: tests/warned}
        workflow:
          - step: start
            tool: {kind: python, code: "result = 1"}
          - step: orphan
            tool: {kind: noop}
        """,
    )
    text = noetlc_run(home, warned)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"{warned}:7:") and " F401 [warning] " in lines[0], lines
    assert lines[1].startswith("tests.warned  run ")  # then the run
    as_json = noetlc_run(home, warned, "--json")
    assert report_of(as_json)["state"] == "success"
    assert " F401 [warning] " in as_json.stderr
    dropped = write_playbook(
        tmp_path,
        "dropped",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: dropped, path: tests/dropped}
        workflow:
          - step: start
            tool:
              kind: python
              code: "result = 1"
              next:
                arcs: [{step: end}]
          - step: end
            tool: {kind: noop}
        """,
    )
    refused = noetlc_run(home, dropped)
    assert refused.returncode == 1
    assert refused.stdout.splitlines()[0].startswith(f"{dropped}:9:")
    assert " S118 [error] " in refused.stdout.splitlines()[0]
    assert f"{dropped}: not run: the playbook does not compile" in refused.stdout
