"""``scripts/airflow-stack.sh`` without a running stack: usage, status and down of nothing."""

from __future__ import annotations

from .conftest import stack_script


def test_down_of_a_stack_that_never_ran_is_a_no_op(tmp_path) -> None:
    done = stack_script("down", "--state", str(tmp_path / "none"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped: nothing was running"


def test_status_without_a_stack_fails(tmp_path) -> None:
    done = stack_script("status", "--state", str(tmp_path / "none"), timeout=60)
    assert done.returncode == 1
    assert "no stack in" in done.stdout


def test_bad_usage_and_bad_env_file_are_reported(tmp_path) -> None:
    done = stack_script("start", timeout=60)
    assert done.returncode == 2 and "invalid choice: 'start'" in done.stderr
    env_file = tmp_path / "stack.env"
    env_file.write_text("# comment\nAIRFLOW_CONN_X=postgresql://u@h/db\nnot a setting\n")
    done = stack_script(
        "up", "--state", str(tmp_path / "s"), "--env-file", str(env_file), timeout=120
    )
    assert done.returncode == 1
    assert f"{env_file}:3: expected KEY=VALUE, got 'not a setting'" in done.stderr
