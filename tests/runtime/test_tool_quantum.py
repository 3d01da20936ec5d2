"""``kind: quantum`` with real qiskit (Aer and BasicSimulator), and real Airflow runs.

The executor is called directly for the config, circuit and error cases; the Bell playbook and
the seeds' parameter sweep (loop -> postgres) run under ``dag.test()`` with the event log on a
SQLite store, so the provenance is checked where a reader finds it: in the results and in the
ToolCompleted events. Jobs submitted in one process are read back by fresh interpreters (the job
store). No GPU and no IBM account here: those paths are checked for their clear errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from airflow_plugin.tools import ToolCall, get_tool
from noetl_compile.cli import main
from tests.corpus import seed

ROOT = Path(__file__).resolve().parents[2]
SWEEP_SEED = seed("spec_quantum_sweep")

BELL = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[2]; creg c[2];
h q[0]; cx q[0],q[1];
measure q -> c;
"""
RY = """OPENQASM 3.0;
include "stdgates.inc";
input float theta;
qubit[1] q;
bit[1] c;
ry(theta) q[0];
c[0] = measure q[0];
"""
PROVENANCE_KEYS = {
    "provider",
    "backend",
    "job_id",
    "shots",
    "seed_simulator",
    "transpile",
    "calibration_snapshot_id",
    "versions",
    "submitted_at",
    "completed_at",
    "tags",
    "circuit",
    "params",
    "device",
}


@pytest.fixture(autouse=True)
def job_store(tmp_path, monkeypatch) -> Path:
    """The default store location: quantum-jobs under the NoETL state folder."""
    monkeypatch.delenv("NOETL_QUANTUM_JOBS_DIR", raising=False)
    monkeypatch.setenv("NOETL_EVENTS_DIR", str(tmp_path / "noetl"))
    return tmp_path / "noetl" / "quantum-jobs"


def quantum(**config):
    return get_tool("quantum")(ToolCall(step="s", task="s", config={"kind": "quantum", **config}))


def ok(**config) -> dict:
    outcome = quantum(**config)
    assert outcome.ok, outcome.error
    return outcome.data


def error(**config) -> dict:
    outcome = quantum(**config)
    assert not outcome.ok, outcome.data
    assert set(outcome.error) >= {"kind", "type", "message", "retryable", "code"}
    assert "Traceback" not in outcome.error["message"]
    return outcome.error


# -- runs on the local simulators -------------------------------------------------------------


def test_bell_on_aer_counts_only_correlated_outcomes():
    data = ok(circuit=BELL, shots="256", seed=7, tags=["bell", "demo"])
    assert set(data) == {"job_id", "status", "counts", "shots", "backend", "provenance"}
    assert data["status"] == "DONE" and data["shots"] == 256
    assert set(data["counts"]) <= {"00", "11"} and sum(data["counts"].values()) == 256
    assert min(data["counts"].values()) > 64  # both outcomes, roughly half each
    assert data["backend"]["name"] == "aer_simulator" and data["backend"]["version"]
    prov = data["provenance"]
    assert PROVENANCE_KEYS <= set(prov)
    assert prov["provider"] == "aer" and prov["job_id"] == data["job_id"]
    assert prov["seed_simulator"] == 7 and prov["seed_simulator_generated"] is False
    assert prov["transpile"]["optimization_level"] == 2 and prov["transpile"]["depth"] >= 3
    assert prov["calibration_snapshot_id"] is None and prov["tags"] == ["bell", "demo"]
    assert prov["versions"]["qiskit"].startswith("2.") and prov["versions"]["qiskit-aer"]
    assert prov["circuit"]["language"] == "OpenQASM 2.0" and prov["circuit"]["num_qubits"] == 2
    assert prov["submitted_at"] <= prov["completed_at"] and prov["completed_at"].endswith("+00:00")


def test_basic_provider_runs_the_bell_circuit():
    data = ok(provider="basic", circuit=BELL, shots=200, seed=11)
    assert data["backend"]["name"] == "basic_simulator"
    assert set(data["counts"]) <= {"00", "11"} and sum(data["counts"].values()) == 200
    assert data["provenance"]["provider"] == "basic"


def test_fixed_seeds_reproduce_counts_bit_for_bit_and_drawn_seeds_are_recorded():
    config = {
        "circuit": RY,
        "params": {"theta": "1.1"},
        "shots": 500,
        "seed": 1234,
        "transpile": {"optimization_level": 1, "seed_transpiler": 5},
    }
    first, second = ok(**config), ok(**config)
    assert first["counts"] == second["counts"] and first["job_id"] != second["job_id"]
    assert first["provenance"]["transpile"] == {
        "optimization_level": 1,
        "seed_transpiler": 5,
        "seed_transpiler_generated": False,
        "depth": first["provenance"]["transpile"]["depth"],
    }
    # No seed given: one is drawn, and running again with it reproduces the counts.
    drawn = ok(circuit=RY, params={"theta": 1.1}, shots=500)
    prov = drawn["provenance"]
    assert prov["seed_simulator_generated"] is True and isinstance(prov["seed_simulator"], int)
    again = ok(
        circuit=RY,
        params={"theta": 1.1},
        shots=500,
        seed=prov["seed_simulator"],
        transpile={"seed_transpiler": prov["transpile"]["seed_transpiler"]},
    )
    assert again["counts"] == drawn["counts"]


def test_qasm3_parameter_binding_follows_the_angle():
    zero = ok(circuit=RY, params={"theta": 0}, shots=300, seed=1)
    flip = ok(circuit=RY, params={"theta": "3.1415926536"}, shots=300, seed=1)
    assert zero["counts"] == {"0": 300} and flip["counts"] == {"1": 300}
    assert flip["provenance"]["params"] == {"theta": 3.1415926536}
    assert flip["provenance"]["circuit"]["language"] == "OpenQASM 3.0"


# -- submit, then status and results from other processes --------------------------------------


def _in_fresh_interpreter(config: dict) -> dict:
    code = (
        "import json, sys\n"
        "from airflow_plugin.tools import ToolCall, get_tool\n"
        "out = get_tool('quantum')(ToolCall('s', 's', json.loads(sys.argv[1])))\n"
        "print(json.dumps({'ok': out.ok, 'data': out.data, 'error': out.error}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps({"kind": "quantum", **config})],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_submit_then_status_and_results_in_later_processes(job_store):
    submitted = ok(op="submit", provider="basic", circuit=BELL, shots=100, seed=3, tags=["t1"])
    job_id = submitted["job_id"]
    assert submitted["status"] == "DONE" and submitted["counts"] is None
    assert (job_store / f"{job_id}.json").is_file()  # under $NOETL_EVENTS_DIR/quantum-jobs
    status = _in_fresh_interpreter({"op": "status", "job_id": job_id})
    assert status["ok"] and status["data"]["status"] == "DONE"
    assert status["data"]["counts"] is None and status["data"]["backend"]["name"] == (
        "basic_simulator"
    )
    results = _in_fresh_interpreter({"op": "results", "job_id": job_id})
    assert results["ok"], results["error"]
    data = results["data"]
    assert data["job_id"] == job_id and sum(data["counts"].values()) == 100
    assert set(data["counts"]) <= {"00", "11"}
    assert data["provenance"] == submitted["provenance"]
    assert data["provenance"]["tags"] == ["t1"]
    # The same seed in a new run gives the stored counts again.
    assert ok(provider="basic", circuit=BELL, shots=100, seed=3)["counts"] == data["counts"]


def test_status_of_an_unknown_job_or_another_provider_is_a_clear_error():
    err = error(op="status", job_id="no-such-job")
    assert err["code"] == "JOB_NOT_FOUND" and "no-such-job" in err["message"]
    assert "quantum-jobs" in err["message"]
    assert error(op="results", job_id="../../etc/passwd")["code"] == "JOB_NOT_FOUND"
    job_id = ok(circuit=BELL, shots=10, seed=1)["job_id"]
    err = error(op="results", provider="basic", job_id=job_id)
    assert err["code"] == "PROVIDER_MISMATCH" and "provider aer, not basic" in err["message"]
    assert error(op="status")["message"] == (
        "op status needs `job_id` (the id a run or submit returned)"
    )


# -- clear errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("circuit", "expected"),
    [
        (
            'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nhx q[0];\n',
            "OpenQASM 2 parse error: <input>:4,0: 'hx' is not defined in this scope",
        ),
        (
            "OPENQASM 3.0;\nqubit[1] q;\nfoo q[0];\n",
            "OpenQASM 3 parse error: 3,0: gate 'foo' is not defined.",
        ),
        ("qreg q[2];", "`circuit` must start with an `OPENQASM 2.0;` or `OPENQASM 3.0;` header"),
        ("OPENQASM 4.0; qubit q;", "OpenQASM 4.0 is not supported (OpenQASM 2 and 3 are)"),
    ],
)
def test_bad_qasm_reports_the_parsers_message(circuit, expected):
    err = error(circuit=circuit)
    assert err["type"] == "QASMParseError" and err["code"] == "QASM_PARSE"
    assert err["message"] == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"phi": 1}, "unknown parameter(s) phi; no value for parameter(s) theta"),
        ({"theta": 1, "phi": 2}, "unknown parameter(s) phi"),
        ({}, "no value for parameter(s) theta"),
    ],
)
def test_parameters_must_match_the_circuit(params, expected):
    err = error(circuit=RY, params=params)
    assert err["code"] == "PARAMS"
    assert err["message"] == (
        f"`params` does not match the circuit: {expected} (the circuit's parameters: theta)"
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"circuit": RY, "params": {"theta": "abc"}}, "`params.theta` must be a number, not 'abc'"),
        ({"circuit": BELL, "shots": 0}, "`shots` must be a positive integer, not 0"),
        ({"circuit": BELL, "shots": "many"}, "`shots` must be an integer, not 'many'"),
        ({"circuit": BELL, "op": "launch"}, "`op` must be one of run, submit, status, results"),
        ({"op": "run"}, "op run needs `circuit`: OpenQASM 2 or 3 text"),
        ({"circuit": BELL, "device": "TPU"}, "`device` must be one of CPU, GPU, not 'TPU'"),
        (
            {"circuit": BELL, "transpile": {"optimization_level": 4}},
            "`transpile.optimization_level` must be 0, 1, 2 or 3, not 4",
        ),
        ({"circuit": BELL, "qubits": 2}, "unknown key(s) qubits in the quantum tool"),
    ],
)
def test_config_errors_name_the_key(config, message):
    err = error(**config)
    assert err["type"] == "QuantumConfigError" and message in err["message"]


def test_unknown_backend_lists_the_providers_backends():
    err = error(circuit=BELL, backend="aer_simulatr")
    assert err["code"] == "BACKEND_NOT_FOUND"
    assert "provider aer has no backend 'aer_simulatr'" in err["message"]
    assert "aer_simulator_statevector" in err["message"]


def test_a_circuit_wider_than_the_simulator_is_a_transpile_error():
    wide = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[40]; creg c[40];\nh q; t q;\nmeasure q -> c;\n'
    err = error(op="submit", backend="aer_simulator_statevector", circuit=wide)
    assert err["type"] == "QuantumTranspileError" and err["code"] == "TRANSPILE"
    assert err["message"].startswith(
        "cannot transpile the circuit for aer_simulator_statevector: Number of qubits (40)"
    )


def test_results_of_a_failed_job_say_how_it_ended():
    from airflow_plugin.tools.quantum.jobs import load_job, save_job

    record = load_job(ok(op="submit", circuit=BELL, shots=8, seed=1)["job_id"])
    assert record is not None and record["status"] == "DONE"
    # What the store holds for a job whose simulation failed (the simulator's message kept).
    save_job({**record, "status": "ERROR", "counts": None, "error": "QiskitError: out of memory"})
    status = ok(op="status", job_id=record["job_id"])
    assert status["status"] == "ERROR"
    err = error(op="results", job_id=record["job_id"])
    assert err["type"] == "QuantumJobFailed" and err["code"] == "JOB_ERROR"
    assert (
        err["message"] == f"quantum job {record['job_id']} ended ERROR: QiskitError: out of memory"
    )


def test_an_unwritable_job_store_fails_the_call(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store folder should be")
    monkeypatch.setenv("NOETL_QUANTUM_JOBS_DIR", str(blocker / "jobs"))
    err = error(circuit=BELL, shots=8)
    assert err["code"] == "JOB_STORE"
    assert err["message"].startswith(f"cannot write the job record {blocker / 'jobs'}/")


def test_a_circuit_without_measurements_has_no_counts():
    err = error(circuit='OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nh q[0];\n')
    assert err["code"] == "NO_MEASUREMENTS"


def test_gpu_asked_without_a_gpu_is_a_clear_error():
    from qiskit_aer import AerSimulator

    devices = AerSimulator().available_devices()
    if "GPU" in devices:  # pragma: no cover - this machine has none; a GPU host runs it for real
        assert ok(circuit=BELL, device="GPU", shots=64, seed=1)["provenance"]["device"] == "GPU"
        return
    err = error(circuit=BELL, device="GPU")
    assert err["code"] == "GPU_UNAVAILABLE"
    assert (
        err["message"] == f"GPU simulation asked, this qiskit-aer has devices: {', '.join(devices)}"
    )
    assert error(provider="basic", circuit=BELL, device="GPU")["message"] == (
        "GPU simulation asked, this qiskit BasicSimulator has devices: CPU"
    )


def test_ibm_without_the_package_names_the_extra():
    import importlib.util

    assert importlib.util.find_spec("qiskit_ibm_runtime") is None, "the extra is installed here"
    for config in (
        {"provider": "ibm", "circuit": BELL},
        {"provider": "ibm", "op": "status", "job_id": "d1x2"},
    ):
        err = error(**config)
        assert err["type"] == "ProviderNotInstalled" and err["code"] == "IBM_NOT_INSTALLED"
        assert "pip install 'noetlc[quantum-ibm]'" in err["message"]


def test_ibm_without_credentials_is_a_clear_error(tmp_path, monkeypatch):
    # Only the package's presence matters for this check (it comes before anything of the
    # package is used), so an empty package of that name stands in for the real one.
    (tmp_path / "qiskit_ibm_runtime").mkdir()
    (tmp_path / "qiskit_ibm_runtime" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    err = error(provider="ibm", circuit=BELL)
    assert err["type"] == "QuantumCredentialsError" and err["code"] == "IBM_CREDENTIALS"
    assert "set `auth` to an Airflow connection" in err["message"]
    err = error(provider="ibm", circuit=BELL, auth="ibm_missing_conn")
    assert err["code"] == "IBM_CREDENTIALS"
    assert "connection 'ibm_missing_conn' is not defined" in err["message"]
    monkeypatch.setenv("AIRFLOW_CONN_IBM_NO_TOKEN", json.dumps({"conn_type": "generic"}))
    err = error(provider="ibm", circuit=BELL, auth="ibm_no_token")
    assert "connection 'ibm_no_token' holds no IBM Quantum token" in err["message"]


def test_qiskit_is_imported_only_by_a_quantum_step():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from airflow_plugin.tools import ToolCall, get_tool\n"
            "get_tool('python')(ToolCall('s', 's', {'kind': 'python', 'code': 'result = 1'}))\n"
            "assert not any(m.startswith('qiskit') for m in sys.modules), 'qiskit loaded'\n"
            "get_tool('quantum')\n"
            "print('qiskit' in sys.modules)\n",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"  # even the executor module defers qiskit to a call


# -- real Airflow runs ----------------------------------------------------------------------


@pytest.fixture
def events_db(tmp_path):
    """A StoreRecorder over a SQLite event store, the process default for one test."""
    from airflow_plugin.events import set_default_recorder
    from airflow_plugin.events.outbox import Outbox
    from airflow_plugin.events.store import EventStore
    from airflow_plugin.events.writer import StoreRecorder

    store = EventStore(str(tmp_path / "events.db"))
    recorder = StoreRecorder(store, Outbox(tmp_path / "outbox"), flush_timeout=30)
    previous = set_default_recorder(recorder)

    def rows(**filters):
        assert recorder.flush(30), "events did not reach the store"
        return store.events(**filters)

    try:
        yield rows
    finally:
        recorder.flush(30)
        set_default_recorder(previous)
        store.dispose()


def _compile(source: Path, tmp_path: Path) -> str:
    out = tmp_path / "compiled"
    assert main(["compile", str(source), "-o", str(out)]) == 0
    (dag_file,) = out.glob("*.py")
    return dag_file.read_text()


def test_bell_playbook_runs_under_dag_test(run_dag, events_db):
    # The bundled compiled DAG (`noetlc compile playbooks/ -o dags/ --check` keeps it current).
    out = run_dag((ROOT / "dags" / "quantum.py").read_text(), "examples.quantum_bell")
    assert out.state == "success", out.states
    start = out.xcom["start"]["result"]
    assert set(start["counts"]) <= {"00", "11"} and sum(start["counts"].values()) == 256
    assert start["shots"] == 256 and start["provenance"]["seed_simulator"] == 7
    # The downstream step saw `{{ start.counts }}` as data.
    assert out.xcom["summarize"]["result"] == {"outcomes": sorted(start["counts"])}
    (completed,) = [
        r
        for r in events_db(dag_id="examples.quantum_bell", run_id=out.run_id)
        if r["name"] == "ToolCompleted" and r["data"]["kind"] == "quantum"
    ]
    assert completed["data"]["provenance"] == start["provenance"]
    assert completed["data"]["result"]["counts"] == start["counts"]


def test_parameter_sweep_seed_reproduces_and_persists_with_provenance(
    run_dag, tmp_path, events_db, pg_connections, pg_test_dsn
):
    import psycopg

    with psycopg.connect(pg_test_dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS qpu_results")
    source = _compile(SWEEP_SEED, tmp_path)
    runs = [run_dag(source, "seeds.quantum_sweep") for _ in range(2)]
    sweeps = []
    for out in runs:
        assert out.state == "success", out.states
        results = out.xcom["sweep.tail"]["result"]["results"]
        assert len(results) == 4
        for result, theta in zip(
            results, [0.0, 0.7853981634, 1.5707963268, 3.1415926536], strict=True
        ):
            prov = result["provenance"]
            assert PROVENANCE_KEYS <= set(prov)
            assert prov["params"] == {"theta": theta} and prov["seed_simulator"] == 1234
            assert prov["shots"] == 512 and sum(result["counts"].values()) == 512
        sweeps.append(results)
        assert out.states["persist"] == "success"
        # Every iteration's ToolCompleted event carries its provenance.
        completed = [
            r
            for r in events_db(dag_id="seeds.quantum_sweep", run_id=out.run_id)
            if r["name"] == "ToolCompleted" and r["data"]["kind"] == "quantum"
        ]
        assert sorted(r["data"]["provenance"]["job_id"] for r in completed) == sorted(
            r["job_id"] for r in results
        )
        assert all(r["data"]["provenance"]["seed_simulator"] == 1234 for r in completed)
    first, second = ([r["counts"] for r in sweep] for sweep in sweeps)
    assert first == second  # bit for bit with the fixed seed
    assert first[0] == {"0": 512} and first[3] == {"1": 512}  # ry(0) and ry(pi)
    assert {r["job_id"] for r in sweeps[0]}.isdisjoint(r["job_id"] for r in sweeps[1])
    with psycopg.connect(pg_test_dsn) as db:
        rows = db.execute("SELECT execution_id, payload FROM qpu_results").fetchall()
    assert len(rows) == 2 and len({row[0] for row in rows}) == 2
    for _execution_id, payload in rows:
        assert [r["counts"] for r in payload] == first
        assert all(r["provenance"]["versions"]["qiskit"] for r in payload)


SUBMIT_POLL_FETCH = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: quantum_poll, path: tests/quantum_poll}
workload:
  circuit: "OPENQASM 2.0; include \\"qelib1.inc\\"; qreg q[2]; creg c[2]; h q[0]; cx q[0],q[1]; measure q -> c;"
workflow:
  - step: start
    tool:
      kind: quantum
      provider: basic
      op: submit
      circuit: "{{ circuit }}"
      shots: 128
      seed: 5
      tags: [poll]
      spec:
        policy:
          rules:
            - else:
                then: {do: continue, set: {ctx.job_id: "{{ output.data.job_id }}"}}
    next:
      arcs:
        - step: poll
  - step: poll
    tool: {kind: quantum, op: status, job_id: "{{ ctx.job_id }}"}
    next:
      arcs:
        - step: fetch
          when: "{{ poll.status == 'DONE' }}"
  - step: fetch
    tool: {kind: quantum, op: results, job_id: "{{ ctx.job_id }}"}
"""


def test_submit_poll_fetch_playbook_finds_the_job_in_later_tasks(run_dag, tmp_path):
    # The specification's QPU pattern (section 11) on the basic simulator: the job id travels
    # through ctx; status and results are later tasks that read the job store.
    source = tmp_path / "quantum_poll.yaml"
    source.write_text(SUBMIT_POLL_FETCH)
    out = run_dag(_compile(source, tmp_path), "tests.quantum_poll")
    assert out.state == "success", out.states
    # `start` has a policy, so it runs as a one-task pipeline: its result is NoETL's pipeline
    # record, the submission under `_prev`.
    record = out.xcom["start"]["result"]
    assert record["status"] == "ok"
    submitted = record["_prev"]
    assert submitted["status"] == "DONE" and submitted["counts"] is None
    assert out.xcom["poll"]["result"]["job_id"] == submitted["job_id"]
    fetched = out.xcom["fetch"]["result"]
    assert fetched["job_id"] == submitted["job_id"] and sum(fetched["counts"].values()) == 128
    assert set(fetched["counts"]) <= {"00", "11"} and fetched["provenance"]["tags"] == ["poll"]


def test_counts_are_plain_json_for_the_loop_aggregate():
    # Counts keys are bitstrings, values ints: what postgres jsonb and XCom JSON carry unchanged.
    data = ok(circuit=BELL, shots=32, seed=2)
    assert json.loads(json.dumps(data)) == data
    assert Counter(data["counts"]).total() == 32
