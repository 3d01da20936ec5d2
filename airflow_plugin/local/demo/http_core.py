"""The request model and route registry of the local HTTP API (see ``http_server``).

Handlers are plain functions ``Request -> Response`` registered with :func:`route`; the route
modules (``http_noetl_routes``, ``http_public_routes``) fill the table, ``http_server`` serves it.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "API_KEY",
    "API_KEY_HEADER",
    "BASIC_PASSWORD",
    "BASIC_USER",
    "BEARER_TOKEN",
    "TOTAL_ITEMS",
    "BadRequest",
    "Request",
    "Response",
    "State",
    "route",
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
