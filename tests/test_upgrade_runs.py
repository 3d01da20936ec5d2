"""`noetlc upgrade` changes no behaviour: the original and the upgraded playbook, compiled by
noetlc and run under Airflow's ``dag.test()``, end in the same state with the same steps run and
the same step results, and each step records the same events (names, entities, statuses).

Cases: a case-v2 playbook exercising every rewrite (args -> input, a guarded case rule and a
fallback -> exclusive arcs, a multi-target next -> inclusive arcs, loop mode -> loop.spec.mode)
and a v1 one (workbook task and call, inline tool, when/then/else, fan-out, `type: end`), each
run down both of its branches; and every corpus playbook the upgrade rewrites that runs here
(tests/corpus_run/expectations.yaml says which run and with what).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from noetl_compile.upgrade import upgrade_text
from tests.corpus import CORPUS, available
from tests.corpus_run import runner
from tests.corpus_run.test_corpus_run import RESET_SQL
from tests.upgrade_support import assert_same_run, corpus_upgrades, finished, relative, run_text

ROUTES = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_routes, path: tests/upgrade_routes}
workload:
  n: 1
workflow:
  - step: start
    tool: {kind: python, args: {n: "{{ workload.n }}"}, code: "result = {'n': int(n) + seed}"}
    args: {seed: 1}
    case:
      - when: "{{ event.name == 'step.exit' and response is defined and start.n > 5 }}"
        then:
          next: [{step: big}]
      - when: "{{ event.name == 'step.exit' }}"
        then:
          next: [{step: fan}]
  - step: big
    tool: {kind: python, code: "result = {'big': True}"}
  - step: fan
    tool: {kind: python, code: "result = {'fan': True}"}
    next: [left, right]
  - step: left
    loop: {in: "{{ [1, 2, 3] }}", iterator: i, mode: parallel}
    tool: {kind: python, args: {i: "{{ iter.i }}"}, code: "result = {'twice': int(i) * 2}"}
    next: [{step: join}]
  - step: right
    tool: {kind: python, code: "result = {'right': 1}"}
    next: [{step: join}]
  - step: join
    tool: {kind: python, code: "result = {'joined': True}"}
"""


V1_ROUTES = """\
apiVersion: noetl.io/v1
kind: Playbook
name: upgrade_v1_routes
path: tests/upgrade_v1_routes
workload:
  n: 1
workbook:
  - name: score
    type: python
    with: {bonus: 1}
    code: |
      def main(n, bonus):
          return {"score": int(n) + int(bonus)}
workflow:
  - step: start
    next:
      - when: "{{ workload.n > 5 }}"
        then: [{step: big}]
      - else: [{step: rate}]
  - step: rate
    type: workbook
    name: score
    with: {n: "{{ workload.n }}"}
    next: [{step: left}, {step: right}]
  - step: big
    type: python
    code: |
      def main():
          return {"big": True}
    next: [{step: end}]
  - step: left
    type: python
    code: |
      def main():
          return {"left": 1}
  - step: right
    type: python
    code: |
      def main():
          return {"right": 2}
  - step: end
    type: end
"""


GUARDS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_guards, path: tests/upgrade_guards}
workload:
  n: 1
workflow:
  - step: start
    tool: {kind: python, args: {n: "{{ workload.n }}"}, code: "result = {'n': int(n)}"}
    case:
      - when: "{{ event.name == 'step.exit' and result.n > 5 }}"
        then:
          next: [{step: big}]
      - when: "{{ event.name == 'step.exit' and response is defined and response.n <= 5 }}"
        then:
          - next: [{step: items}]
  - step: big
    tool: {kind: python, code: "result = {'big': True}"}
  - step: items
    loop: {in: "{{ [1, 2] }}", iterator: i, mode: sequential}
    tool: {kind: python, args: {i: "{{ iter.i }}"}, code: "result = {'i': int(i)}"}
    case:
      - when: "{{ event.name == 'loop.done' }}"
        then:
          next: [{step: done}]
  - step: done
    tool: {kind: python, code: "result = {'ok': True}"}
    case:
      - when: "{{ event.name == 'call.done' and response.ok }}"
        then:
          next: [{step: last}]
  - step: last
    tool: {kind: python, code: "result = {'last': 1}"}
"""


def _compare(text: str, conf: dict[str, Any], airflow_db, run_dag, tmp_path, monkeypatch):
    upgrade = upgrade_text(text, "playbook.yaml")
    assert upgrade.writable, upgrade.diagnostics
    root = tmp_path / "corpus"
    monkeypatch.setattr(runner, "CORPUS", root)
    before = run_text(root, "before/p.yaml", text, conf, airflow_db, run_dag, tmp_path / "b")
    after = run_text(root, "after/p.yaml", upgrade.text, conf, airflow_db, run_dag, tmp_path / "a")
    assert_same_run(before, after)
    return before


@pytest.mark.parametrize("n, branch", [(1, "fan"), (9, "big")])
def test_every_rewrite_runs_as_the_original(
    n, branch, airflow_db, run_dag, tmp_path, monkeypatch
) -> None:
    run = _compare(ROUTES, {"n": n}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    done = finished(run)
    assert branch in done and ({"big", "fan"} - {branch}).isdisjoint(done)
    if branch == "fan":
        assert {"left", "right", "join"} <= set(done)
        assert run.results["left"]["results"] == [{"twice": 2}, {"twice": 4}, {"twice": 6}]


@pytest.mark.parametrize("n, branch", [(1, "rate"), (9, "big")])
def test_every_v1_rewrite_runs_as_the_original(
    n, branch, airflow_db, run_dag, tmp_path, monkeypatch
) -> None:
    run = _compare(V1_ROUTES, {"n": n}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    done = finished(run)
    assert branch in done and ({"big", "rate"} - {branch}).isdisjoint(done)
    if branch == "rate":
        assert {"left", "right"} <= set(done)
        assert run.results["rate"] == {"score": 2}


# The corpus's weather example in small: values passed along a conditional `next` to targets
# whose own input only forwards them (`city: "{{ city }}"`), one of them labelled by `name`.
V1_PASSED = """\
apiVersion: noetl.io/v1
kind: Playbook
name: upgrade_v1_passed
path: tests/upgrade_v1_passed
workload:
  n: 1
  city: Oslo
workflow:
  - step: start
    type: python
    code: |
      def main(n):
          return {"warm": int(n) > 5, "temp": int(n) * 3}
    with: {n: "{{ workload.n }}"}
    next:
      - when: "{{ start.warm }}"
        then:
          - step: report_warm
            input: {city: "{{ workload.city }}", temperature: "{{ start.temp }}"}
      - else:
          - step: report_cold
            input: {city: "{{ workload.city }}", temperature: "{{ start.temp }}"}
  - step: report_warm
    type: python
    input:
      city: "{{ city }}"
      temperature: "{{ temperature }}"
    code: |
      def main(city, temperature):
          return {"status": "warm", "city": city, "temperature": temperature}
  - step: report_cold
    type: python
    name: report_cold
    input:
      city: "{{ city }}"
      temperature: "{{ temperature }}"
    code: |
      def main(city, temperature):
          return {"status": "cold", "city": city, "temperature": temperature}
"""


# The corpus's case-v2 weather control flow in small: a case rule passes args along its `next`,
# read from the step's result as `response`; each target's tool args only forward them.
CASE_V2_PASSED = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_v2_passed, path: tests/upgrade_v2_passed}
workload:
  n: 1
  city: Oslo
workflow:
  - step: start
    tool:
      kind: python
      args: {n: "{{ workload.n }}"}
      code: |
        result = {'warm': int(n) > 5, 'temp': int(n) * 3, 'city': city}
    args: {city: "{{ workload.city }}"}
    case:
      - when: "{{ event.name == 'step.exit' and response is defined and response.warm }}"
        then:
          next:
            - step: report_warm
              args:
                city: "{{ response.city }}"
                temperature: "{{ response.temp }}"
      - when: "{{ event.name == 'step.exit' and response is defined and not response.warm }}"
        then:
          next:
            - step: report_cold
              args:
                city: "{{ response.city }}"
                temperature: "{{ response.temp }}"
  - step: report_warm
    tool:
      kind: python
      args:
        city: "{{ city }}"
      code: |
        result = {'status': 'warm', 'city': city, 'temperature': temperature}
  - step: report_cold
    tool:
      kind: python
      args:
        city: "{{ city }}"
      code: |
        result = {'status': 'cold', 'city': city, 'temperature': temperature}
"""


@pytest.mark.parametrize("generation", ["v1", "case-v2"])
@pytest.mark.parametrize("n, branch", [(1, "report_cold"), (9, "report_warm")])
def test_values_passed_along_a_routing_rule_run_as_the_original(
    generation, n, branch, airflow_db, run_dag, tmp_path, monkeypatch
) -> None:
    """v1 values along a conditional `next`, case-v2 args along a case rule's `next`: both
    become the target's `input`, and the target sees the same values."""
    text = {"v1": V1_PASSED, "case-v2": CASE_V2_PASSED}[generation]
    run = _compare(text, {"n": n}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    status = branch.removeprefix("report_")
    assert run.results[branch] == {"status": status, "city": "Oslo", "temperature": 3 * n}


def _expectations() -> dict[str, Any]:
    return yaml.safe_load((Path(__file__).parent / "corpus_run" / "expectations.yaml").read_text())


def _runs(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The runs an expectation names: its one `run`, or each of its named `runs`."""
    if "run" in entry:
        return {"run": entry["run"]}
    return dict(entry.get("runs") or {})


@pytest.mark.parametrize("n, branch", [(1, "items"), (9, "big")])
def test_guards_and_event_rules_run_as_the_original(
    n, branch, airflow_db, run_dag, tmp_path, monkeypatch
) -> None:
    """`result`/`response` guards read by the step's name, a `then` list, a loop's `loop.done`
    rule and a `call.done` rule as arcs."""
    run = _compare(GUARDS, {"n": n}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    done = finished(run)
    assert branch in done and ({"big", "items"} - {branch}).isdisjoint(done)
    if branch == "items":
        assert {"done", "last"} <= set(done)
        assert [r["i"] for r in run.results["items"]["results"]] == [1, 2]


VARS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_vars, path: tests/upgrade_vars}
workload:
  n: 1
workflow:
  - step: start
    tool: {kind: python, args: {n: "{{ workload.n }}"}, code: "result = {'users': [{'id': 7}], 'n': n}"}
    vars:
      first: "{{ result.users[0].id }}"
    case:
      - when: "{{ event.name == 'step.exit' and response.n > 0 }}"
        then:
          set:
            - {name: total, value: "{{ response.n }}"}
          next: [{step: use}]
  - step: use
    tool:
      kind: python
      args: {first: "{{ vars.first }}", total: "{{ vars.total }}"}
      code: "result = {'seen': [first, total]}"
"""


def test_vars_as_ctx_run_as_the_original(airflow_db, run_dag, tmp_path, monkeypatch) -> None:
    """A step's `vars` as its `set`, a rule's `set` list as its arc's, `vars.x` read as
    `ctx.x`."""
    run = _compare(VARS, {"n": 3}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    assert run.results["use"] == {"seen": [7, 3]}


HTTP_GUARDS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_http_guards, path: tests/upgrade_http_guards}
workload:
  base: ""
  code: 200
workflow:
  - step: start
    tool: {kind: http, method: GET, endpoint: "{{ workload.base }}/status/{{ workload.code }}"}
    case:
      - when: "{{ event.name == 'step.exit' and response is defined and response.status == 201 }}"
        then:
          set:
            - {name: reason, value: "{{ response.reason }}"}
          next: [{step: created}]
      - when: "{{ event.name == 'step.exit' and response.status_code == 200 }}"
        then:
          next: [{step: ok}]
  - step: created
    tool: {kind: python, args: {reason: "{{ vars.reason }}"}, code: "result = {'reason': reason}"}
  - step: ok
    tool: {kind: python, args: {code: "{{ start.status_code }}"}, code: "result = {'code': code}"}
"""


@pytest.mark.parametrize("code, branch", [(201, "created"), (200, "ok")])
def test_http_response_guards_run_as_the_original(
    code, branch, airflow_db, run_dag, http_server, tmp_path, monkeypatch
) -> None:
    """An HTTP step's `response.k` read body first, then the envelope, as case-v2 reads it:
    `response.status` is the body's field (the local API's /status/N answers `{status, reason}`),
    `response.status_code` the envelope's; in a guard and in a rule's `set` list."""
    conf = {"base": http_server, "code": code}
    run = _compare(HTTP_GUARDS, conf, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    done = finished(run)
    assert branch in done and ({"created", "ok"} - {branch}).isdisjoint(done)
    expected = {"created": {"reason": "Created"}, "ok": {"code": 200}}[branch]
    assert run.results[branch] == expected


BODY_FIRST = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_body_first, path: tests/upgrade_body_first}
workload:
  n: 1
workflow:
  - step: start
    tool:
      kind: python
      args: {n: "{{ workload.n }}"}
      code: |
        made = {'data': {'big': int(n) > 5}, 'big': 'envelope'}
        result = made
    case:
      - when: "{{ event.name == 'step.exit' and response.big }}"
        then:
          next: [{step: big}]
      - when: "{{ event.name == 'step.exit' and response.big == false }}"
        then:
          next: [{step: small}]
  - step: big
    tool: {kind: python, code: "result = {'big': True}"}
  - step: small
    tool: {kind: python, code: "result = {'small': True}"}
"""


@pytest.mark.parametrize("n, branch", [(9, "big"), (1, "small")])
def test_a_data_mapping_is_read_body_first_as_the_original(
    n, branch, airflow_db, run_dag, tmp_path, monkeypatch
) -> None:
    """A python result the upgrade cannot see into (`result = made`) is read body first too:
    `response.big` is the `data` mapping's `big`, never the envelope's string."""
    run = _compare(BODY_FIRST, {"n": n}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    done = finished(run)
    assert branch in done and ({"big", "small"} - {branch}).isdisjoint(done)


def _runnable_upgrades() -> list[tuple[str, str]]:
    expectations = _expectations()
    out = []
    for path, upgrade in corpus_upgrades().items():
        runs = _runs(expectations.get(relative(path)) or {})
        if runs and upgrade.writable:
            out += [(relative(path), label) for label in runs]
    return out


# Without the corpus, one placeholder that the corpus mark skips (and counts as not run).
RUNNABLE = _runnable_upgrades() if available() else [("(corpus missing)", "")]


@pytest.mark.corpus
def test_some_corpus_upgrade_runs() -> None:
    assert RUNNABLE, "no runnable corpus playbook is upgraded (is NOETLC_CORPUS set?)"


@pytest.mark.corpus
@pytest.mark.parametrize("rel, label", RUNNABLE)
def test_corpus_upgrade_runs_as_the_original(
    rel, label, airflow_db, run_dag, http_server, tmp_path, monkeypatch, pg_connections, pg_test_dsn
) -> None:
    import psycopg

    entry = _runs(_expectations()[rel])[label]
    assert not entry.get("setup"), "a setup step: run it before each of the two runs"
    text = (CORPUS / rel).read_text(encoding="utf-8")
    conf = runner.substitute(entry.get("conf"), {"http_server": http_server, "tmp": str(tmp_path)})
    runs = []
    for side, body in (("before", text), ("after", upgrade_text(text, rel).text)):
        with psycopg.connect(pg_test_dsn, autocommit=True) as db:
            db.execute(RESET_SQL)  # the same empty database for both runs
        root = tmp_path / side / "corpus"
        monkeypatch.setattr(runner, "CORPUS", root)
        runs.append(run_text(root, rel, body, conf, airflow_db, run_dag, tmp_path / side))
    before, after = runs
    assert before.state == entry.get("state", "success"), before.describe()
    assert_same_run(before, after)


ASYNC = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: upgrade_async, path: tests/upgrade_async}
workflow:
  - step: start
    loop: {in: "{{ [3, 1, 2] }}", iterator: n, mode: async}
    tool: {kind: python, args: {n: "{{ iter.n }}"}, code: "result = {'sq': int(n) * int(n)}"}
    next: [{step: end}]
  - step: end
    tool: {kind: python, args: {r: "{{ start.results }}"}, code: "result = {'seen': len(r)}"}
"""


def test_an_async_loop_runs_as_the_original(airflow_db, run_dag, tmp_path, monkeypatch) -> None:
    """case-v2 `async` written as a canonical `parallel` loop (with its U804 note)."""
    upgrade = upgrade_text(ASYNC, "async.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U804"]
    assert "spec: {mode: parallel}" in upgrade.text
    run = _compare(ASYNC, {}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    assert [r["sq"] for r in run.results["start"]["results"]] == [9, 1, 4]
    assert run.results["end"] == {"seen": 3}


def test_a_v1_iterator_runs_as_the_original(airflow_db, run_dag, tmp_path, monkeypatch) -> None:
    """A v1 `type: iterator` step as a canonical loop step (tests/test_upgrade_rewrites.py holds the
    text)."""
    from tests.test_upgrade_rewrites import V1_ITERATOR

    run = _compare(V1_ITERATOR, {}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    assert [r["twice"] for r in run.results["each"]["results"]] == [2, 4, 6]
    assert run.results["total"] == {"sum": 12}


TWO_KEYS = """\
apiVersion: noetl.io/v1
kind: Playbook
name: upgrade_two_keys
path: tests/upgrade_two_keys
workload: {base: 5}
workflow:
  - step: start
    type: python
    with:
      a: "{{ workload.base }}"
    data:
      b: 3
    code: |
      def main(a, b):
          return {"sum": int(a) + int(b)}
    next:
      - step: end
  - step: end
"""


def test_v1_inputs_under_two_keys_run_as_the_original(
    airflow_db, run_dag, tmp_path, monkeypatch
) -> None:
    """NoETL's v1 worker binds a step's `with` and `data` together; the upgrade writes them as
    one `input` (tests/test_upgrade_rewrites.py holds the text)."""
    run = _compare(TWO_KEYS, {}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    assert run.results["start"] == {"sum": 8}


SECRETS = """\
apiVersion: noetl.io/v1
kind: Playbook
name: upgrade_secrets
path: tests/upgrade_secrets
workflow:
  - step: start
    type: workbook
    task: get_secret_task
    next:
      - step: use
  - step: use
    type: workbook
    task: use_secret_task
    data:
      secret: '{{ start.secret_value }}'
    next:
      - step: end
  - step: end
workbook:
  - name: get_secret_task
    type: secrets
    provider: env
    project_id: some-project
    secret_name: NOETLC_UPGRADE_SECRET
  - name: use_secret_task
    type: python
    data:
      secret: '{{ secret }}'
    code: |
      def main(secret):
          return {"length": len(secret)}
"""


def test_a_v1_secrets_task_runs_as_the_original(airflow_db, run_dag, tmp_path, monkeypatch) -> None:
    """The corpus's secrets tasks (`project_id`, `secret_name`): the same keys in a canonical
    secrets tool, read the same (C516 knows them; the upgrade is written, not U803)."""
    monkeypatch.setenv("NOETLC_UPGRADE_SECRET", "s3cr3t-value")
    upgrade = upgrade_text(SECRETS, "secrets.yaml")
    assert [d.code for d in upgrade.diagnostics] == [], upgrade.diagnostics
    assert "      project_id: some-project\n      secret_name: NOETLC_UPGRADE_SECRET\n" in (
        upgrade.text
    )
    run = _compare(SECRETS, {}, airflow_db, run_dag, tmp_path, monkeypatch)
    assert run.state == "success"
    assert run.results["use"] == {"length": len("s3cr3t-value")}
