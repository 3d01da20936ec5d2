"""Tool pipelines and ``spec.policy.rules`` (noetl_dsl.md section 1c)."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.pipeline import backoff_delay, run_pipeline
from airflow_plugin.templating.context import build_context


def py(code, name=None, rules=None, **extra):
    task = {"kind": "python", "code": code, **extra}
    if name:
        task["name"] = name
    if rules is not None:
        task["spec"] = {"policy": {"rules": rules}}
    return task


def flaky(counter_file, fail_times, name="flaky", rules=None):
    """A python task that raises on its first ``fail_times`` runs (state kept in a file)."""
    code = (
        "from pathlib import Path\n"
        "p = Path(counter)\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "if n <= fail_times:\n"
        "    raise ConnectionError(f'attempt {n} failed')\n"
        "result = {'attempts': n}\n"
    )
    return py(
        code, name=name, rules=rules, input={"counter": str(counter_file), "fail_times": fail_times}
    )


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


def run(tasks, sleeps=None, **context):
    return run_pipeline(
        tasks, build_context(**context), step="s", sleep=sleeps if sleeps is not None else Sleeps()
    )


# -- defaults -----------------------------------------------------------------------------------


def test_tasks_run_in_order_with_prev_and_results():
    tasks = [
        py("result = {'id': 1, 'items': [1, 2]}", name="first"),
        py(
            "result = {'id': prev_id + 1, 'n': n}",
            name="second",
            input={"prev_id": "{{ _prev.id }}", "n": "{{ first.items | length }}"},
        ),
        py(
            "result = {'total': a + b}",
            input={"a": "{{ results.first.id }}", "b": "{{ _prev.data.id }}"},
        ),
    ]
    out = run(tasks)
    assert out.status == "ok"
    assert out.result["results"] == {
        "first": {"id": 1, "items": [1, 2]},
        "second": {"id": 2, "n": 2},
        "task_2": {"total": 3},  # unnamed task label
    }
    # step result: last task's dict merged on top of {status, _prev, results}
    assert out.result["total"] == 3
    assert out.result["status"] == "ok"
    assert out.result["_prev"] == {"total": 3}


def test_no_rules_error_fails_the_pipeline_and_stops():
    out = run([py("raise KeyError('k')", name="a"), py("result = 1", name="b")])
    assert out.status == "failed"
    assert out.error["type"] == "KeyError"
    assert "b" not in out.result["results"]
    assert out.result["results"]["a"]["status"] == "error"


def test_unmatched_rules_fall_back_to_defaults():
    rules = [{"when": "{{ output.status == 'nothing' }}", "then": {"do": "break"}}]
    ok = run([py("result = 1", rules=rules), py("result = 2", name="next")])
    assert ok.status == "ok" and ok.result["results"]["next"] == 2
    bad = run([py("raise ValueError()", rules=rules)])
    assert bad.status == "failed"


# -- retry --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backoff", "delay", "expected"),
    [
        ("exponential", 0.5, [0.5, 1.0, 2.0]),
        ("linear", 0.5, [0.5, 1.0, 1.5]),
        ("fixed", 0.5, [0.5, 0.5, 0.5]),
        ("anything", 2, [2.0, 2.0, 2.0]),
        ("none", 5, []),
    ],
)
def test_retry_until_success_with_backoff(tmp_path, sleeps, backoff, delay, expected):
    rules = [
        {
            "when": "{{ output.status == 'error' }}",
            "then": {"do": "retry", "attempts": 5, "backoff": backoff, "delay": delay},
        },
        {"else": {"then": {"do": "continue"}}},
    ]
    out = run([flaky(tmp_path / "n", 3, rules=rules)], sleeps)
    assert out.status == "ok"
    assert out.result["attempts"] == 4  # 3 failures + 1 success
    assert list(sleeps) == expected
    assert [t["attempt"] for t in out.trace] == [1, 2, 3, 4]


def test_retry_default_attempts_is_three_total_then_fail(tmp_path, sleeps):
    rules = [{"when": "{{ output.status == 'error' }}", "then": {"do": "retry", "delay": 0.1}}]
    out = run([flaky(tmp_path / "n", 10, rules=rules)], sleeps)
    assert out.status == "failed"
    assert (tmp_path / "n").read_text() == "3"
    assert out.error["type"] == "ConnectionError" and out.error["attempts"] == 3
    assert list(sleeps) == [0.1, 0.1]  # no wait after the last attempt


def test_retry_sees_attempt_and_error(tmp_path, sleeps):
    rules = [
        {
            "when": "{{ error.type == 'ConnectionError' and _attempt < 2 }}",
            "then": {"do": "retry", "backoff": "none"},
        },
        {"when": "{{ output.py.exception == 'ConnectionError' }}", "then": {"do": "continue"}},
    ]
    out = run([flaky(tmp_path / "n", 10, rules=rules), py("result = 'after'", name="b")], sleeps)
    assert out.status == "ok"
    assert (tmp_path / "n").read_text() == "2"
    assert out.result["results"]["flaky"]["status"] == "error"
    # A failed python task's result is NoETL's error document: the exception text in `error`.
    assert out.result["results"]["flaky"]["error"] == "attempt 2 failed"
    assert out.result["results"]["b"] == "after"


def test_success_side_retry_exhausts_into_failure(sleeps):
    rules = [
        {
            "when": "{{ output.data.pending }}",
            "then": {"do": "retry", "attempts": 2, "backoff": "none"},
        }
    ]
    out = run([py("result = {'pending': True}", rules=rules)], sleeps)
    assert out.status == "failed"
    assert out.error["type"] == "RetryExhausted"


@pytest.mark.parametrize(
    ("backoff", "attempt", "expected"),
    [
        ("none", 3, 0.0),
        ("linear", 3, 3.0),
        ("exponential", 3, 4.0),
        ("fixed", 3, 1.0),
        (None, 1, 1.0),
    ],
)
def test_backoff_delay(backoff, attempt, expected):
    assert backoff_delay(backoff, 1.0, attempt) == expected


# -- break / jump / fail ------------------------------------------------------------------------


def test_break_stops_with_status_break():
    rules = [{"when": "{{ output.data.done }}", "then": {"do": "break"}}]
    out = run([py("result = {'done': True}", name="a", rules=rules), py("result = 1", name="b")])
    assert out.status == "break"
    assert list(out.result["results"]) == ["a"]


def test_fail_rule_fails_on_success():
    rules = [{"when": "{{ output.data.rows == 0 }}", "then": {"do": "fail"}}]
    out = run([py("result = {'rows': 0}", rules=rules)])
    assert out.status == "failed"
    assert out.error["type"] == "PolicyFail"


def test_jump_loops_with_iter_scope():
    tasks = [
        py(
            "result = {'n': n + 1}",
            name="inc",
            input={"n": "{{ iter.n | default(0) }}"},
            rules=[
                {"else": {"then": {"do": "continue", "set": {"iter.n": "{{ output.data.n }}"}}}}
            ],
        ),
        py(
            "result = {'seen': n}",
            name="check",
            input={"n": "{{ iter.n }}"},
            rules=[{"when": "{{ output.data.seen < 3 }}", "then": {"do": "jump", "to": "inc"}}],
        ),
    ]
    out = run(tasks)
    assert out.status == "ok"
    assert out.result["seen"] == 3
    assert [t["task"] for t in out.trace] == ["inc", "check"] * 3
    assert out.iter_scope["n"] == 3
    assert out.ctx_writes == {}  # iter.* stays pipeline-local


def test_jump_to_previous():
    tasks = [
        py("result = {'n': n}", name="a", input={"n": "{{ iter.k | default(0) }}"}),
        py(
            "result = 1",
            name="b",
            rules=[
                {
                    "when": "{{ a.n < 1 }}",
                    "then": {"do": "jump", "to": "previous", "set": {"iter.k": 1}},
                }
            ],
        ),
    ]
    out = run(tasks)
    assert [t["task"] for t in out.trace] == ["a", "b", "a", "b"]


def test_jump_to_unknown_label_fails():
    out = run([py("result = 1", rules=[{"else": {"then": {"do": "jump", "to": "nowhere"}}}])])
    assert out.status == "failed" and "nowhere" in out.error["message"]


# -- set scopes ---------------------------------------------------------------------------------


def test_set_ctx_is_returned_and_visible_to_later_tasks():
    tasks = [
        py(
            "result = {'count': 4}",
            name="a",
            rules=[
                {
                    "else": {
                        "then": {
                            "do": "continue",
                            "set": {
                                "ctx.total": "{{ output.data.count }}",
                                "step.label": "x",
                                "plain": True,
                                "iter.local": 1,
                            },
                        }
                    }
                }
            ],
        ),
        py(
            "result = [t, t2, l, loc]",
            name="b",
            input={
                "t": "{{ ctx.total }}",
                "t2": "{{ total }}",
                "l": "{{ label }}",
                "loc": "{{ iter.local }}",
            },
        ),
    ]
    out = run(tasks, workload={"total": 0})
    assert out.ctx_writes == {"total": 4, "label": "x", "plain": True}
    assert out.iter_scope == {"local": 1}
    assert out.result["results"]["b"] == [4, 4, "x", 1]


def test_tasks_see_step_context():
    out = run(
        [py("result = v", input={"v": "{{ workload.base }}-{{ execution_id }}"})],
        workload={"base": "b"},
        execution_id=9,
    )
    assert out.result["results"]["task_0"] == "b-9"
