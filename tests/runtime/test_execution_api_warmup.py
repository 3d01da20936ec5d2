"""The local runner's in-process Execution API builds each overridden dependency once
(airflow_plugin/local/warmup.py, ``_remember_dependants``): a real FastAPI app with
``dependency_overrides``, as Airflow's in-process API has, served through httpx."""

from __future__ import annotations

import pytest

fastapi = pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi import Depends, FastAPI, Request
from fastapi.dependencies import utils
from fastapi.testclient import TestClient

from airflow_plugin.local.warmup import _remember_dependants


def _token(request: Request) -> str:
    raise AssertionError("the override replaces this dependency")


def _allow(request: Request) -> str:
    return "allowed:" + request.url.path


def _session():
    yield "session"


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/items/{item}")
    def item(item: int, token: str = Depends(_token), session: str = Depends(_session)):
        return {"item": item, "token": token, "session": session}

    app.dependency_overrides[_token] = _allow
    return app


def test_overridden_dependencies_are_built_once_and_still_apply():
    original = utils.get_dependant
    built: list[object] = []

    def counting(**kwargs):  # the real builder, counted
        built.append(kwargs["call"])
        return original(**kwargs)

    utils.get_dependant = counting
    try:
        _remember_dependants()
        _remember_dependants()  # idempotent: one layer, not two
        assert getattr(utils.get_dependant, "_noetlc_remembers", False)
        with TestClient(_app()) as client:
            assert client.get("/items/1").json() == {
                "item": 1,
                "token": "allowed:/items/1",
                "session": "session",
            }
            # FastAPI builds the overridden dependencies on every request while an override
            # exists: the first request did, through the counter.
            after_one = len(built)
            assert _allow in built
            assert [client.get(f"/items/{n}").json()["token"] for n in (2, 3)] == [
                "allowed:/items/2",
                "allowed:/items/3",
            ]
            assert len(built) == after_one  # the next two reused them
        with TestClient(_app()) as client:  # another app, the same dependency functions
            assert client.get("/items/4").json()["token"] == "allowed:/items/4"
        assert len(built) == after_one
    finally:
        utils.get_dependant = original
