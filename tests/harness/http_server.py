"""A local HTTP API that the corpus playbooks can call, for tests, benches and demos.

The corpus was written against public APIs and against NoETL's own mock server
(``tests/fixtures/servers/paginated_api.py``, FastAPI on port 5555). None of them can be reached
here, so this module serves the same behaviour on loopback with the standard library only:
point a playbook's ``api_url`` / ``base_url`` / ``test_url`` workload key at it.

Routes, and the corpus playbooks they serve (``canonical/``, ``case-v2/``, ``v1/``, ``seeds/``):

======================================  ===========================================================
route                                   served playbooks
======================================  ===========================================================
GET /api/v1/assessments                 page-number pagination, 35 items: ``{data, paging:
  ?page&pageSize                        {hasMore, page, pageSize, total}}`` — pagination/basic
                                        (case-v2), pagination/pipeline*, loop_with_pagination
GET /api/v1/events?cursor&limit         cursor pagination, 35 items: ``{events, next_cursor,
                                        limit}`` (cursor = base64 page number) — pagination/cursor
GET /api/v1/users?offset&limit          offset pagination, 35 items: ``{users, has_more, offset,
                                        limit, total}``
GET /api/v1/flaky?page&fail_on          fails (500) the first call per page listed in ``fail_on``,
  [&fails=N&key=K&status=S]             then succeeds with ``{data, paging}`` — retry_test/
POST /api/v1/flaky/reset [?key=K]       retry_simple_config. ``fails``: how many calls fail
                                        (default 1); ``key``: independent counters; without
                                        ``fail_on`` but with ``fails`` every page is flaky
GET /api/v1/errors?error_type           429 | 500 | 503 | 401 (auth) | 403 | 404 | timeout
GET /api/v1/rate-limited                real per-second rate limit -> 429 + Retry-After
GET /api/v1/heavy?page&pageSize         heavy pages (100 items, ``payload_kb`` per item) —
  &payload_kb, GET /api/v1/heavy/stats  pagination/pipeline/test_pipeline_heavy_payload
POST /api/v1/concurrency/reset,         overlap probes (``delay_seconds``) and their counters —
GET /api/v1/concurrency/probe|stats     pagination/basic (canonical), load_test/tooling_non_blocking
GET /api/v1/patient-records             FHIR-like pages, 2-4 s latency, 50 req/s cap (query
                                        overrides as in NoETL) — pagination/fetch_load_test
GET /api/v1/patient/<type>,             per-patient pages and MDS details — pft_flow_test/*
GET /api/v1/mds/assessment_ids|
  assessment/<id>
GET /health, GET /api/health            ``{"status": "ok"}`` — v2_http_test
GET /get, POST /post, PUT /put,         httpbin-style echo: ``{method, path, url, args|query,
PATCH /patch, DELETE /delete,           headers, body, json, form, files, data}`` — retry_test/
ANY /anything[/...], ANY /echo[/...]    http_retry_* (``test_url``), examples/simple_http_v2,
                                        batch_execution/* (``details_api_url``,
                                        ``profile_api_url``), save_storage_test/*
ANY /status/<code>                      that status code — v1 retry_test/http_retry_status_code
GET /delay/<s>, GET /api/v1/slow?delay  a slow response (for timeouts)
GET /api/v1/payload?size=<bytes>        a heavy body of that many bytes (``format=json|text``)
GET /basic-auth/<user>/<password>,      auth-protected endpoints (401 without the credential).
GET /bearer, GET /api/v1/protected      ``/api/v1/protected`` accepts the fixed test credentials
  [?scheme=basic|bearer|api_key]        below (basic, bearer or ``X-API-Key``) and never echoes
GET /redirect/<n>, /redirect-to?url     redirects (``follow_redirects``)
ANY /respond?status&content_type&body   any status / content type / body (JSON vs text tests)
GET /posts[/<id>], GET /users[/<id>]    JSONPlaceholder-shaped posts (100) and users (10) —
                                        data_transfer/*, python_psycopg/http_to_postgres_bulk,
                                        seeds/spec_case_sink (``/users/1``)
GET /events?page&pageSize               ``{page, has_more, items}`` — seeds/spec_unified_retry
GET /status                             ``{"status": "ok"}`` — seeds/whitepaper_minimal
GET /patients/<id>/assessments?page     ``{has_more, items}`` — seeds/cursor_work_queue
GET /data?page&pageSize                 ``{items, paging}`` — examples/http_pagination_v2,
                                        v10_canonical_example
GET /v1/forecast, GET /forecast         Open-Meteo-shaped forecast (``hourly``,
  ?latitude&longitude[&hourly]          ``current_weather``; synthetic, deterministic) —
  [&current_weather&forecast_days]      v1 examples/weather (``base_url``), weather_loop_v2
GET /repos/<owner>/<repo>               GitHub-shaped repository (microsoft/vscode; 404 as
                                        GitHub otherwise) — api_integration/github_metrics
GET /example-api/users/<id>             ``{id, name, email, status, created_at}`` (odd ids
                                        active) — examples/variable_lifecycle_example
======================================  ===========================================================

Run it with :func:`start_server` (127.0.0.1, a free port, a daemon thread), the session fixture
``http_server`` (the base URL), or ``python -m tests.harness.http_server --port 5555``. Every
server has its own state (flaky counters, probe stats, rate limits), so tests stay independent;
flaky counters are per ``key`` as well.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import email.parser
import email.policy
import hashlib
import json
import math
import os
import re
import sys
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

__all__ = [
    "API_KEY",
    "API_KEY_HEADER",
    "BASIC_PASSWORD",
    "BASIC_USER",
    "BEARER_TOKEN",
    "TOTAL_ITEMS",
    "http_server",
    "start_server",
]

TOTAL_ITEMS = 35  # every pagination style serves 35 items (4 pages of 10)
ITEMS_PER_PAGE = 10
HEAVY_TOTAL_ITEMS = 100
MAX_DELAY_SECONDS = 60.0

# Credentials of /api/v1/protected. They protect nothing real: tests use them to check that the
# http tool sends a connection's credential, and that it never shows up in a result or message.
BASIC_USER = "noetl-user"
BASIC_PASSWORD = "basic-pass-5f1c9e"
BEARER_TOKEN = "bearer-token-8a2d4b"
API_KEY = "api-key-3e7f60"
API_KEY_HEADER = "X-API-Key"


class BadRequest(Exception):
    """A query parameter that cannot be read: answered with 400 and the reason."""


# --------------------------------------------------------------------------------------------
# Request / response
# --------------------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    target: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes
    params: dict[str, str]  # path parameters
    state: State
    base_url: str
    peer: tuple[str, int] = ("127.0.0.1", 0)  # the client's address: shows connection reuse

    def arg(self, name: str, default: Any = None, cast: Callable[[str], Any] = str) -> Any:
        values = self.query.get(name)
        if not values or values[-1] == "":
            return default
        try:
            return cast(values[-1])
        except (TypeError, ValueError):
            raise BadRequest(f"query parameter {name!r} is not a valid {cast.__name__}") from None

    def required(self, name: str) -> str:
        value = self.arg(name)
        if value is None:
            raise BadRequest(f"query parameter {name!r} is required")
        return value


@dataclass
class Response:
    status: int = 200
    body: Any = None  # JSON-encoded unless bytes or str
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, self.content_type or "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode("utf-8"), self.content_type or "text/plain; charset=utf-8"
        if self.body is None and self.content_type is None:
            return b"", "text/plain; charset=utf-8"
        return json.dumps(self.body).encode("utf-8"), self.content_type or "application/json"


def _error(status: int, detail: str, **headers: str) -> Response:
    return Response(status, {"detail": detail}, headers=dict(headers))


# --------------------------------------------------------------------------------------------
# Per-server state
# --------------------------------------------------------------------------------------------


class State:
    """Counters a server keeps between requests; one per server so tests stay independent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flaky: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.rate: defaultdict[str, list[float]] = defaultdict(list)
        self.probe = {"started": 0, "completed": 0, "active": 0, "max_active": 0}
        self.probe_events: deque[dict[str, Any]] = deque(maxlen=200)


# --------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------

Handler = Callable[[Request], Response]
_ROUTES: list[tuple[frozenset[str] | None, re.Pattern[str], Handler]] = []
_ANY = None


def route(pattern: str, methods: tuple[str, ...] | None = ("GET",)) -> Callable[[Handler], Handler]:
    """Register a handler for a full-path regex; ``methods=None`` accepts every method."""

    def register(handler: Handler) -> Handler:
        allowed = frozenset(methods) if methods is not None else _ANY
        _ROUTES.append((allowed, re.compile(f"^{pattern}$"), handler))
        return handler

    return register


def _page_slice(items: list[Any], page: int, size: int) -> tuple[list[Any], bool]:
    if page < 1 or size < 1:
        raise BadRequest("page and page size must be positive")
    start = (page - 1) * size
    return items[start : start + size], start + size < len(items)


def _sleep(seconds: float) -> None:
    time.sleep(max(0.0, min(float(seconds), MAX_DELAY_SECONDS)))


def _filler(size: int, seed: str) -> str:
    """``size`` characters of deterministic text (stable bodies for load tests)."""
    if size <= 0:
        return ""
    block = hashlib.sha256(seed.encode()).hexdigest()
    return (block * (size // len(block) + 1))[:size]


# -- NoETL's paginated API ---------------------------------------------------------------------


@route(r"/health")
@route(r"/api/health")
def health(req: Request) -> Response:
    return Response(body={"status": "ok"})


@route(r"/api/v1/assessments")
def assessments(req: Request) -> Response:
    page = req.arg("page", 1, int)
    size = req.arg("pageSize", ITEMS_PER_PAGE, int)
    items = [
        {"id": i, "name": f"Assessment {i}", "score": 50 + (i % 50)}
        for i in range(1, TOTAL_ITEMS + 1)
    ]
    chunk, more = _page_slice(items, page, size)
    paging = {"hasMore": more, "page": page, "pageSize": size, "total": TOTAL_ITEMS}
    return Response(body={"data": chunk, "paging": paging})


@route(r"/items")
def example_items(req: Request) -> Response:
    """playbooks/pagination_region.yaml: page-numbered, ``{items, page, has_more}``."""
    page = req.arg("page", 1, int)
    size = req.arg("page_size", ITEMS_PER_PAGE, int)
    items = [{"id": i} for i in range(1, TOTAL_ITEMS + 1)]
    chunk, more = _page_slice(items, page, size)
    return Response(body={"items": chunk, "page": page, "has_more": more})


@route(r"/api/v1/users")
def users_by_offset(req: Request) -> Response:
    offset = req.arg("offset", 0, int)
    limit = req.arg("limit", ITEMS_PER_PAGE, int)
    if offset < 0 or limit < 1:
        raise BadRequest("offset must be >= 0 and limit positive")
    users = [
        {"id": i, "username": f"user{i}", "email": f"user{i}@example.com"}
        for i in range(1, TOTAL_ITEMS + 1)
    ]
    return Response(
        body={
            "users": users[offset : offset + limit],
            "has_more": offset + limit < TOTAL_ITEMS,
            "offset": offset,
            "limit": limit,
            "total": TOTAL_ITEMS,
        }
    )


def _encode_cursor(page: int) -> str:
    return base64.b64encode(str(page).encode()).decode()


@route(r"/api/v1/events")
def events_by_cursor(req: Request) -> Response:
    cursor = req.arg("cursor")
    limit = req.arg("limit", ITEMS_PER_PAGE, int)
    page = 1
    if cursor:
        try:
            page = int(base64.b64decode(cursor).decode())
        except ValueError:
            page = 1  # NoETL's server restarts from the first page on a cursor it cannot read
    events = [
        {
            "id": i,
            "type": "user_action",
            "timestamp": f"2024-01-{(i % 28) + 1:02d}T12:00:00Z",
            "data": {"action": f"event_{i}"},
        }
        for i in range(1, TOTAL_ITEMS + 1)
    ]
    chunk, more = _page_slice(events, page, limit)
    return Response(
        body={
            "events": chunk,
            "next_cursor": _encode_cursor(page + 1) if more else None,
            "limit": limit,
        }
    )


def _value_page(page: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    items = [{"id": i, "value": f"item_{i}", **(extra or {})} for i in range(1, TOTAL_ITEMS + 1)]
    chunk, more = _page_slice(items, page, ITEMS_PER_PAGE)
    return {"data": chunk, "paging": {"hasMore": more, "page": page, "pageSize": ITEMS_PER_PAGE}}


@route(r"/api/v1/flaky")
def flaky(req: Request) -> Response:
    page = req.arg("page", 1, int)
    key = req.arg("key", "")
    fails = req.arg("fails", 1, int)
    status = req.arg("status", 500, int)
    fail_on = req.arg("fail_on")
    if fail_on is not None:
        try:
            selected = page in {int(p) for p in fail_on.split(",") if p.strip()}
        except ValueError:
            raise BadRequest("fail_on must list page numbers") from None
    else:
        selected = "fails" in req.query
    with req.state.lock:
        req.state.flaky[(key, page)] += 1
        attempt = req.state.flaky[(key, page)]
    if selected and attempt <= fails:
        return Response(status, {"detail": "Simulated failure", "attempt": attempt})
    return Response(body={**_value_page(page), "attempt": attempt})


@route(r"/api/v1/flaky/reset", methods=("POST",))
def flaky_reset(req: Request) -> Response:
    key = req.arg("key")
    with req.state.lock:
        if key is None:
            req.state.flaky.clear()
        else:
            for counter in [k for k in req.state.flaky if k[0] == key]:
                del req.state.flaky[counter]
    return Response(body={"status": "reset", "message": "Flaky endpoint counters cleared"})


@route(r"/api/v1/errors")
def errors(req: Request) -> Response:
    kind = req.arg("error_type")
    retry_after = str(req.arg("retry_after", 5, int))
    if kind == "429":
        body = {"error": "Too Many Requests", "message": "Rate limit exceeded"}
        return Response(429, body, headers={"Retry-After": retry_after})
    if kind == "503":
        body = {"error": "Service Unavailable", "message": "Server temporarily unavailable"}
        return Response(503, body, headers={"Retry-After": retry_after})
    if kind == "500":
        return _error(500, "Internal Server Error - simulated")
    if kind == "timeout":
        _sleep(req.arg("timeout_seconds", 30.0, float))
        return Response(body={"data": [], "simulated": "timeout"})
    if kind == "auth":
        return _error(401, "Unauthorized - invalid credentials")
    if kind == "403":
        return _error(403, "Forbidden - insufficient permissions")
    if kind == "404":
        return _error(404, "Not Found - resource does not exist")
    return Response(body=_value_page(req.arg("page", 1, int)))


def _over_rate(state: State, key: str, per_second: int) -> float | None:
    """Seconds to wait when ``key`` is over ``per_second`` requests, else record the request."""
    now = time.monotonic()
    with state.lock:
        recent = [t for t in state.rate[key] if now - t < 1.0]
        state.rate[key] = recent
        if len(recent) >= per_second:
            return 1.0 - (now - recent[0])
        recent.append(now)
    return None


@route(r"/api/v1/rate-limited")
def rate_limited(req: Request) -> Response:
    per_second = req.arg("requests_per_second", 2, int)
    wait = _over_rate(req.state, "rate-limited:" + req.arg("key", ""), per_second)
    if wait is not None:
        body = {"error": "Rate limit exceeded", "limit": per_second}
        return Response(429, body, headers={"Retry-After": str(max(1, int(wait) + 1))})
    body = _value_page(req.arg("page", 1, int), {"rate_limited": True})
    return Response(body={**body, "rate_limit": {"limit": per_second}})


def _heavy_item(item_id: int, payload_kb: int) -> dict[str, Any]:
    return {
        "id": item_id,
        "name": f"Heavy Assessment {item_id}",
        "score": 50 + (item_id % 50),
        "category": ("finance", "technology", "healthcare", "education")[item_id % 4],
        "metadata": {
            "created_at": f"2024-01-{(item_id % 28) + 1:02d}T12:00:00Z",
            "version": f"1.{item_id % 10}.0",
            "tags": [f"tag_{i}" for i in range(5)],
        },
        "description": f"This is a detailed description for assessment {item_id}. " * 10,
        "payload": _filler(payload_kb * 1024, f"heavy-{item_id}"),
    }


@route(r"/api/v1/heavy")
def heavy(req: Request) -> Response:
    page = req.arg("page", 1, int)
    size = req.arg("pageSize", 10, int)
    payload_kb = max(0, min(req.arg("payload_kb", 10, int), 10_000))
    ids = list(range(1, HEAVY_TOTAL_ITEMS + 1))
    chunk, more = _page_slice(ids, page, size)
    items = [_heavy_item(i, payload_kb) for i in chunk]
    return Response(
        body={
            "data": items,
            "paging": {"hasMore": more, "page": page, "pageSize": size, "total": HEAVY_TOTAL_ITEMS},
            "meta": {
                "payload_kb_per_item": payload_kb,
                "estimated_response_kb": len(items) * payload_kb,
            },
        }
    )


@route(r"/api/v1/heavy/stats")
def heavy_stats(req: Request) -> Response:
    return Response(
        body={
            "total_items": HEAVY_TOTAL_ITEMS,
            "default_payload_kb": 10,
            "max_recommended_payload_kb": 1000,
        }
    )


@route(r"/api/v1/concurrency/reset", methods=("POST",))
def probe_reset(req: Request) -> Response:
    with req.state.lock:
        req.state.probe.update(started=0, completed=0, active=0, max_active=0)
        req.state.probe_events.clear()
    return Response(body={"status": "reset"})


@route(r"/api/v1/concurrency/stats")
def probe_stats(req: Request) -> Response:
    with req.state.lock:
        return Response(body={**req.state.probe, "recent_events": list(req.state.probe_events)})


@route(r"/api/v1/concurrency/probe")
def probe(req: Request) -> Response:
    delay = req.arg("delay_seconds", 0.0, float)
    label = req.arg("label", "probe")
    if not 0.0 <= delay <= MAX_DELAY_SECONDS:
        raise BadRequest(f"delay_seconds must be between 0 and {MAX_DELAY_SECONDS:g}")
    started_at = time.time()
    state = req.state
    with state.lock:
        state.probe["started"] += 1
        request_id = state.probe["started"]
        state.probe["active"] += 1
        state.probe["max_active"] = max(state.probe["max_active"], state.probe["active"])
        active_at_start = state.probe["active"]
        state.probe_events.append({"phase": "start", "request_id": request_id, "label": label})
    _sleep(delay)
    duration = time.time() - started_at
    with state.lock:
        state.probe["active"] = max(0, state.probe["active"] - 1)
        state.probe["completed"] += 1
        snapshot = dict(state.probe)
        state.probe_events.append({"phase": "end", "request_id": request_id, "label": label})
    return Response(
        body={
            "request_id": request_id,
            "label": label,
            "delay_seconds": delay,
            "duration_seconds": round(duration, 4),
            "active_at_start": active_at_start,
            **snapshot,
        }
    )


def _seeded(text: str) -> int:
    return int(hashlib.md5(text.encode()).hexdigest(), 16)  # a seed, not security


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


@route(r"/api/v1/patient-records")
def patient_records(req: Request) -> Response:
    patient = req.required("patientId")
    page = req.arg("page", 1, int)
    size = req.arg("pageSize", 10, int)
    limit = req.arg("rate_limit", int(_env_float("PATIENT_RECORDS_RATE_LIMIT", 50)), int)
    if page < 1 or size < 1:
        raise BadRequest("page and pageSize must be positive")
    if _over_rate(req.state, "patient-records", limit) is not None:
        body = {"error": "Too Many Requests", "message": "Rate limit exceeded"}
        return Response(429, body, headers={"Retry-After": "1"})
    low = req.arg("min_delay", _env_float("PATIENT_RECORDS_MIN_DELAY", 2.0), float)
    high = req.arg("max_delay", _env_float("PATIENT_RECORDS_MAX_DELAY", 4.0), float)
    # Deterministic per request (no random module): reruns see the same latencies.
    delay = low + (high - low) * ((_seeded(f"{patient}:{page}") % 1000) / 999)
    _sleep(delay)
    min_pages = int(_env_float("PATIENT_RECORDS_MIN_PAGES", 2))
    max_pages = int(_env_float("PATIENT_RECORDS_MAX_PAGES", 5))
    total_pages = min_pages + _seeded(patient) % (max_pages - min_pages + 1)
    if page > total_pages:
        return _error(404, f"Page {page} does not exist for patient {patient}")
    target_kb = req.arg("payload_kb", int(_env_float("PATIENT_RECORDS_PAYLOAD_KB", 100)), int)
    padding = max(100, (target_kb * 1024) // size - 600)
    entries = []
    for i in range(size):
        entry_id = f"{patient}-p{page}-e{(page - 1) * size + i}"
        entries.append(
            {
                "fullUrl": f"MedicationStatement/{entry_id}",
                "resource": {
                    "resourceType": "MedicationStatement",
                    "id": entry_id,
                    "status": "active",
                    "subject": {"reference": f"Patient/{patient}"},
                    "_payload": "M" * padding,
                },
            }
        )
    link = f"{req.base_url}/api/v1/patient-records?patientId={patient}&pageSize={size}&page="
    links = [{"relation": "self", "url": f"{link}{page}"}]
    if page < total_pages:
        links.append({"relation": "next", "url": f"{link}{page + 1}"})
    return Response(
        body={
            "resourceType": "Bundle",
            "type": "searchset",
            "total": total_pages * size,
            "link": links,
            "entry": entries,
            "meta": {
                "patientId": patient,
                "page": page,
                "pageSize": size,
                "totalPages": total_pages,
                "delaySeconds": round(delay, 2),
                "estimatedResponseKB": padding * size // 1024,
            },
        }
    )


# Pages per data type of the per-patient API (min, max), as NoETL's server has them.
_PATIENT_PAGES = {"assessments": (2, 4), "conditions": (1, 3), "medications": (2, 3)}


@route(r"/api/v1/patient/(?P<kind>assessments|conditions|medications|vital_signs)")
def patient_data(req: Request) -> Response:
    patient = req.required("patientId")
    kind = req.params["kind"]
    page = req.arg("page", 1, int)
    size = req.arg("pageSize", 10, int)
    low, high = _PATIENT_PAGES.get(kind, (1, 1))
    total_pages = low + _seeded(f"{patient}:{kind}") % (high - low + 1)
    if page < 1 or page > total_pages:
        return Response(404, {"error": "page not found"})
    seed = _seeded(f"{patient}:{kind}:{page}")
    items = [
        {
            "id": f"{kind[:4].upper()}-{patient}-p{page}-i{i}",
            "patientId": str(patient),
            "dataType": kind,
            "value": (seed + i) % 100,
        }
        for i in range(size)
    ]
    paging = {
        "hasMore": page < total_pages,
        "page": page,
        "pageSize": size,
        "total": total_pages * size,
    }
    return Response(body={"data": items, "paging": paging})


@route(r"/api/v1/patient/demographics")
def patient_demographics(req: Request) -> Response:
    patient = req.required("patientId")
    seed = _seeded(f"{patient}:demographics")
    return Response(
        body={
            "patientId": patient,
            "firstName": f"First{seed % 1000}",
            "lastName": f"Last{(seed >> 8) % 1000}",
            "dob": f"19{50 + seed % 50}-{1 + seed % 12:02d}-{1 + (seed >> 4) % 28:02d}",
            "gender": "M" if seed % 2 == 0 else "F",
            "status": "active",
        }
    )


@route(r"/api/v1/mds/assessment_ids")
def mds_ids(req: Request) -> Response:
    patient = req.required("patientId")
    count = 2 + _seeded(f"{patient}:mds") % 4
    ids = [f"MDS-{patient}-{i:03d}" for i in range(1, count + 1)]
    return Response(body={"patientId": patient, "assessmentIds": ids, "count": count})


@route(r"/api/v1/mds/assessment/(?P<assessment_id>[^/]+)")
def mds_detail(req: Request) -> Response:
    assessment_id = req.params["assessment_id"]
    seed = _seeded(assessment_id)
    sections = [
        {
            "sectionId": f"S{i}",
            "questions": [
                {"key": f"B{i}0{j}", "responses": [{"responseValue": str((seed + i * 10 + j) % 5)}]}
                for j in range(1, 4)
            ],
        }
        for i in range(1, 4)
    ]
    return Response(
        body={"assessmentId": assessment_id, "status": "completed", "sections": sections}
    )


# -- httpbin-style echo, status, delay, auth, redirects -----------------------------------------


def _single(values: dict[str, list[str]]) -> dict[str, Any]:
    return {k: v[0] if len(v) == 1 else v for k, v in values.items()}


def _multipart(content_type: str, body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, Any] = {}
    files: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        content = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is None:
            fields[str(name)] = content.decode("utf-8", "replace")
        else:
            files[str(name)] = {
                "filename": filename,
                "content_type": part.get_content_type(),
                "size": len(content),
                "content": content.decode("utf-8", "replace"),
            }
    return fields, files


def _echo_body(req: Request) -> dict[str, Any]:
    content_type = req.headers.get("content-type", "")
    text = req.body.decode("utf-8", "replace")
    parsed: Any = text or None
    as_json: Any = None
    form: dict[str, Any] = {}
    files: dict[str, Any] = {}
    if "json" in content_type.lower() and req.body:
        try:
            as_json = parsed = json.loads(req.body)
        except ValueError:
            pass
    elif "application/x-www-form-urlencoded" in content_type.lower():
        form = parsed = _single(parse_qs(text, keep_blank_values=True))
    elif "multipart/form-data" in content_type.lower():
        form, files = _multipart(content_type, req.body)
        parsed = {"fields": form, "files": files}
    return {"body": parsed, "json": as_json, "form": form, "files": files, "data": text}


def _echo(req: Request) -> Response:
    query = _single(req.query)
    return Response(
        body={
            "method": req.method,
            "path": req.path,
            "url": req.base_url + req.target,
            "query": query,
            "args": query,
            "headers": req.headers,
            "content_type": req.headers.get("content-type"),
            "origin": req.peer[0],
            "client_port": req.peer[1],
            **_echo_body(req),
        }
    )


route(r"/(?:echo|anything)(?:/.*)?", methods=None)(_echo)
route(r"/get")(_echo)
route(r"/post", methods=("POST",))(_echo)
route(r"/put", methods=("PUT",))(_echo)
route(r"/patch", methods=("PATCH",))(_echo)
route(r"/delete", methods=("DELETE",))(_echo)


@route(r"/status/(?P<codes>[0-9,]+)", methods=None)
def status_code(req: Request) -> Response:
    code = int(req.params["codes"].split(",")[0])
    try:
        reason = HTTPStatus(code).phrase
    except ValueError:
        reason = ""
    headers = {"Retry-After": "1"} if code in (429, 503) else {}
    return Response(code, {"status": code, "reason": reason}, headers=headers)


@route(r"/delay/(?P<seconds>[0-9.]+)", methods=None)
def delay(req: Request) -> Response:
    _sleep(float(req.params["seconds"]))
    return _echo(req)


@route(r"/api/v1/slow")
def slow(req: Request) -> Response:
    seconds = req.arg("delay", 1.0, float)
    _sleep(seconds)
    return Response(body={"delayed": seconds})


@route(r"/api/v1/payload")
def payload(req: Request) -> Response:
    size = req.arg("size", 1024, int)
    if not 0 <= size <= 200 * 1024 * 1024:
        raise BadRequest("size must be between 0 and 200 MiB")
    data = _filler(size, "payload")
    if req.arg("format", "json") == "text":
        return Response(body=data)
    return Response(body={"size": size, "data": data})


def _credentials(req: Request) -> tuple[str | None, str | None]:
    """(scheme, value) of the request's credential."""
    if req.headers.get(API_KEY_HEADER.lower()):
        return "api_key", req.headers[API_KEY_HEADER.lower()]
    scheme, _, value = req.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            return "basic", base64.b64decode(value).decode()
        except ValueError:
            return "basic", None
    if scheme.lower() == "bearer":
        return "bearer", value
    return None, None


def _unauthorized(scheme: str = "Basic") -> Response:
    return _error(401, "Unauthorized", **{"WWW-Authenticate": f'{scheme} realm="noetlc-test"'})


@route(r"/api/v1/protected", methods=None)
def protected(req: Request) -> Response:
    required = req.arg("scheme")
    scheme, value = _credentials(req)
    expected = {
        "basic": f"{BASIC_USER}:{BASIC_PASSWORD}",
        "bearer": BEARER_TOKEN,
        "api_key": API_KEY,
    }
    if scheme is None or value != expected[scheme] or (required and required != scheme):
        return _unauthorized("Bearer" if required == "bearer" else "Basic")
    user = BASIC_USER if scheme == "basic" else None
    return Response(body={"authenticated": True, "scheme": scheme, "user": user})


@route(r"/basic-auth/(?P<user>[^/]+)/(?P<password>[^/]+)")
def basic_auth(req: Request) -> Response:
    scheme, value = _credentials(req)
    if scheme != "basic" or value != f"{req.params['user']}:{req.params['password']}":
        return _unauthorized()
    return Response(body={"authenticated": True, "user": req.params["user"]})


@route(r"/bearer")
def bearer(req: Request) -> Response:
    scheme, value = _credentials(req)
    if scheme != "bearer" or not value:
        return _unauthorized("Bearer")
    # httpbin echoes the token; this server does not, so results never carry it.
    return Response(body={"authenticated": True})


@route(r"/redirect/(?P<n>[0-9]+)")
def redirect_n(req: Request) -> Response:
    n = int(req.params["n"])
    target = "/get" if n <= 1 else f"/redirect/{n - 1}"
    return Response(302, {"redirect": target}, headers={"Location": target})


@route(r"/redirect-to", methods=None)
def redirect_to(req: Request) -> Response:
    target = req.required("url")
    code = req.arg("status_code", 302, int)
    return Response(code, {"redirect": target}, headers={"Location": target})


@route(r"/respond", methods=None)
def respond(req: Request) -> Response:
    status = req.arg("status", 200, int)
    content_type = req.arg("content_type", "text/plain; charset=utf-8")
    body = req.arg("body", "")
    return Response(status, body.encode("utf-8"), content_type=content_type)


# -- JSONPlaceholder-shaped data and the seed playbooks' API -----------------------------------

_CITIES = ("Lisbon", "Oslo", "Cairo", "Lima", "Osaka", "Quito", "Accra", "Perth", "Turin", "Riga")


def _user(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"Test User {i}",
        "username": f"user{i}",
        "email": f"user{i}@example.test",
        "phone": f"555-01{i:02d}",
        "website": f"user{i}.example.test",
        "address": {"street": f"{i} Main St", "city": _CITIES[(i - 1) % 10], "zipcode": f"{i:05d}"},
        "company": {"name": f"Company {(i - 1) % 4 + 1}", "catchPhrase": "test data"},
    }


def _post(i: int) -> dict[str, Any]:
    return {
        "userId": (i - 1) // 10 + 1,
        "id": i,
        "title": f"post {i} title",
        "body": f"body of post {i}\nwith a second line and a 'quote'",
    }


@route(r"/users")
def users(req: Request) -> Response:
    return Response(body=[_user(i) for i in range(1, 11)])


@route(r"/users/(?P<id>[0-9]+)")
def user(req: Request) -> Response:
    i = int(req.params["id"])
    return Response(body=_user(i)) if 1 <= i <= 10 else Response(404, {})


@route(r"/posts")
def posts(req: Request) -> Response:
    items = [_post(i) for i in range(1, 101)]
    user_id = req.arg("userId", None, int)
    if user_id is not None:
        items = [p for p in items if p["userId"] == user_id]
    return Response(body=items)


@route(r"/posts/(?P<id>[0-9]+)")
def post(req: Request) -> Response:
    i = int(req.params["id"])
    return Response(body=_post(i)) if 1 <= i <= 100 else Response(404, {})


@route(r"/status")
def service_status(req: Request) -> Response:
    return Response(body={"status": "ok", "service": "noetlc-test-api"})


@route(r"/events")
def seed_events(req: Request) -> Response:
    page = req.arg("page", 1, int)
    size = req.arg("pageSize", ITEMS_PER_PAGE, int)
    items = [{"id": i, "event": f"event_{i}"} for i in range(1, TOTAL_ITEMS + 1)]
    chunk, more = _page_slice(items, page, size)
    body = {"page": page, "pageSize": size, "has_more": more, "total": TOTAL_ITEMS, "items": chunk}
    return Response(body=body)


@route(r"/patients/(?P<id>[^/]+)/assessments")
def seed_patient_assessments(req: Request) -> Response:
    patient = req.params["id"]
    page = req.arg("page", 1, int)
    total_pages = 1 + _seeded(f"seed:{patient}") % 3
    if page < 1 or page > total_pages:
        return Response(404, {"error": "page not found"})
    items = [{"patient_id": patient, "page": page, "index": i} for i in range(3)]
    body = {
        "patient_id": patient,
        "page": page,
        "total_pages": total_pages,
        "has_more": page < total_pages,
        "items": items,
    }
    return Response(body=body)


@route(r"/data")
def data_pages(req: Request) -> Response:
    page = req.arg("page", 1, int)
    size = req.arg("pageSize", ITEMS_PER_PAGE, int)
    items = [{"id": i, "value": f"item_{i}"} for i in range(1, TOTAL_ITEMS + 1)]
    chunk, more = _page_slice(items, page, size)
    paging = {"hasMore": more, "page": page, "pageSize": size, "total": TOTAL_ITEMS}
    return Response(body={"items": chunk, "paging": paging})


# -- Open-Meteo-shaped forecasts ---------------------------------------------------------------
#
# The corpus weather playbooks take the API's base URL from their workload (``base_url``,
# ``weather_api_url``). The body has the fields of Open-Meteo's /v1/forecast documentation; the
# values are synthetic and deterministic: one fixed day, a daily temperature curve that peaks at
# 15:00 and is warmer nearer the equator (New York, 40.71 N: 17.8 C at 09:00, 22.8 C at 15:00).

FORECAST_DAY = "2025-06-01"
_HOURLY_VARIABLES = {
    "temperature_2m": "°C",
    "relative_humidity_2m": "%",
    "precipitation": "mm",
    "wind_speed_10m": "km/h",
    "windspeed_10m": "km/h",
}


def forecast_temperature(latitude: float, hour: int) -> float:
    """The server's temperature (C) at ``latitude`` and ``hour`` of any forecast day."""
    base = 32.0 - 0.35 * abs(latitude)
    return round(base + 5.0 * math.sin(2 * math.pi * (hour - 9) / 24), 1)


def _hourly_value(variable: str, latitude: float, longitude: float, hour: int) -> float:
    if variable == "temperature_2m":
        return forecast_temperature(latitude, hour)
    if variable == "relative_humidity_2m":
        return float(60 + (hour * 3 + int(abs(longitude))) % 30)
    if variable == "precipitation":
        return 0.0 if hour < 16 else 0.2
    return round(8.0 + abs(longitude) % 7 + hour % 5, 1)  # wind speed


@route(r"/(?:v1/)?forecast")
def forecast(req: Request) -> Response:
    try:
        latitude = float(req.required("latitude"))
        longitude = float(req.required("longitude"))
    except ValueError:
        return Response(400, {"error": True, "reason": "latitude and longitude must be numbers"})
    days = req.arg("forecast_days", 7, int)
    fahrenheit = req.arg("temperature_unit", "celsius") == "fahrenheit"
    hourly = [v for v in (req.arg("hourly", "") or "").split(",") if v]
    unknown = [v for v in hourly if v not in _HOURLY_VARIABLES]
    if unknown:
        reason = f"Cannot initialize WeatherVariable from invalid String value {unknown[0]}"
        return Response(400, {"error": True, "reason": reason})

    def temp(value: float) -> float:
        return round(value * 9 / 5 + 32, 1) if fahrenheit else value

    body: dict[str, Any] = {
        "latitude": round(latitude, 4),
        "longitude": round(longitude, 4),
        "generationtime_ms": 0.05,
        "utc_offset_seconds": 0,
        "timezone": "GMT",
        "timezone_abbreviation": "GMT",
        "elevation": 10.0,
    }
    unit = "°F" if fahrenheit else "°C"
    if req.arg("current_weather", "false").lower() == "true":
        body["current_weather_units"] = {
            "time": "iso8601",
            "interval": "seconds",
            "temperature": unit,
            "windspeed": "km/h",
            "winddirection": "°",
            "is_day": "",
            "weathercode": "wmo code",
        }
        body["current_weather"] = {
            "time": f"{FORECAST_DAY}T12:00",
            "interval": 900,
            "temperature": temp(forecast_temperature(latitude, 12)),
            "windspeed": _hourly_value("wind_speed_10m", latitude, longitude, 12),
            "winddirection": int(abs(longitude) * 7) % 360,
            "is_day": 1,
            "weathercode": 3,
        }
    if hourly:
        hours = range(24 * max(1, min(days, 16)))
        body["hourly_units"] = {"time": "iso8601"} | {
            v: (unit if v == "temperature_2m" else _HOURLY_VARIABLES[v]) for v in hourly
        }
        series: dict[str, Any] = {
            "time": [f"{_forecast_date(h // 24)}T{h % 24:02d}:00" for h in hours]
        }
        for variable in hourly:
            values = [_hourly_value(variable, latitude, longitude, h % 24) for h in hours]
            series[variable] = [temp(v) for v in values] if variable == "temperature_2m" else values
        body["hourly"] = series
    return Response(body=body)


def _forecast_date(offset: int) -> str:
    return (dt.date.fromisoformat(FORECAST_DAY) + dt.timedelta(days=offset)).isoformat()


# -- GitHub-shaped repositories ----------------------------------------------------------------
#
# api_integration/github_metrics takes the API base from its workload (``api_base_url``). The body
# has the fields of GitHub's "get a repository" REST response; the figures of microsoft/vscode are
# the snapshot the playbook itself writes to its table (175000 stars, 34000 forks, TypeScript).

_REPOSITORIES = {
    "microsoft/vscode": {
        "id": 41881900,
        "description": "Visual Studio Code",
        "homepage": "https://code.visualstudio.com",
        "language": "TypeScript",
        "stargazers_count": 175000,
        "forks_count": 34000,
        "open_issues_count": 9000,
        "created_at": "2015-09-03T20:23:38Z",
        "updated_at": "2025-06-01T00:00:00Z",
        "pushed_at": "2025-06-01T00:00:00Z",
        "license": {"key": "mit", "name": "MIT License", "spdx_id": "MIT"},
        "topics": ["editor", "electron", "typescript", "visual-studio-code"],
    }
}


@route(r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)")
def repository(req: Request) -> Response:
    full_name = f"{req.params['owner']}/{req.params['repo']}"
    known = _REPOSITORIES.get(full_name.lower())
    if known is None:
        docs = "https://docs.github.com/rest/repos/repos#get-a-repository"
        return Response(404, {"message": "Not Found", "documentation_url": docs, "status": "404"})
    api = f"{req.base_url}/repos/{full_name}"
    owner = req.params["owner"]
    return Response(
        body={
            **known,
            "node_id": base64.b64encode(f"R_{known['id']}".encode()).decode(),
            "name": req.params["repo"],
            "full_name": full_name,
            "private": False,
            "owner": {
                "login": owner,
                "type": "Organization",
                "url": f"{req.base_url}/users/{owner}",
            },
            "html_url": f"https://github.com/{full_name}",
            "fork": False,
            "url": api,
            "size": 500000,
            "watchers_count": known["stargazers_count"],
            "watchers": known["stargazers_count"],
            "forks": known["forks_count"],
            "open_issues": known["open_issues_count"],
            "default_branch": "main",
            "visibility": "public",
            "archived": False,
            "disabled": False,
        }
    )


# -- the user API of examples/variable_lifecycle_example ---------------------------------------
#
# The playbook reads `{api_base_url}/users/{user_id}` from api.example.com, a placeholder host with
# no API behind it: the record has the fields the playbook reads (email, status, created_at).
# Odd ids are active users, even ids inactive, so both of its branches can run.


@route(r"/example-api/users/(?P<id>[0-9]+)")
def example_user(req: Request) -> Response:
    i = int(req.params["id"])
    if not 1 <= i <= 10:
        return Response(404, {"error": "user not found"})
    return Response(
        body={
            "id": i,
            "name": f"Example User {i}",
            "email": f"user{i}@example.com",
            "status": "active" if i % 2 else "inactive",
            "created_at": f"2025-01-{i:02d}T09:00:00Z",
        }
    )


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]):
        super().__init__(address, _RequestHandler)
        self.state = State()
        host, port = self.server_address[:2]
        self.base_url = f"http://{host}:{port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) closes its socket before the answer is written:
        # expected here, not worth a traceback on stderr. Anything else is still reported.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    # Keep-alive, so the tool's pooled client really reuses connections.
    protocol_version = "HTTP/1.1"
    # An idle keep-alive connection is closed after this long (its thread ends with it).
    timeout = 30
    # Headers and body are two writes; with Nagle on, delayed ACKs add ~40 ms to every response.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet: one stderr line per request would drown the test output.
        return

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self) -> None:
        body = self._read_body()
        parts = urlsplit(self.path)
        path = parts.path or "/"
        response: Response | None = None
        path_matched = False
        for methods, pattern, handler in _ROUTES:
            match = pattern.match(path)
            if match is None:
                continue
            path_matched = True
            if (
                methods is not None
                and self.command not in methods
                and not (self.command == "HEAD" and "GET" in methods)
            ):
                continue
            request = Request(
                method=self.command,
                path=path,
                target=self.path,
                query=parse_qs(parts.query, keep_blank_values=True),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                params=match.groupdict(),
                state=self.server.state,
                base_url=self.server.base_url,
                peer=self.client_address[:2],
            )
            try:
                response = handler(request)
            except BadRequest as exc:
                response = _error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - a server bug must answer, not hang the test
                response = _error(500, f"server error: {type(exc).__name__}: {exc}")
            break
        if response is None:
            response = (
                _error(405, f"{self.command} is not allowed on {path}")
                if path_matched
                else _error(404, f"no route for {path}")
            )
        self._send(response)

    def _send(self, response: Response) -> None:
        payload, content_type = response.encode()
        self.send_response(response.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch


def start_server(host: str = "127.0.0.1", port: int = 0) -> tuple[str, Callable[[], None]]:
    """Serve on ``host:port`` (0 = a free port) in a daemon thread; returns (base URL, stop)."""
    server = _Server((host, port))
    thread = threading.Thread(target=server.serve_forever, name="noetlc-test-http", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return server.base_url, stop


@pytest.fixture(scope="session")
def http_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:<port>``) of a local API shared by the test session."""
    base_url, stop = start_server()
    yield base_url
    stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Local HTTP API for noetlc tests and demos.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5555, help="0 picks a free port")
    args = parser.parse_args(argv)
    server = _Server((args.host, args.port))
    print(f"serving the noetlc test API on {server.base_url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
