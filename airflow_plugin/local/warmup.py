"""Start the in-process Execution API for the one API version this process speaks.

Every task of a ``dag.test()``-style run talks to an in-process copy of Airflow's Execution API
(FastAPI + cadwyn). On its first request cadwyn builds the routes of every API version the
server supports: ten versions in Airflow 3.3, measured at 3.2 s of a 3.5 s hello-world run's
Airflow work, paid again by every process. The client in this process is the Task SDK of the
same Airflow install, so it only ever sends the newest version (``API_VERSION``): the routes of
the older versions are never used.

``prepare_execution_api`` therefore builds the app with a version bundle holding only that
version (0.4 s) and drops the routes that exist only in older versions (cadwyn refuses a route
"deleted in head" that no version restores). It checks its assumptions first (the server's
newest version is the client's) and falls back to the full app if anything differs or fails,
so a future Airflow costs speed, never correctness. It then initialises the app up front, so
the first task does not pay for it and an error shows up here, outside any task.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import compat

__all__ = ["prepare_execution_api"]

log = logging.getLogger(__name__)

_DELETED_TAG = "_CADWYN_DELETED_ROUTE"  # cadwyn.route_generation._DELETED_ROUTE_TAG


def _trim() -> tuple[object, object, list] | None:
    """Swap in a one-version bundle; returns what to restore, or None when not applicable."""
    from airflow.api_fastapi.execution_api import versions
    from airflow.api_fastapi.execution_api.routes import execution_api_router
    from airflow.sdk.api.datamodels._generated import API_VERSION
    from cadwyn import HeadVersion, Version, VersionBundle

    bundle = versions.bundle
    newest = bundle.versions[0].value if bundle.versions else None
    if str(newest) != str(API_VERSION):
        log.info("execution API: server %s != client %s; full app", newest, API_VERSION)
        return None
    routes = list(execution_api_router.routes)
    versions.bundle = VersionBundle(HeadVersion(), Version(API_VERSION))
    execution_api_router.routes[:] = [
        route for route in routes if _DELETED_TAG not in (getattr(route, "tags", None) or ())
    ]
    return versions, bundle, routes


def _restore(saved: tuple[object, object, list]) -> None:
    from airflow.api_fastapi.execution_api.routes import execution_api_router

    versions, bundle, routes = saved
    versions.bundle = bundle  # type: ignore[attr-defined]
    execution_api_router.routes[:] = routes
    compat.forget_in_process_api()


def _initialise() -> None:
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    app = in_process_api_server().app
    initialise = getattr(app, "_cadwyn_initialize", None)
    if callable(initialise) and not getattr(app, "_cadwyn_initialized", True):
        initialise()


def _remember_dependants() -> None:
    """Build each dependency overridden in the in-process app once, not on every request.

    The in-process API bypasses its token checks with ``dependency_overrides`` (four of them).
    While an app has any override, FastAPI's ``solve_dependencies`` rebuilds the ``Dependant``
    of every sub-dependency of every request with ``get_dependant``, which inspects the
    callable's signature and type hints each time: about 300 rebuilds of the same dozen
    dependencies in a hello_world run, 0.03 s of its 0.4 s of CPU. ``get_dependant``'s result
    depends on its arguments only (the callable and its path, name, scopes), and
    ``solve_dependencies`` only reads it, so this process keeps one per distinct set of
    arguments. Installed once the app is built, so only request-time calls go through it (the
    app's own routes were made without it); an unhashable callable, or a FastAPI whose function
    takes positional arguments, is built as before."""
    try:
        from fastapi.dependencies import utils
    except ImportError:
        return
    build = utils.get_dependant
    if getattr(build, "_noetlc_remembers", False):
        return
    known: dict[tuple[Any, ...], Any] = {}

    def get_dependant(*args: Any, **kwargs: Any) -> Any:
        if args:
            return build(*args, **kwargs)
        key = tuple(
            (name, tuple(value) if isinstance(value, list) else value)
            for name, value in sorted(kwargs.items())
        )
        try:
            return known[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable callable or argument
            return build(**kwargs)
        known[key] = dependant = build(**kwargs)
        return dependant

    get_dependant._noetlc_remembers = True  # type: ignore[attr-defined]
    utils.get_dependant = get_dependant


def locate_endpoints() -> int:
    """Where each endpoint of the in-process app is defined, looked up now: FastAPI keeps it
    for its error messages (``_extract_endpoint_context``, a per-process cache) and looks it up
    on an endpoint's first request by reading and tokenizing its source file. The warm runner
    calls this once, so its forks do not (about 5 lookups per hello_world run); a cold run would
    look up every endpoint to use a few, so it does not. Returns how many were looked up."""
    from airflow.sdk.execution_time.supervisor import in_process_api_server
    from fastapi import routing

    locate = getattr(routing, "_extract_endpoint_context", None)
    if locate is None:
        return 0
    pending, seen, located = [in_process_api_server().app.router], set(), 0
    while pending:
        router = pending.pop()
        if id(router) in seen:
            continue
        seen.add(id(router))
        versioned = getattr(router, "versioned_routers", None)  # cadwyn: a router per version
        pending.extend(versioned.values() if isinstance(versioned, dict) else ())
        for route in getattr(router, "routes", None) or ():
            call = getattr(getattr(route, "dependant", None), "call", None)
            if call is not None:
                locate(call)
                located += 1
            if getattr(route, "routes", None) is not None:
                pending.append(route)
    return located


def prepare_execution_api() -> str:
    """Build the in-process Execution API now; returns "one-version", "full" or "lazy"."""
    state = _prepare()
    try:
        _remember_dependants()
    except Exception:  # an optimisation must never break a run
        log.warning("execution API: cannot remember dependants", exc_info=True)
    return state


def _prepare() -> str:
    saved = None
    try:
        saved = _trim()
    except Exception:  # an optimisation must never break a run
        log.warning("execution API: cannot trim the version bundle", exc_info=True)
    try:
        _initialise()
        return "one-version" if saved is not None else "full"
    except Exception:
        log.warning("execution API: initialisation failed; falling back", exc_info=True)
        if saved is not None:
            _restore(saved)
            try:
                _initialise()
                return "full"
            except Exception:  # the first task builds it again (or says why it cannot)
                log.warning("execution API: full initialisation failed too", exc_info=True)
        return "lazy"
