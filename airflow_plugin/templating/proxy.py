"""Step-result proxy: how templates address a step's result.

NoETL playbooks read a step's result as ``{{ s.field }}``, ``{{ s['field'] }}`` and, because the
engine's hydrator historically put the whole result under ``data``, also as ``{{ s.data.field }}``
for results that have no ``data`` key. Playbooks of every generation mix these forms, so the
runtime keeps all of them working by wrapping dict results in :class:`ResultProxy`.

The proxy is a read-only ``Mapping`` (not a ``dict`` subclass) so that ``json``/``tojson`` and the
render layer can recognise it and unwrap it back to plain data before anything leaves the
runtime (XCom values must be plain JSON).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# The status 138c10ed's hydrated step result carries when the result has none of its own
# (engine.py:312 _merge_hydrated_step_result: `status` set by default from the worker's compact
# result, "COMPLETED" for a call that succeeded, v2_worker_nats.py:2076).
ENVELOPE_STATUS = "COMPLETED"


class ResultProxy(Mapping):
    """Read-only view of a dict step result with the ``.data`` fallback (and, for v1 playbooks,
    ``.result``: NoETL's v1 result proxy answered both with the result itself); with
    ``envelope``, a result without its own ``status`` answers :data:`ENVELOPE_STATUS`."""

    __slots__ = ("_envelope", "_fallbacks", "_loop_list", "_value")

    def __init__(
        self,
        value: Mapping[str, Any],
        fallbacks: tuple[str, ...] = ("data",),
        envelope: bool = False,
        loop_list: bool = False,
    ):
        self._value = value
        self._fallbacks = fallbacks
        self._envelope = envelope
        self._loop_list = loop_list

    def __getitem__(self, key: str) -> Any:
        if key in self._value:
            return _wrap_nested(self._value[key])
        if key == "result" and self._loop_list and _is_loop_aggregate(self._value):
            # v1: the iterator step's result is the plain list of item results, and
            # `{{ step.result }}` that list (58c2a16b render.py:148, `{'result': value}`).
            return list(self._value["results"])
        if key in self._fallbacks:
            # Result without a ``data`` key: ``{{ s.data.x }}`` means ``{{ s.x }}``.
            return self
        if key == "status" and self._envelope:
            return ENVELOPE_STATUS
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._value or key in self._fallbacks or (key == "status" and self._envelope)

    def __iter__(self) -> Iterator[str]:
        return iter(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResultProxy):
            other = other._value
        return self._value == other

    __hash__ = None  # type: ignore[assignment]  # mutable underlying value

    def __bool__(self) -> bool:
        # ``{% if s %}`` must mean "the step produced a non-empty result", like a dict.
        return bool(self._value)

    def __repr__(self) -> str:
        # Rendering ``{{ s }}`` inside a larger string must look like the dict itself so that the
        # value coercion of the rendered text (Python-literal parsing) gives the dict back.
        return repr(unwrap(self._value))

    __str__ = __repr__

    @property
    def raw(self) -> Mapping[str, Any]:
        return self._value


class ResponseProxy(ResultProxy):
    """case-v2 ``response``: the body (``data``) first, then the envelope.

    case-v2 playbooks read the body's fields directly (``response.paging.hasMore``,
    ``response.next_cursor``, ``response.data`` = the body's ``data``) and the envelope's too
    (``response.status_code``, ``response.elapsed``). Any result whose ``data`` is a mapping
    (HTTP results, tools that wrap their payload) reads this way; others are a plain
    :class:`ResultProxy`.
    """

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        body = self._value.get("data")
        if isinstance(body, Mapping) and key in body:
            return body[key]
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        body = self._value.get("data")
        return (isinstance(body, Mapping) and key in body) or super().__contains__(key)


class ValueResult:
    """A list, text or number step result as 138c10ed's templates read it: the value itself,
    which also answers ``.data`` (the value: the engine wraps such a result as ``{data: value,
    status, ...}``, engine.py:335) and ``.status`` (:data:`ENVELOPE_STATUS`). ``unwrap`` gives
    the plain value back. Booleans and None stay plain (Python cannot subclass them)."""

    status = ENVELOPE_STATUS

    @property
    def data(self) -> Any:
        return unwrap(self)


class ListResult(ValueResult, list):
    __slots__ = ()


class TextResult(ValueResult, str):
    __slots__ = ()


class IntResult(ValueResult, int):
    __slots__ = ()


class FloatResult(ValueResult, float):
    __slots__ = ()


_VALUE_RESULTS: tuple[tuple[type, type], ...] = (
    (list, ListResult),
    (str, TextResult),
    (int, IntResult),
    (float, FloatResult),
)


def _value_result(value: Any) -> Any:
    if isinstance(value, (bool, ValueResult)):
        return value
    for plain, wrapped in _VALUE_RESULTS:
        if type(value) is plain:
            return wrapped(value)
    return value


def response_view(value: Any) -> Any:
    """The case-v2 ``response`` namespace for a step result (see :class:`ResponseProxy`)."""
    if isinstance(value, ResultProxy):
        value = value.raw
    if isinstance(value, Mapping) and isinstance(value.get("data"), Mapping):
        return ResponseProxy(value)
    return wrap_result(value)


def _wrap_nested(value: Any) -> Any:
    # Nested values are returned as they are: only the top level of a step result has the
    # ``data`` fallback in NoETL (``{{ s.data.data }}`` is not a thing).
    return value


_LOOP_AGGREGATE = frozenset({"results", "stats"})


def _is_loop_aggregate(value: Mapping[str, Any]) -> bool:
    """A loop step's aggregate ``{results, stats[, omitted_results_count]}``."""
    return _LOOP_AGGREGATE <= value.keys() and isinstance(value.get("results"), list)


_PIPELINE_RECORD = frozenset({"status", "_prev", "results", "ctx"})


def promoted(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """What templates read for a tool pipeline's record ``{status, _prev, results, ctx, ...}``:
    NoETL's engine promotes the last task's result under the record (``{**last, **record}``,
    engine.py "Promote the last tool's result to the top level") so ``{{ step.field }}`` reads
    a field of the last task, as for a single tool; the stored result stays the record."""
    results = value.get("results")
    if not (
        _PIPELINE_RECORD <= value.keys()
        and value.get("status") in ("ok", "break", "failed")
        and isinstance(results, Mapping)
        and results
    ):
        return value
    last = list(results.values())[-1]
    return {**last, **value} if isinstance(last, Mapping) else value


def wrap_result(
    value: Any,
    fallbacks: tuple[str, ...] = ("data",),
    *,
    promote: bool = False,
    envelope: bool = False,
    loop_list: bool = False,
) -> Any:
    """Wrap a step result for use in a render context; ``promote``: a pipeline record reads the
    last task's fields (the profile's ``pipeline_last_task_promoted``); ``envelope``: the
    result answers the hydrated envelope's ``status`` (and, for a list, text or number,
    ``data``) as the engine's does (``result_envelope_fields``); ``loop_list``: a loop
    aggregate's ``result`` is its plain list of results (``loop_result_is_list``)."""
    if isinstance(value, ResultProxy):
        return value
    if isinstance(value, Mapping):
        shown = promoted(value) if promote else value
        return ResultProxy(shown, fallbacks, envelope, loop_list)
    return _value_result(value) if envelope else value


def unwrap(value: Any) -> Any:
    """Plain-data copy of ``value``: proxies removed, containers rebuilt (dict/list)."""
    if isinstance(value, ResultProxy):
        value = value.raw
    if isinstance(value, Mapping):
        return {key: unwrap(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [unwrap(item) for item in value]
    if isinstance(value, ValueResult):
        for plain, _ in _VALUE_RESULTS[1:]:
            if isinstance(value, plain):
                return plain(value)
    return value
