"""How a loop's items are spread over task instances, and in what order they run there.

* :func:`instance_count`: how many mapped instances the loop head makes. An instance costs a
  deployed Airflow a scheduling round, a worker slot, a process start and its Execution API
  calls; an item inside an instance costs only its own work. So a loop gets as many instances
  as can run at once (few, full instances, items in order inside each), never more:
  a sequential loop one (its items run one at a time anyway, and only one instance keeps them in
  index order under every executor, so that it can stop at a failed item); a parallel or async
  loop one per item while the items fit in the deployment's parallelism (no extra round, and
  each instance is named by its item in the UI), else ``min(max_in_flight, the deployment's
  parallelism, max_map_length)``; the deployment's parallelism counts what its workers run at
  once where it says so (``[noetl] worker_slots``, operators/loop.py): one wave of full
  instances, not a second wave paying a second process start. Under
  ``noetlc run`` / ``dag.test()`` instances run one after another in one process, where the
  shape stays what it was: a parallel loop one instance running ``max_in_flight`` items on
  threads (operators/loop.py), an async loop one instance per item up to 256.
* :func:`run_items`: one instance's items in index order. A sequential loop of an engine whose
  profile says ``loop_stops_at_failed_item`` (138c10ed, NoETL 5), and a parallel one of an
  engine whose profile says ``parallel_loop_stops_at_failed_item`` (138c10ed), start no item
  after a failed one, as the engine issues none; otherwise every item runs and the first
  failure is raised at the end (v1, case-v2: the engine counts the failed item and issues the
  next; NoETL 5 dispatches a parallel loop's items all at once). Deployed, a parallel or async
  loop's items are spread over mapped instances, separate processes: there a shared stop flag
  (a :class:`StopFlag`, the operators' an XCom of the failed instance) is asked before each item
  (the operators read it at most once a second) and raised at a failed one, so no instance starts an item once a failure is known. Items
  already running in other instances when it is raised finish, as NoETL's issued commands do.

Standard library and the engine profiles only (those when a loop runs), so the operators and
``runtime.loop`` share it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..errors import NoetlRuntimeError

__all__ = [
    "IN_PROCESS_MAX_CHUNKS",
    "StopFlag",
    "instance_count",
    "run_items",
    "stops_at_failure",
]

# Under ``noetlc run`` / ``dag.test()`` mapped instances run one at a time in one process, so
# more instances buy no parallelism, while each costs Airflow about 50 ms of Execution API calls
# (start, state, rendered fields, XComs): a 10,000-item loop spent minutes there. Past this many
# items a local run chunks the loop as a deployment does past ``max_map_length``.
IN_PROCESS_MAX_CHUNKS = 256


class StopFlag(Protocol):
    """What a loop's instances share so that none starts an item after another's item failed
    (the loop's instances are separate processes when deployed)."""

    def failed(self) -> int | None:
        """The position (in the whole collection) of an item that failed elsewhere, or None."""

    def fail(self, position: int, error: NoetlRuntimeError) -> None:
        """Tell the other instances that the item at ``position`` failed with ``error`` (a
        flag may leave out a failure its task will try again)."""


def stops_at_failure(payload: Mapping[str, Any]) -> bool:
    """Whether this loop starts no item after a failed one: a sequential loop of an engine
    that issues none (``profile.loop_stops_at_failed_item``), a parallel or async one of an
    engine that tops a parallel loop up only on a successful item
    (``profile.parallel_loop_stops_at_failed_item``)."""
    # Imported when a loop runs: the loop operators import this module on every DAG parse,
    # which needs no profile.
    from noetl_compile.engine_profiles import profile_for

    loop = payload.get("loop") or {}
    profile = profile_for(payload)
    if loop.get("mode") == "sequential":
        return profile.loop_stops_at_failed_item
    return profile.parallel_loop_stops_at_failed_item


def instance_count(
    mode: str,
    items: int,
    *,
    map_limit: int,
    slots: int,
    max_in_flight: int | None,
    templated: bool,
    in_process: bool,
) -> int:
    """Mapped instances for a loop of ``items`` items (see the module docstring). ``slots`` is
    what one DAG run can have running at once (``[core] parallelism``, the DAG's
    ``max_active_tasks`` and ``[noetl] worker_slots``, the smallest), ``map_limit`` Airflow's
    ``[core] max_map_length``;
    ``templated``: ``max_in_flight`` was a template, so no parse-time
    ``max_active_tis_per_dagrun`` bounds the instances and their count must."""
    if items <= 0:
        return 0
    if mode == "sequential":
        return 1
    if in_process:
        if mode == "parallel":
            return 1  # one instance, max_in_flight threads (NoetlLoopBodyOperator)
        bound = max_in_flight if templated else None
        return max(1, min(items, map_limit, IN_PROCESS_MAX_CHUNKS, bound or items))
    if templated and max_in_flight:
        return max(1, min(items, map_limit, slots, max_in_flight))
    if items <= slots:
        # No more instances than the run can start at once: one per item costs no extra
        # round, and each is named by its item in the UI.
        return min(items, map_limit)
    return max(1, min(map_limit, slots, max_in_flight or slots))


def run_items(
    payload: Mapping[str, Any],
    items: Sequence[Any],
    one: Callable[[int, Any], dict[str, Any]],
    *,
    log: Callable[[str], None] | None = None,
    shared: StopFlag | None = None,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], NoetlRuntimeError | None]:
    """``one(position, item)`` for the items in order -> (records of the items that ended, the
    first failure or None). Stops after a failed item where :func:`stops_at_failure`; then
    ``shared`` (the loop's other instances; ``offset``: this instance's first item in the
    collection) is read before each item and told of a failed one."""
    records: list[dict[str, Any]] = []
    failure: NoetlRuntimeError | None = None
    stop = stops_at_failure(payload)
    for position, item in enumerate(items):
        elsewhere = shared.failed() if stop and shared is not None else None
        if elsewhere is not None:
            if log is not None:
                log(
                    f"NoETL loop {payload['step']}: item {elsewhere} failed in another instance; "
                    f"the engine issues no further item ({len(items) - position} of this "
                    "instance's items not run)"
                )
            break
        try:
            records.append(one(position, item))
        except NoetlRuntimeError as exc:
            failure = failure or exc
            if stop and shared is not None:
                shared.fail(offset + position, exc)
            if stop:
                left = len(items) - position - 1
                if log is not None and left:
                    log(
                        f"NoETL loop {payload['step']}: an item failed; the engine issues no "
                        f"further item ({left} of this instance's items not run)"
                    )
                break
    return records, failure
