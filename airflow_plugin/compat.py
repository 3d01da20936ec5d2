"""Every difference between the Airflow versions the runtime supports (3.1, 3.2, 3.3; 3.0 without
human-in-the-loop gates), in one place.

The rest of the package imports Airflow names that moved between versions from here, and asks
here what a version can do; no other module probes Airflow's version (tests/test_compat.py checks
that). Names are resolved on first use (module ``__getattr__``), so importing this module never
imports Airflow: the hooks import it and still work without Airflow.

| what | 3.3 / 3.2 | 3.1 / 3.0 |
|---|---|---|
| ``AirflowFailException``, ``AirflowException``, ``AirflowSkipException``, ``DownstreamTasksSkipped`` | ``airflow.sdk.exceptions`` | ``airflow.exceptions`` |
| ``conf`` | ``airflow.sdk.conf`` | ``airflow.configuration.conf`` |
| ``timezone`` | ``airflow.sdk.timezone`` | ``airflow.sdk.timezone`` (3.1), ``airflow.utils.timezone`` (3.0) |
| a paused child of a nested call | ``TriggerDagRunOperator(fail_when_dag_is_paused=True)`` | the operator checks it itself (:func:`paused_check_builtin`) |
| ``import_string`` | ``airflow.sdk._shared.module_loading`` | ``airflow.utils.module_loading`` |
| ``DagSerialization``, ``ParamValidationError`` | as named | ``SerializedDAG``; ``airflow.exceptions`` |
| a bundle's bag and its sync to the DB | ``airflow.dag_processing.dagbag`` | ``airflow.models.dagbag`` (3.1), ``DagBag.sync_to_db`` (3.0) |
| a deferral's trigger kwargs, a resumed one's ``next_kwargs`` | serde-serialized | as they are |
| ``dag.test()``'s ``_run_task``, ``create_dagrun`` | ``task=``, ``triggering_user_name=`` | the same on 3.1; ``ti.task``, no user on 3.0 |
| an approve gate's request params | none (``HITLOperator`` filters the DAG's by source) | the DAG's on 3.1: the approval operator sends none on every version |
| a parked approve/input gate | ``awaiting_input`` (3.3), deferred to ``HITLTrigger`` (3.2, 3.1) | none on 3.0 (:func:`hitl_gates`) |
| a deployment's waiting gates, by its API server's version | :func:`gate_wait_states` | the same |
| a Variable or Connection read outside a task process (tests, the listener, the CLI) | the task SDK's lookup | the same on 3.1; Airflow core's on 3.0 (:func:`get_variable`, :func:`get_connection`) |
| the SQLAlchemy driver of a Postgres URL (the stack, the event log) | ``postgresql+psycopg`` (SQLAlchemy 2) | the same on 3.1; ``postgresql+psycopg2`` on 3.0 (SQLAlchemy 1.4: :func:`postgres_driver`) |
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

__all__ = [
    "airflow_version",
    "awaiting_input_state",
    "bundle_dag_bag",
    "dag_is_paused",
    "gate_wait_states",
    "get_connection",
    "get_variable",
    "hitl_gates",
    "hitl_operators",
    "in_process_comms",
    "is_hitl_trigger",
    "mask_secret",
    "masker_redact",
    "paused_check_builtin",
    "postgres_driver",
    "resume_kwargs",
    "run_test_task",
    "run_user",
    "sync_bag",
    "trigger_kwargs",
    "version_text",
]

# name -> where it lives, newest first. The first module that imports and has it wins.
_MOVED: dict[str, tuple[tuple[str, str], ...]] = {
    "AirflowFailException": (
        ("airflow.sdk.exceptions", "AirflowFailException"),
        ("airflow.exceptions", "AirflowFailException"),
    ),
    "AirflowException": (
        ("airflow.sdk.exceptions", "AirflowException"),
        ("airflow.exceptions", "AirflowException"),
    ),
    "AirflowSkipException": (
        ("airflow.sdk.exceptions", "AirflowSkipException"),
        ("airflow.exceptions", "AirflowSkipException"),
    ),
    "DownstreamTasksSkipped": (
        ("airflow.sdk.exceptions", "DownstreamTasksSkipped"),
        ("airflow.exceptions", "DownstreamTasksSkipped"),
    ),
    "AirflowRuntimeError": (("airflow.sdk.exceptions", "AirflowRuntimeError"),),
    "ErrorType": (("airflow.sdk.exceptions", "ErrorType"),),
    "AirflowNotFoundException": (
        ("airflow.sdk.exceptions", "AirflowNotFoundException"),
        ("airflow.exceptions", "AirflowNotFoundException"),
    ),
    "conf": (("airflow.sdk", "conf"), ("airflow.configuration", "conf")),
    "timezone": (("airflow.sdk", "timezone"), ("airflow.utils", "timezone")),
    "import_string": (
        ("airflow.sdk._shared.module_loading", "import_string"),
        ("airflow.utils.module_loading", "import_string"),
    ),
    "DagSerialization": (
        ("airflow.serialization.serialized_objects", "DagSerialization"),
        ("airflow.serialization.serialized_objects", "SerializedDAG"),
    ),
    "ParamValidationError": (
        ("airflow.sdk.exceptions", "ParamValidationError"),
        ("airflow.exceptions", "ParamValidationError"),
    ),
    # Present from providers-standard's 1.x on every supported Airflow; named here with the
    # operator that raises it.
    "DagIsPaused": (("airflow.providers.standard.operators.trigger_dagrun", "DagIsPaused"),),
}


def _find(name: str) -> Any:
    for module_name, attr in _MOVED[name]:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, attr):
            return getattr(module, attr)
    places = ", ".join(f"{m}.{a}" for m, a in _MOVED[name])
    raise ImportError(f"Airflow {version_text()} has no {name} (looked in {places})")


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _find(name)
    globals()[name] = value  # resolved once per process
    return value


@functools.cache
def version_text() -> str:
    """The installed Airflow's version ("3.1.8"), or "none" without Airflow."""
    try:
        from airflow import __version__
    except ImportError:
        return "none"
    return str(__version__)


def airflow_version() -> tuple[int, int]:
    """(major, minor) of the installed Airflow; (0, 0) without it."""
    parts = version_text().split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return (0, 0)


def paused_check_builtin() -> bool:
    """Whether ``TriggerDagRunOperator(fail_when_dag_is_paused=True)`` works: it asks the task
    SDK's DAG endpoint, added in Airflow 3.2 (on 3.1 the provider refuses the flag with
    ``NotImplementedError``). Where it does not, the nested-call operator looks at the child's
    ``DagModel`` itself before triggering (:func:`dag_is_paused`)."""
    return airflow_version() >= (3, 2)


def dag_is_paused(dag_id: str) -> bool | None:
    """The child DAG's ``is_paused`` read from the metadata database, for Airflow < 3.2 where
    the task SDK cannot ask; None when the DAG has no row (not deployed)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        model = session.get(DagModel, dag_id)
        return None if model is None else bool(model.is_paused)


def awaiting_input_state() -> Any:
    """``TaskInstanceState.AWAITING_INPUT`` (Airflow 3.3: a HITL task parks there), or None where
    a HITL task defers to ``HITLTrigger`` instead (3.1, 3.2)."""
    from airflow.utils.state import TaskInstanceState

    return getattr(TaskInstanceState, "AWAITING_INPUT", None)


HITL_TRIGGER = "airflow.providers.standard.triggers.hitl.HITLTrigger"


def is_hitl_trigger(classpath: str | None) -> bool:
    """Whether a deferral waits for a human's answer (the HITL operators' trigger)."""
    return classpath == HITL_TRIGGER


def hitl_gates() -> bool:
    """Whether this Airflow has the human-in-the-loop operators (3.1+; on 3.0 the provider's
    module refuses to import with ``AirflowOptionalProviderFeatureException``); the compiler's
    table (``noetl_compile.airflow_versions``) says so for both."""
    # The table is imported on use: the operators import this module on every DAG parse.
    from noetl_compile.airflow_versions import has_hitl

    return has_hitl(airflow_version())


def gate_wait_states(server_version: str) -> tuple[str, ...]:
    """The task-instance states in which a deployment's gate waits for its answer, for the
    version its API server reports (``GET /api/v2/version``; the CLI talking to it may run
    another Airflow, or none): ``awaiting_input`` on 3.3, ``deferred`` to ``HITLTrigger`` on 3.2
    and 3.1, none on 3.0."""
    from noetl_compile.airflow_versions import gate_wait_states as wait_states

    return wait_states(server_version)


def hitl_operators() -> tuple[type, type]:
    """(``HITLOperator``, ``HITLEntryOperator``); on an Airflow without them (3.0), stand-ins
    whose construction fails naming the version, so that a DAG file with an approve/input gate
    says why it cannot load, and every other gate and step of the module still imports."""
    if hitl_gates():
        from airflow.providers.standard.operators.hitl import HITLEntryOperator, HITLOperator

        return HITLOperator, HITLEntryOperator
    from airflow.sdk import BaseOperator

    class _NoHITL(BaseOperator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError(
                f"approve/input gates need Airflow's human-in-the-loop operators (Airflow 3.1 or "
                f"later); this is Airflow {version_text()}: upgrade Airflow, or replace the gate"
            )

    return _NoHITL, _NoHITL


def bundle_dag_bag(folder: Any, bundle_name: str) -> Any:
    """The DAG processor's bag of one bundle's folder (``BundleDagBag``: in
    ``airflow.dag_processing.dagbag`` with a ``bundle_name`` from 3.2, in ``airflow.models.dagbag``
    without one on 3.1)."""
    if airflow_version() >= (3, 2):
        from airflow.dag_processing.dagbag import BundleDagBag

        return BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name=bundle_name)
    if airflow_version() >= (3, 1):
        from airflow.models.dagbag import BundleDagBag

        return BundleDagBag(dag_folder=folder, bundle_path=folder)
    from airflow.models.dagbag import DagBag  # 3.0: the plain bag reads a bundle's folder

    return DagBag(dag_folder=folder, bundle_path=folder, include_examples=False)


def sync_bag(bag: Any, bundle_name: str, bundle_version: str | None) -> None:
    """Write a bag's DAGs to the metadata DB as the DAG processor does (``sync_bag_to_db``:
    ``airflow.dag_processing.dagbag`` from 3.2, ``airflow.models.dagbag`` on 3.1; the bag's
    own ``sync_to_db`` on 3.0)."""
    if airflow_version() >= (3, 2):
        from airflow.dag_processing.dagbag import sync_bag_to_db
    elif airflow_version() >= (3, 1):
        from airflow.models.dagbag import sync_bag_to_db
    else:
        bag.sync_to_db(bundle_name, bundle_version)
        return
    sync_bag_to_db(bag, bundle_name, bundle_version)


def run_user(name: str) -> dict[str, str]:
    """``create_dagrun``'s keyword naming who triggered a run (3.1+; 3.0 has none)."""
    return {"triggering_user_name": name} if airflow_version() >= (3, 1) else {}


def run_test_task(ti: Any, task: Any) -> Any:
    """One task instance through ``dag.test()``'s ``_run_task`` (no inline triggerer); it takes
    the task as an argument from 3.1, from ``ti.task`` on 3.0."""
    from airflow.sdk.definitions.dag import _run_task

    if airflow_version() >= (3, 1):
        return _run_task(ti=ti, task=task, run_triggerer=False)
    _in_process_task_logging()
    ti.task = task
    return _run_task(ti=ti, run_triggerer=False)


@functools.cache
def _in_process_task_logging() -> None:
    """Airflow 3.0 leaves the task SDK's structlog unconfigured outside a supervised task
    process (3.1+ configures it with Airflow's logging): every debug line then reaches the run's
    log, among them the in-process comms' ``Sending request msg=MaskSecret(value=<the secret>)``,
    written before the value is masked. Keep structlog at ``[logging] logging_level`` (INFO by
    default), with Airflow's masking processor before the renderer, as a task process has it."""
    import logging

    import structlog
    from airflow.configuration import conf
    from airflow.sdk.log import mask_logs

    level = logging.getLevelName(conf.get("logging", "logging_level", fallback="INFO").upper())
    processors = list(structlog.get_config()["processors"])
    if mask_logs not in processors:
        processors.insert(max(len(processors) - 1, 0), mask_logs)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            level if isinstance(level, int) else logging.INFO
        ),
    )


def trigger_kwargs(message: Any) -> dict[str, Any]:
    """A deferral's (``DeferTask``) trigger arguments: serde-serialized from 3.2, as they are
    before (``dag.test()`` passes them straight to the trigger there)."""
    if airflow_version() >= (3, 2):
        from airflow.sdk.serde import deserialize

        return dict(deserialize(message.trigger_kwargs))
    return dict(message.trigger_kwargs or {})


def resume_kwargs(payload: Any) -> dict[str, Any]:
    """A deferred task's ``next_kwargs`` for a trigger event's payload, as ``dag.test()`` writes
    them: serde-serialized from 3.2; the payload itself before (the column serializes it)."""
    if airflow_version() >= (3, 2):
        from airflow.sdk.serde import serialize

        return {"event": serialize(payload)}
    return {"event": payload}


def in_process_comms() -> type | None:
    """The in-process supervisor's comms class (``dag.test()`` / ``noetlc run``), or None."""
    try:
        from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms
    except ImportError:
        return None
    return InProcessSupervisorComms


@functools.cache
def _log_module() -> Any:
    """The task SDK's secrets masker: ``airflow.sdk.log`` (3.2+), or the execution-time module
    that holds it (3.1, 3.0); None without Airflow."""
    for name in ("airflow.sdk.log", "airflow.sdk.execution_time.secrets_masker"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "mask_secret") and hasattr(module, "redact"):
            return module
    return None


def mask_secret(text: str) -> None:
    """Register ``text`` with Airflow's log masker (a no-op without Airflow)."""
    module = _log_module()
    if module is not None:
        module.mask_secret(text)


def masker_redact() -> Any:
    """Airflow's masker ``redact`` function, or None without Airflow."""
    module = _log_module()
    return None if module is None else module.redact


def forget_in_process_api() -> None:
    """Drop the in-process Execution API that ``in_process_api_server`` keeps: 3.3 caches one
    (``functools.lru_cache``); 3.2 and older build a new one per call, so nothing is kept."""
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    clear = getattr(in_process_api_server, "cache_clear", None)
    if clear is not None:
        clear()


def _core_lookup() -> bool:
    """Whether a Variable or Connection must be read through Airflow core rather than the task
    SDK: on 3.0 outside a task process (no ``SUPERVISOR_COMMS``: a test, the scheduler's
    listener, the CLI), the SDK asks its backends (environment, configured backend; no metadata
    DB) and then a supervisor that is not there, failing with ``ImportError``. 3.1 and later
    answer "not found" there themselves."""
    if airflow_version() >= (3, 1):
        return False
    from airflow.sdk.execution_time import task_runner

    return getattr(task_runner, "SUPERVISOR_COMMS", None) is None


def get_variable(name: str) -> Any:
    """The Airflow Variable ``name`` (its value registered with the log masker, as Airflow's own
    lookup does), or None where no backend defines it. Any other failure of the lookup (a
    secrets backend that cannot be loaded, the API server answering an error) raises."""
    if _core_lookup():
        from airflow.models.variable import Variable as CoreVariable

        return CoreVariable.get(name, default_var=None)  # masks what it finds
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowRuntimeError, ErrorType

    try:
        return Variable.get(name)
    except AirflowRuntimeError as exc:
        # VARIABLE_NOT_FOUND is "not defined"; any other code is a failure of the lookup.
        if getattr(getattr(exc, "error", None), "error", None) == ErrorType.VARIABLE_NOT_FOUND:
            return None
        raise


def get_connection(name: str) -> Any:
    """The Airflow Connection ``name`` (password and extra registered with the log masker, as
    the task SDK's lookup does); ``AirflowNotFoundException`` where no backend defines it."""
    if _core_lookup():
        from airflow.models.connection import Connection as CoreConnection

        conn = CoreConnection.get_connection_from_secrets(name)
        # Airflow core's lookup leaves masking to the SDK's caller: do what the SDK does.
        for secret in (conn.password, conn.extra):
            if secret:
                mask_secret(secret)
        return conn
    from airflow.sdk import Connection

    return Connection.get(name)


def postgres_driver() -> str:
    """The SQLAlchemy dialect+driver for a Postgres URL: ``postgresql+psycopg`` (psycopg 3) where
    the installed SQLAlchemy has that dialect (2.0+), else ``postgresql+psycopg2`` (SQLAlchemy
    1.4, which Airflow 3.0 pins; ``apache-airflow-providers-postgres`` brings psycopg2-binary)."""
    from sqlalchemy.dialects import registry
    from sqlalchemy.exc import NoSuchModuleError

    try:
        registry.load("postgresql.psycopg")
    except NoSuchModuleError:
        return "postgresql+psycopg2"
    return "postgresql+psycopg"
