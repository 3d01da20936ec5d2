"""A local HTTP API that the bundled examples and the corpus playbooks call: tests, benches, demos.

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
ANY /request-body                       ``{method, body}``: the parsed request body alone (no
                                        port or header: tests/differential dsl_keys http_body)
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
``http_server`` of ``tests/harness/http_server.py`` (the base URL), ``noetlc demo up`` (port
5555, a background process) or ``python -m airflow_plugin.local.demo.http_server``. Every server
has its own state (flaky counters, probe stats, rate limits), so tests stay independent;
flaky counters are per ``key`` as well.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import http_noetl_routes, http_public_routes  # noqa: F401 - they fill the route table
from .http_core import _ROUTES, BadRequest, Request, Response, State, _error

__all__ = ["main", "start_server"]


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
