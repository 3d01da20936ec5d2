"""Routes of the local HTTP API that mirror NoETL's own mock server (pagination, retries,
errors, rate limits, heavy pages, concurrency probes, patient records): see ``http_server``."""

from __future__ import annotations

import base64
import hashlib
import os
import time
from typing import Any

from .http_core import (
    HEAVY_TOTAL_ITEMS,
    ITEMS_PER_PAGE,
    MAX_DELAY_SECONDS,
    TOTAL_ITEMS,
    BadRequest,
    Request,
    Response,
    State,
    _error,
    _filler,
    _page_slice,
    _sleep,
    route,
)

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
