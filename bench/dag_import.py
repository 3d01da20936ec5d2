"""Import time of the generated DAG files vs dag-factory building the same DAG shapes.

For every corpus playbook `check` accepts (plus our playbooks/), this writes the noetlc DAG
file and an equivalent dag-factory config (same dag ids, task ids, operators, payloads and
dependencies; task groups flattened, mapped tasks through dag-factory's partial/expand) with
the one-line loader dag-factory users keep in dags/. Each file is then imported in a process
forked from a parent that has already run `import airflow`, as the DAG processor does:

* cold: the parent imported only `airflow`;
* warm: the parent also imported the modules the DAG files import (`airflow.sdk`, the plugin's
  operators, `dagfactory`), as `[dag_processor] parsing_pre_import_modules` does.

Prints median, p95 and max per side and the dag-factory / noetlc ratio of the medians.
Target: noetlc median <= 20 ms.

dag-factory is a bench-only dependency; install it next to (not into) the project, e.g.
    pip install --no-deps --target .bench-dagfactory dag-factory
and pass that folder with --dagfactory DIR (or NOETLC_BENCH_DAGFACTORY); its own
requirements (pyyaml, packaging, pathspec, typer) come with Airflow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MS = 20.0
FLOOR_DAG = """\
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

with DAG(dag_id="floor", schedule=None, catchup=False) as dag:
    EmptyOperator(task_id="only")
"""


def build(out: Path, with_dagfactory: bool) -> tuple[list[Path], list[Path]]:
    import yaml

    from noetl_compile.check import check_paths
    from noetl_compile.compile import compile_result
    from tests.corpus import CORPUS

    results, _ = check_paths([str(CORPUS), str(ROOT / "playbooks")])
    noetlc_files, df_files = [], []
    (out / "noetlc").mkdir(parents=True)
    (out / "dagfactory").mkdir(parents=True)
    for index, result in enumerate(results):
        if result.has_errors or result.playbook is None:
            continue
        text, ir = compile_result(result, result.path)
        target = out / "noetlc" / f"dag_{index:04d}.py"
        target.write_text(text, encoding="utf-8")
        noetlc_files.append(target)
        if with_dagfactory:
            config = out / "dagfactory" / f"dag_{index:04d}.yml"
            config.write_text(
                yaml.safe_dump(dagfactory_config(ir), sort_keys=False), encoding="utf-8"
            )
            loader = out / "dagfactory" / f"dag_{index:04d}.py"
            loader.write_text(
                "from dagfactory import load_yaml_dags\n\n"
                f"load_yaml_dags(globals_dict=globals(), config_filepath={str(config)!r})\n"
            )
            df_files.append(loader)
    return noetlc_files, df_files


def dagfactory_config(ir) -> dict:
    """The same DAG shape as the noetlc file, as a dag-factory YAML config."""
    tasks: dict[str, dict] = {}
    exit_of = {u.id: u.result_task.replace(".", "__") for u in ir.units}
    for unit in ir.units:
        for task in unit.tasks:
            task_id = unit.full_id(task.task_id).replace(".", "__")
            conf: dict = {"operator": f"{task.module}.{task.operator}"}
            kwargs = {"payload": unit.payload, "reads": unit.reads, **task.kwargs}
            if unit.full_id(task.task_id) == unit.entry_task:
                deps = [exit_of[up] for up in unit.upstream]
                if unit.trigger_rule:
                    kwargs["trigger_rule"] = unit.trigger_rule
            else:
                deps = [unit.full_id(up).replace(".", "__") for up in task.upstream]
            if task.trigger_rule:
                kwargs["trigger_rule"] = task.trigger_rule
            if task.mapped:
                conf["partial"] = kwargs
                conf["expand"] = {
                    k: f"{unit.full_id(v).replace('.', '__')}.output"
                    for k, v in task.mapped.items()
                }
            else:
                conf.update(kwargs)
            if deps:
                conf["dependencies"] = deps
            tasks[task_id] = conf
    return {
        ir.dag_id: {
            "default_args": {"owner": "noetl"},
            "schedule": None,
            "catchup": False,
            "params": ir.params,
            "tags": ir.tags,
            "tasks": tasks,
        }
    }


def measure(files: list[Path], preload: list[str]) -> tuple[list[float], int]:
    """Import each file in a child forked from this (already warmed) process, its heap frozen
    as Airflow's DAG processor freezes it (bench/fork_import.py) -> (wall times, failures)."""
    from bench.fork_import import import_each

    done = import_each(files, preload)
    return [wall for wall, _, _ in done], sum(not ok for _, _, ok in done)


def summary(timings: list[float]) -> dict[str, float]:
    ordered = sorted(timings)
    return {
        "median": 1000 * statistics.median(ordered),
        "p95": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        "max": 1000 * ordered[-1],
    }


def run_side(files: list[Path], preload: list[str]) -> dict:
    """Measure in a fresh interpreter so cold/warm preloads do not leak between runs."""
    import subprocess

    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from bench.dag_import import measure; "
        "t, f = measure([__import__('pathlib').Path(p) for p in json.loads(sys.argv[2])], json.loads(sys.argv[3])); "
        "print(json.dumps({'timings': t, 'failures': f}))"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(ROOT),
            json.dumps([str(f) for f in files]),
            json.dumps(preload),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dagfactory",
        default=os.environ.get("NOETLC_BENCH_DAGFACTORY"),
        help="folder where dag-factory is installed (pip --target)",
    )
    args = parser.parse_args()
    if args.dagfactory:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [args.dagfactory, os.environ.get("PYTHONPATH")])
        )
        sys.path.insert(0, args.dagfactory)
    try:
        import dagfactory  # noqa: F401

        have_df = True
    except ImportError:
        have_df = False
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "airflow"
        home.mkdir()
        os.environ.update(
            AIRFLOW_HOME=str(home),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
            DAG_FACTORY_SCARF_ANALYTICS_ENABLED="False",
            AIRFLOW__DAG_FACTORY__SCARF_ANALYTICS_ENABLED="False",
        )
        noetlc_files, df_files = build(Path(tmp) / "out", have_df)
        floor = Path(tmp) / "out" / "floor.py"  # the least any DAG file costs: one empty task
        floor.write_text(FLOOR_DAG, encoding="utf-8")
        # Warm: what a DAG processor has loaded before it parses a file (the same for all sides).
        warm = [
            "airflow",
            "airflow.sdk",
            "airflow.providers.standard.operators.empty",
            *[
                f"airflow_plugin.operators.{m}"
                for m in ("step", "loop", "region", "cursor", "nested", "gates", "outcome")
            ],
            *(["dagfactory"] if have_df else []),
        ]
        sides = {
            "floor cold": run_side([floor] * 20, ["airflow"]),
            "floor warm": run_side([floor] * 20, warm),
            "noetlc cold": run_side(noetlc_files, ["airflow"]),
            "noetlc warm": run_side(noetlc_files, warm),
        }
        if have_df:
            sides["dag-factory cold"] = run_side(df_files, ["airflow"])
            sides["dag-factory warm"] = run_side(df_files, warm)
    print(
        f"{len(noetlc_files)} DAG files (corpus playbooks accepted by check + playbooks/), "
        "each imported in a process forked after `import airflow`; floor = a hand-written "
        "one-task DAG file"
    )
    stats = {}
    for name, side in sides.items():
        stats[name] = summary(side["timings"])
        s = stats[name]
        print(
            f"  {name:17s} median {s['median']:7.2f} ms   p95 {s['p95']:7.2f} ms   max {s['max']:7.2f} ms"
            f"   ({side['failures']} files built no DAG)"
        )
    for mode in ("cold", "warm"):
        if f"dag-factory {mode}" in stats:
            ratio = stats[f"dag-factory {mode}"]["median"] / stats[f"noetlc {mode}"]["median"]
            print(f"  {mode}: dag-factory / noetlc median import time = {ratio:.1f}x")
    if not have_df:
        print(
            "  dag-factory not installed: see this script's docstring for the side-by-side numbers"
        )
    met = stats["noetlc warm"]["median"] <= TARGET_MS
    print(f"target: noetlc median <= {TARGET_MS:.0f} ms (warm): {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
