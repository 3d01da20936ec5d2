"""A throwaway Airflow 3 deployment on one machine: ``scripts/airflow-stack.sh up|down|status``.

What ``up`` starts, each process in its own session (process group), logs in ``<state>/logs``:

* PostgreSQL 15 on 127.0.0.1 (run as the ``postgres`` user when we are root: it refuses root),
  with the databases ``airflow`` (metadata), ``noetl_events`` (the NoETL event log, given to every
  Airflow process as ``NOETL_EVENTS_URL``) and ``noetl_data`` (what playbooks' postgres
  connections point at: ``--pg-conn NAME`` sets ``AIRFLOW_CONN_<NAME>``, default ``pg_local``);
* ``airflow db migrate``, then ``api-server``, ``scheduler``, ``dag-processor``, ``triggerer``;
* with ``--executor celery``: ``redis-server`` on loopback (the broker) and two
  ``airflow celery worker`` processes with distinct hostnames (result backend: the airflow DB).

SimpleAuthManager with one user, ``admin``, whose password is generated into
``<state>/passwords.json``. The DAG folder is ``noetlc compile playbooks/ -o <state>/dags`` unless
``--dags DIR`` names one. The NoETL plugin (event-log listener) loads through its
``airflow.plugins`` entry point; ``PYTHONPATH`` starts with this checkout's packages (links in
``<state>/python``, not the checkout itself, whose ``noetlc.egg-info`` would be a second copy of
the distribution and load the plugin twice) so every process runs this checkout's
``airflow_plugin``.

``up`` returns when the API server answers ``/api/v2/monitor/health`` with every component
healthy (and, with Celery, both workers say ready); it prints a summary and writes it to
``<state>/stack.json`` (tests read it) and a shell file ``<state>/env`` (``source`` it to run
``airflow`` commands against the stack). ``down`` stops every process group, then any process
still carrying this stack's id in its environment, then the database; it is idempotent.

The settings favour a small test machine: short heartbeats and timeouts so a killed task is
noticed within seconds, a dag-processor that re-lists the folder every few seconds but does not
keep re-parsing unchanged files, and enough executor slots for several concurrent runs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..compat import postgres_driver
from .layout import Layout, StackError, free_port, tail
from .postgres import Postgres, pg_parent_dir
from .processes import alive, recorded_pids, signal_group, spawn, tagged_processes

__all__ = ["StackError", "main", "python_path"]

REPO = Path(__file__).resolve().parents[2]
ADMIN = "admin"
# Besides the admin, a read-only user and one with no role (authenticated, may read no DAG):
# what the NoETL view's authorization is tested with. Their passwords are in the same file.
OTHER_USERS = ("viewer:viewer", "outsider:")
DATABASES = ("airflow", "noetl_events", "noetl_data")
AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
CELERY_WORKERS = ("worker1", "worker2")
WORKER_CONCURRENCY = 4  # task slots of each Celery worker
STOP_GRACE_S = 5.0  # uvicorn (api-server) waits for idle connections on SIGTERM


# ----------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------


def _python() -> str:
    return sys.executable


# A task's supervisor waits for its process in a select() of at most this many seconds
# (Airflow's default 5). When the process's sockets reach EOF before the process can be
# reaped (its exit still tearing it down), the supervisor finds no socket left to wake it
# and sleeps the whole interval: the worker slot stayed taken 5 s after the task ended,
# for about half the tasks of a run on a busy machine (so a mapped task's later instances
# and a DAG's next task waited for a slot). 1 s bounds that; a running task heartbeats
# once a second instead of every 5.
SUPERVISOR_SETTINGS = {"AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1"}


def python_path(layout: Layout, inherited: str | None) -> str:
    """PYTHONPATH of every process: this checkout's packages first, then what the caller had,
    each entry once and the checkout itself left out. An editable install leaves
    ``noetlc.egg-info`` in the checkout: with the checkout on ``sys.path`` that is a second
    ``noetlc`` distribution, Airflow loads the ``airflow.plugins`` entry point of each, and
    every ``airflow`` command warned "Plugin 'noetl' already registered" (and the UI listed it
    as a plugin import error). Links to the two packages carry no distribution metadata."""
    packages = layout.python
    packages.mkdir(parents=True, exist_ok=True)
    for name in ("airflow_plugin", "noetl_compile"):
        link, target = packages / name, REPO / name
        if link.is_symlink() and link.resolve() != target.resolve():
            link.unlink()  # a state folder reused from another checkout
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
    entries = [str(packages)]
    for entry in (inherited or "").split(os.pathsep):
        if not entry or entry in entries or Path(entry).resolve() == REPO.resolve():
            continue
        entries.append(entry)
    return os.pathsep.join(entries)


def _base_env(env_file: Path | None, layout: Layout) -> dict[str, str]:
    env = dict(os.environ)
    # Our checkout first: the stack runs this working tree's compiler and runtime.
    env["PYTHONPATH"] = python_path(layout, env.get("PYTHONPATH"))
    # A caller's Airflow settings (a test's SQLite home...) must not leak into the deployment.
    for key in list(env):
        if key.startswith(("AIRFLOW__", "NOETL_EVENTS")) or key == "AIRFLOW_HOME":
            del env[key]
    # Every task instance is a fresh interpreter importing the runtime: a caller's
    # PYTHONDONTWRITEBYTECODE (a dev shell's, a CI's) made each one compile the checkout's
    # modules from source, ~14% of the task processes' time in the 5,000-item loop bench
    # (bench/deploy.py --loop, py-spy). A deployment keeps its bytecode caches.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if env_file is not None:
        for number, line in enumerate(env_file.read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise StackError(f"{env_file}:{number}: expected KEY=VALUE, got {line!r}")
            env[key.strip()] = value.strip()
    return env


def _airflow_env(
    layout: Layout,
    *,
    executor: str,
    pg: Postgres,
    api_port: int,
    dags: Path,
    jwt_secret: str,
    pg_conns: list[str],
    redis_port: int | None,
    env_file: Path | None,
) -> dict[str, str]:
    base_url = f"http://127.0.0.1:{api_port}"
    # psycopg 3's dialect where the installed SQLAlchemy has it; psycopg2 under Airflow 3.0's
    # SQLAlchemy 1.4 (compat.postgres_driver).
    driver = postgres_driver()
    settings = {
        "AIRFLOW_HOME": str(layout.home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg.url("airflow", driver),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor" if executor == "celery" else "LocalExecutor",
        "AIRFLOW__CORE__AUTH_MANAGER": (
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
        ),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join((f"{ADMIN}:admin", *OTHER_USERS)),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(layout.passwords),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "airflow_plugin.deploy.hostname.worker_hostname",
        # Four concurrent runs of a branching DAG need more than a handful of slots.
        "AIRFLOW__CORE__PARALLELISM": "16",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "16",
        "AIRFLOW__CORE__MAX_ACTIVE_RUNS_PER_DAG": "16",
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__EXPOSE_CONFIG": "False",
        # Step results read back over the REST API (AirflowClient.xcom asks `deserialize=true`):
        # Airflow 3.0 answers that only with this on (400 otherwise); 3.1+ does not ask for it.
        "AIRFLOW__API__ENABLE_XCOM_DESERIALIZE_SUPPORT": "True",
        # Every process signs and checks the same tokens (workers <-> Execution API).
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "AIRFLOW__API__SECRET_KEY": jwt_secret,
        # The tokens' `iss` claim, which Airflow recommends setting. Airflow 3.0 without one signs
        # `iss: []`, and PyJWT 2.10+ refuses to encode that: every login answered 500.
        "AIRFLOW__API_AUTH__JWT_ISSUER": "noetlc-stack",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
        # A task whose process was killed is failed by the scheduler within seconds.
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "15",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        **SUPERVISOR_SETTINGS,
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "60",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "2",
        "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
        # Log servers on free ports: two stacks on one machine must not collide on 8793/8794.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "NOETL_EVENTS_URL": pg.url("noetl_events", driver),
        "NOETL_EVENTS_DIR": str(layout.state / "noetl"),
        "NOETL_STACK_ID": str(layout.state),
    }
    for name in pg_conns:
        variable = "AIRFLOW_CONN_" + "".join(c if c.isalnum() else "_" for c in name).upper()
        settings[variable] = pg.url("noetl_data")
    if executor == "celery":
        settings.update(
            {
                "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
                "AIRFLOW__CELERY__RESULT_BACKEND": pg.url("airflow", f"db+{driver}"),
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(WORKER_CONCURRENCY),
                # What the workers run at once: a big loop's head makes that many mapped
                # instances, one wave of full ones (operators/loop.py, issue 32).
                "AIRFLOW__NOETL__WORKER_SLOTS": str(WORKER_CONCURRENCY * len(CELERY_WORKERS)),
            }
        )
    return {**_base_env(env_file, layout), **settings}


# ----------------------------------------------------------------------------------------------
# up / down / status
# ----------------------------------------------------------------------------------------------


def _run_step(name: str, command: list[str], env: dict[str, str], layout: Layout) -> float:
    started = time.monotonic()
    log = layout.logs / f"{name}.log"
    with log.open("ab") as out:
        done = subprocess.run(
            command, env=env, cwd=layout.state, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if done.returncode != 0:
        raise StackError(f"{name} failed (exit {done.returncode}); {log}:\n{tail(log)}")
    return time.monotonic() - started


def _health(api_port: int) -> dict | None:
    url = f"http://127.0.0.1:{api_port}/api/v2/monitor/health"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _healthy(health: dict | None) -> bool:
    if not health:
        return False
    parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
    return all((health.get(part) or {}).get("status") == "healthy" for part in parts)


def _check_alive(layout: Layout) -> None:
    for name, pid in recorded_pids(layout).items():
        if not alive(pid):
            log = layout.logs / f"{name}.log"
            raise StackError(f"{name} (pid {pid}) exited during start-up; {log}:\n{tail(log)}")


def up(args: argparse.Namespace) -> dict:
    layout = Layout(Path(args.state).resolve())
    if recorded_pids(layout) and any(alive(pid) for pid in recorded_pids(layout).values()):
        raise StackError(f"a stack is already running in {layout.state} (run `down` first)")
    down_quietly(layout)
    for old in (
        layout.home,
        layout.logs,
        layout.pids,
        layout.state / "dags",
        layout.state / "noetl",
    ):
        shutil.rmtree(old, ignore_errors=True)
    for folder in (layout.home, layout.logs, layout.pids):
        folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    executor = args.executor
    if executor == "celery" and not shutil.which("redis-server"):
        raise StackError("--executor celery needs redis-server (apt-get install redis-server)")

    pg_dir = pg_parent_dir(layout)
    pg = Postgres(
        # Next to the data, where the postgres user can write; `down` copies it into logs/.
        data_dir=pg_dir / "data",
        log_file=pg_dir / "server.log",
        port=args.pg_port or free_port(),
    )
    api_port = args.port or free_port()
    redis_port = free_port() if executor == "celery" else None
    manifest = {
        "state": str(layout.state),
        "executor": executor,
        "pg_data": str(pg.data_dir),
        "pg_port": pg.port,
    }
    layout.manifest.write_text(json.dumps(manifest, indent=2) + "\n")  # for `down` if we fail

    dags = Path(args.dags).resolve() if args.dags else layout.state / "dags"
    env = _airflow_env(
        layout,
        executor=executor,
        pg=pg,
        api_port=api_port,
        dags=dags,
        jwt_secret=secrets.token_urlsafe(64),
        pg_conns=args.pg_conn or ["pg_local"],
        redis_port=redis_port,
        env_file=Path(args.env_file) if args.env_file else None,
    )
    # Our own password for the one user: Airflow keeps a file's existing entries.
    password = secrets.token_urlsafe(12)
    layout.passwords.write_text(json.dumps({ADMIN: password}) + "\n")
    layout.passwords.chmod(0o600)

    # Compile while the database initialises (two cores: the compiler is mostly waiting on I/O
    # less than initdb is, but overlapping still saves a second or two).
    compile_proc = None
    playbooks = [str(Path(p).resolve()) for p in args.playbooks or [REPO / "playbooks"]]
    if not args.dags:
        compile_log = (layout.logs / "compile.log").open("ab")
        compile_proc = subprocess.Popen(
            [_python(), "-m", "noetl_compile.cli", "compile", *playbooks, "-o", str(dags)],
            env=env,
            cwd=REPO,
            stdout=compile_log,
            stderr=subprocess.STDOUT,
        )
        compile_log.close()
    elif not dags.is_dir():
        raise StackError(f"--dags {dags}: not a folder")

    started = time.monotonic()
    pg.init_and_start()
    pg.create_databases(DATABASES)
    timings["postgres_s"] = time.monotonic() - started
    if redis_port is not None:
        redis_dir = layout.state / "redis"
        redis_dir.mkdir(exist_ok=True)
        spawn(
            layout,
            "redis",
            ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", "",
             "--appendonly", "no", "--dir", str(redis_dir)],
            env,
        )  # fmt: skip

    timings["migrate_s"] = _run_step(
        "db-migrate", [_python(), "-m", "airflow", "db", "migrate"], env, layout
    )
    if compile_proc is not None and compile_proc.wait() != 0:
        log = layout.logs / "compile.log"
        raise StackError(f"noetlc compile {' '.join(playbooks)} failed; {log}:\n{tail(log)}")

    airflow = [_python(), "-m", "airflow"]
    spawn(layout, "api-server", [*airflow, "api-server", "--port", str(api_port)], env)
    spawn(layout, "scheduler", [*airflow, "scheduler"], env)
    spawn(layout, "dag-processor", [*airflow, "dag-processor"], env)
    spawn(layout, "triggerer", [*airflow, "triggerer"], env)
    if executor == "celery":
        for name in CELERY_WORKERS:
            spawn(
                layout,
                name,
                [*airflow, "celery", "worker", "--concurrency", str(WORKER_CONCURRENCY),
                 "--celery-hostname",
                 f"{name}@%h", "--skip-serve-logs", "--without-mingle", "--without-gossip"],
                {**env, "NOETL_WORKER_HOSTNAME": f"{name}.{socket.gethostname()}"},
            )  # fmt: skip

    started = time.monotonic()
    deadline = started + args.timeout
    while True:
        _check_alive(layout)
        health = _health(api_port)
        workers_ready = executor != "celery" or all(
            " ready." in tail(layout.logs / f"{name}.log", 400) for name in CELERY_WORKERS
        )
        if _healthy(health) and workers_ready:
            break
        if time.monotonic() > deadline:
            raise StackError(
                f"the stack was not healthy after {args.timeout:.0f} s; health: {health}; "
                f"logs in {layout.logs}"
            )
        time.sleep(0.5)
    timings["components_s"] = time.monotonic() - started
    timings["total_s"] = time.monotonic() - t0

    manifest.update(
        {
            "api_url": f"http://127.0.0.1:{api_port}",
            "api_port": api_port,
            "user": ADMIN,
            "password_file": str(layout.passwords),
            "airflow_home": str(layout.home),
            "dags_folder": str(dags),
            "logs": str(layout.logs),
            "airflow_db_url": pg.url("airflow"),
            "events_url": pg.url("noetl_events"),
            "data_url": pg.url("noetl_data"),
            "pg_conns": args.pg_conn or ["pg_local"],
            "redis_url": f"redis://127.0.0.1:{redis_port}/0" if redis_port else None,
            "celery_workers": (
                [f"{name}.{socket.gethostname()}" for name in CELERY_WORKERS]
                if executor == "celery"
                else []
            ),
            "pids": recorded_pids(layout),
            "timings": {key: round(value, 2) for key, value in timings.items()},
        }
    )
    layout.manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    _write_env_file(layout, env)
    return manifest


def _write_env_file(layout: Layout, env: dict[str, str]) -> None:
    keys = [k for k in env if k.startswith(("AIRFLOW", "NOETL_", "PYTHONPATH"))]
    lines = [f"export {key}={_shell_quote(env[key])}" for key in sorted(keys)]
    layout.env_file.write_text("\n".join(lines) + "\n")
    layout.env_file.chmod(0o600)


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def down_quietly(layout: Layout) -> list[str]:
    """Stop whatever of this stack still runs; returns what was stopped."""
    stopped = []
    pids = recorded_pids(layout)
    for name, pid in pids.items():
        if alive(pid):
            signal_group(pid, signal.SIGTERM)
            stopped.append(name)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(alive(pid) for pid in pids.values()):
        time.sleep(0.2)
    for pid in pids.values():
        signal_group(pid, signal.SIGKILL)
    # Task processes and executor workers may have left their group: find them by the stack id.
    for pid in tagged_processes(str(layout.state)):
        try:
            os.kill(pid, signal.SIGKILL)
            stopped.append(f"pid {pid}")
        except ProcessLookupError:
            pass
    for path in layout.pids.glob("*.pid") if layout.pids.is_dir() else ():
        path.unlink()
    manifest = layout.read_manifest()
    if manifest.get("pg_data"):
        data_dir = Path(manifest["pg_data"])
        pg = Postgres(data_dir=data_dir, log_file=data_dir.parent / "server.log", port=0)
        if (data_dir / "postmaster.pid").exists():
            pg.stop()
            stopped.append("postgres")
        if pg.log_file.exists() and layout.logs.is_dir():
            shutil.copyfile(pg.log_file, layout.logs / "postgres.log")
        # The database is throwaway: the next `up` starts a fresh one.
        shutil.rmtree(data_dir.parent, ignore_errors=True)
    return stopped


def status(layout: Layout) -> dict[str, bool]:
    found = {name: alive(pid) for name, pid in recorded_pids(layout).items()}
    manifest = layout.read_manifest()
    if manifest.get("pg_data"):
        pid_file = Path(manifest["pg_data"]) / "postmaster.pid"
        try:
            found["postgres"] = alive(int(pid_file.read_text().splitlines()[0]))
        except (OSError, ValueError, IndexError):
            found["postgres"] = False
    return found


def _summary(manifest: dict) -> str:
    t = manifest["timings"]
    lines = [
        (
            f"Airflow stack up ({manifest['executor']} executor) in {t['total_s']:.1f} s "
            f"(postgres {t['postgres_s']:.1f} s, db migrate {t['migrate_s']:.1f} s, "
            f"components healthy {t['components_s']:.1f} s)"
        ),
        (
            f"  API/UI:        {manifest['api_url']}  (user {manifest['user']}, password in "
            f"{manifest['password_file']})"
        ),
        f"  metadata DB:   {manifest['airflow_db_url']}",
        f"  event log:     {manifest['events_url']}",
        f"  playbook data: {manifest['data_url']}  (connections: {', '.join(manifest['pg_conns'])})",
        f"  DAG folder:    {manifest['dags_folder']}",
        f"  logs:          {manifest['logs']}",
        f"  environment:   source {Path(manifest['state']) / 'env'}",
    ]
    if manifest.get("redis_url"):
        lines.append(
            f"  broker:        {manifest['redis_url']}  workers: {manifest['celery_workers']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-stack.sh", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--executor", choices=("local", "celery"), default="local")
    parser.add_argument(
        "--state",
        default=os.environ.get("NOETL_STACK_DIR") or str(REPO / ".stack"),
        help="state folder (default $NOETL_STACK_DIR or <repo>/.stack)",
    )
    parser.add_argument("--dags", help="DAG folder to deploy (default: compile --playbooks)")
    parser.add_argument(
        "--playbooks",
        action="append",
        help="playbook files or folders to compile into <state>/dags (repeatable; default "
        "<repo>/playbooks); ignored with --dags",
    )
    parser.add_argument("--port", type=int, default=0, help="API server port (default: a free one)")
    parser.add_argument("--pg-port", type=int, default=0, help="Postgres port (default: free)")
    parser.add_argument(
        "--pg-conn",
        action="append",
        help="Airflow connection name pointing at the stack's noetl_data DB (repeatable; "
        "default pg_local)",
    )
    parser.add_argument("--env-file", help="KEY=VALUE lines added to every Airflow process")
    parser.add_argument("--timeout", type=float, default=240, help="seconds `up` may take")
    args = parser.parse_args(argv)
    layout = Layout(Path(args.state).resolve())
    try:
        if args.command == "up":
            try:
                manifest = up(args)
            except BaseException:
                down_quietly(layout)
                raise
            print(_summary(manifest))
            print(f"  stack.json:    {layout.manifest}")
        elif args.command == "down":
            stopped = down_quietly(layout)
            print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        else:
            found = status(layout)
            if not found:
                print(f"no stack in {layout.state}")
                return 1
            for name, alive in found.items():
                print(f"{name:14} {'alive' if alive else 'dead'}")
            # A live pid is not a working component (a scheduler stuck in its shutdown still
            # has one): what the API server says of each heartbeat, too.
            healthy = True
            port = layout.read_manifest().get("api_port")
            if port and found.get("api-server"):
                health = _health(port) or {}
                for part in ("scheduler", "triggerer", "dag_processor"):
                    state = (health.get(part) or {}).get("status") or "unknown"
                    healthy = healthy and state == "healthy"
                    print(f"{part + ' health':24} {state}")
            if layout.read_manifest().get("api_url"):
                print(f"{'API/UI':24} {layout.read_manifest()['api_url']}")
            return 0 if all(found.values()) and healthy else 1
    except StackError as error:
        print(f"airflow-stack: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
