"""Routes of the local HTTP API shaped like the public APIs the corpus calls (httpbin,
JSONPlaceholder, Open-Meteo, GitHub, the seed playbooks' APIs): see ``http_server``."""

from __future__ import annotations

import base64
import datetime as dt
import email.parser
import email.policy
import json
import math
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from .http_core import (
    API_KEY,
    API_KEY_HEADER,
    BASIC_PASSWORD,
    BASIC_USER,
    BEARER_TOKEN,
    ITEMS_PER_PAGE,
    TOTAL_ITEMS,
    BadRequest,
    Request,
    Response,
    _error,
    _filler,
    _page_slice,
    _sleep,
    route,
)
from .http_noetl_routes import _seeded

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


@route(r"/request-body", methods=None)
def request_body(req: Request) -> Response:
    """The request's method and parsed body alone: no port or header, so that two clients (the
    differential suite's NoETL run and noetlc's) sending the same body get the same answer."""
    return Response(body={"method": req.method, "body": _echo_body(req)["body"]})


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
