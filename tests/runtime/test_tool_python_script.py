"""The python tool's ``script`` sources: inline, local files and http(s), with real files in
``tmp_path`` and a real HTTP server on 127.0.0.1 (stdlib, started by this module)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from airflow_plugin.runtime.step import execute_step
from airflow_plugin.tools import get_tool
from airflow_plugin.tools.outcome import ToolCall
from airflow_plugin.tools.python import SCRIPT_ROOT_ENV, load_script, script_root

# NoETL's fixture script (tests/fixtures/playbooks/script_execution/scripts/hello_world.py),
# written anew: a `main` with defaults, called with the tool's inputs.
HELLO = """\
def main(name="World", count=1):
    messages = [f"Hello, {name}! (Greeting #{i + 1})" for i in range(int(count))]
    return {"status": "success", "messages": messages, "total_greetings": int(count)}
"""
NOETL_LAYOUT = "tests/fixtures/playbooks/script_execution/scripts/hello_world.py"
TOKEN = "script-token-91c2e7"


def hello(name: str, count: int) -> dict:
    messages = [f"Hello, {name}! (Greeting #{i + 1})" for i in range(count)]
    return {"status": "success", "messages": messages, "total_greetings": count}


def run(script, **config):
    tool = {"kind": "python", "script": script, **config}
    return get_tool("python")(ToolCall(step="s", task="s", config=tool))


# -- a tiny HTTP server --------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the stdlib's names
        path = self.path.split("?", 1)[0]
        if path == "/hello_world.py":
            self._send(200, HELLO)
        elif path == "/private.py":
            if self.headers.get("X-Token") == TOKEN:
                self._send(200, "result = {'private': True}\n")
            else:
                self._send(401, "no")
        elif path == "/redirect.py":
            self.send_response(302)
            self.send_header("Location", "/hello_world.py")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/broken.py":
            self._send(500, "boom")
        elif path == "/slow.py":
            time.sleep(0.5)
            self._send(200, "result = 1\n")
        else:
            self._send(404, "not here")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._send(200, "result = {'method': 'POST'}\n")

    def _send(self, status: int, body: str) -> None:
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/x-python; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first: the timeout test does that on purpose

    def log_message(self, format: str, *args) -> None:
        pass  # keep test output quiet


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def hello_file(tmp_path: Path) -> Path:
    path = tmp_path / "hello_world.py"
    path.write_text(HELLO, encoding="utf-8")
    return path


# -- inline --------------------------------------------------------------------------------------


def test_inline_source():
    script = {"uri": "inline", "source": {"type": "inline", "code": "result = {'ok': 1}"}}
    out = run(script)
    assert out.ok, out.error
    assert out.data == {"ok": 1}


def test_inline_script_through_a_step_renders_the_code_from_workload():
    # root_scripts/test_script_loading.yaml: `code: "{{ test_code }}"` from the workload.
    payload = {
        "step": "start",
        "dialect": "canonical",
        "tool": {
            "kind": "python",
            "script": {"uri": "inline", "source": {"type": "inline", "code": "{{ test_code }}"}},
            "input": {},
        },
    }
    workload = {"test_code": 'result = {"message": "Script loading works!", "status": "success"}\n'}
    out = execute_step(
        payload, {"workload": workload, "results": {}, "ctx": {}, "vars": {}, "execution_id": 1}
    )
    assert out.result == {"message": "Script loading works!", "status": "success"}


def test_script_wins_over_code_like_noetl():
    script = {"source": {"type": "inline", "code": "result = 'from script'"}}
    assert run(script, code="result = 'from code'").data == "from script"


# -- files ---------------------------------------------------------------------------------------


def test_absolute_file_runs_main_with_the_inputs(hello_file):
    out = run({"uri": str(hello_file), "source": {"type": "file"}}, input={"name": "NoETL"})
    assert out.ok, out.error
    assert out.data == hello("NoETL", 1)


def test_relative_path_is_under_noetl_script_root(tmp_path, monkeypatch):
    target = tmp_path / NOETL_LAYOUT
    target.parent.mkdir(parents=True)
    target.write_text(HELLO, encoding="utf-8")
    monkeypatch.setenv(SCRIPT_ROOT_ENV, str(tmp_path))
    monkeypatch.chdir(target.parent)  # the working directory must not matter once the root is set
    assert script_root() == tmp_path
    out = run({"uri": f"./{NOETL_LAYOUT}", "source": {"type": "file"}}, input={"count": 2})
    assert out.ok, out.error
    assert out.data == hello("World", 2)


def test_relative_path_without_root_is_the_working_directory(tmp_path, monkeypatch, hello_file):
    monkeypatch.delenv(SCRIPT_ROOT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert script_root() == tmp_path
    assert run({"uri": "hello_world.py", "source": {"type": "file"}}).data == hello("World", 1)


@pytest.mark.parametrize("form", ["file_uri", "no_source", "string", "source_shorthand"])
def test_file_spellings(hello_file, form):
    script = {
        "file_uri": {"uri": f"file://{hello_file}"},
        "no_source": {"uri": str(hello_file)},
        "string": str(hello_file),
        "source_shorthand": {"uri": str(hello_file), "source": "file"},
    }[form]
    assert run(script).data == hello("World", 1)


def test_missing_file_names_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv(SCRIPT_ROOT_ENV, str(tmp_path))
    out = run({"uri": "./scripts/nope.py", "source": {"type": "file"}})
    assert out.status == "error"
    assert out.error["type"] == "ScriptNotFound"
    assert out.error["retryable"] is False
    message = out.error["message"]
    assert "'./scripts/nope.py'" in message
    assert str(tmp_path / "scripts" / "nope.py") in message
    assert f"${SCRIPT_ROOT_ENV}" in message


def test_missing_file_without_root_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv(SCRIPT_ROOT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    out = run({"uri": "nope.py"})
    assert out.error["type"] == "ScriptNotFound"
    assert f"{SCRIPT_ROOT_ENV} is not set" in out.error["message"]


def test_directory_is_not_a_script(tmp_path):
    out = run({"uri": str(tmp_path), "source": {"type": "file"}})
    assert out.error["type"] == "ScriptSourceError"
    assert "is not a regular file" in out.error["message"]


def test_encoding(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes("result = 'café'\n".encode("latin-1"))
    bad = run({"uri": str(path)})
    assert bad.error["type"] == "ScriptSourceError" and "is not utf-8 text" in bad.error["message"]
    assert run({"uri": str(path), "encoding": "latin-1"}).data == "café"
    unknown = run({"uri": str(path), "encoding": "no-such-codec"})
    assert "unknown `script.encoding`" in unknown.error["message"]


def test_empty_script_is_an_error(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("\n  \n", encoding="utf-8")
    out = run({"uri": str(path)})
    assert out.error["type"] == "ScriptSourceError" and "is empty" in out.error["message"]


def test_syntax_error_in_a_loaded_script_is_reported(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("x = 1\nresult = (\n", encoding="utf-8")
    out = run({"uri": str(path)})
    assert out.error["type"] == "SyntaxError" and out.error["line"] == 2


# -- http ----------------------------------------------------------------------------------------


def test_http_endpoint_wins_over_uri(server):
    # script_execution/python_http_example.yaml: `uri: hello_world.py` + `source.endpoint`.
    script = {
        "uri": "hello_world.py",
        "source": {
            "type": "http",
            "endpoint": f"{server}/hello_world.py",
            "method": "GET",
            "timeout": 30,
        },
    }
    out = run(script, input={"name": "HTTP-Fetched", "count": 2})
    assert out.ok, out.error
    assert out.data == hello("HTTP-Fetched", 2)


def test_http_type_is_inferred_from_the_url(server):
    assert run(f"{server}/hello_world.py").data == hello("World", 1)


def test_http_follows_redirects_and_other_methods(server):
    assert run({"uri": f"{server}/redirect.py"}).data == hello("World", 1)
    post = {"uri": f"{server}/x.py", "source": {"type": "http", "method": "post"}}
    assert run(post).data == {"method": "POST"}


def test_http_headers_are_sent_and_never_reported(server):
    source = {"type": "http", "endpoint": f"{server}/private.py?sig={TOKEN}"}
    denied = run({"source": source})
    assert denied.error["type"] == "ScriptFetchError"
    assert "HTTP 401" in denied.error["message"]
    assert f"{server}/private.py" in denied.error["message"]
    assert TOKEN not in str(denied.error)  # the query string may hold a token: not shown
    allowed = run({"source": {**source, "headers": {"X-Token": TOKEN}}})
    assert allowed.data == {"private": True}


def test_http_404_is_not_found_and_500_a_fetch_error(server):
    missing = run({"uri": f"{server}/nope.py", "source": {"type": "http"}})
    assert missing.error["type"] == "ScriptNotFound"
    assert f"HTTP 404 from {server}/nope.py" in missing.error["message"]
    broken = run({"uri": f"{server}/broken.py", "source": {"type": "http"}})
    assert broken.error["type"] == "ScriptFetchError" and "HTTP 500" in broken.error["message"]


def test_http_timeout(server):
    script = {"source": {"type": "http", "endpoint": f"{server}/slow.py", "timeout": 0.1}}
    out = run(script)
    assert out.error["type"] == "ScriptFetchError"
    assert (
        f"timed out after 0.1s fetching the python script from {server}/slow.py"
        in (out.error["message"])
    )


def test_http_connection_refused():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = run({"uri": f"http://user:pw@127.0.0.1:{port}/x.py"})
    assert out.error["type"] == "ScriptFetchError"
    assert f"http://127.0.0.1:{port}/x.py: ConnectError" in out.error["message"]
    assert "pw" not in out.error["message"]


def test_http_config_errors():
    method = run({"uri": "http://127.0.0.1:9/x.py", "source": {"type": "http", "method": "HEAD"}})
    assert "`script.source.method` 'HEAD'" in method.error["message"]
    not_http = run({"source": {"type": "http", "endpoint": "ftp://host/x.py"}})
    assert "needs an http(s) URL" in not_http.error["message"]
    no_url = run({"source": {"type": "http"}})
    assert "needs `source.endpoint`" in no_url.error["message"]


# -- sources this runtime cannot load ------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "source_type", "client"),
    [
        (
            {"uri": "gs://bucket/scripts/hello.py", "source": {"type": "gcs", "auth": "gcp"}},
            "gcs",
            "Google Cloud Storage",
        ),
        ({"uri": "s3://bucket/scripts/hello.py"}, "s3", "Amazon S3"),
    ],
)
def test_cloud_sources_fail_clearly(script, source_type, client):
    out = run(script)
    assert out.status == "error"
    assert out.error["type"] == "ScriptSourceNotSupported"
    message = out.error["message"]
    assert f"source type {source_type!r}" in message
    assert f"has no {client} client" in message
    assert script["uri"] in message


@pytest.mark.parametrize(
    ("script", "needle"),
    [
        (42, "`script` must be a mapping"),
        ({}, "`script` needs a `uri`"),
        ({"source": {"type": "file"}}, "a file `script` needs a `uri`"),
        ({"uri": "x", "source": {"type": "ftp"}}, "unknown `script.source.type` 'ftp'"),
        ({"uri": "x", "source": ["file"]}, "`script.source` must be a mapping"),
        ({"source": {"type": "inline"}}, "needs its code in `source.code`"),
    ],
)
def test_config_errors(script, needle):
    out = run(script)
    assert out.error["type"] == "ScriptSourceError"
    assert needle in out.error["message"]


def test_load_script_is_reusable(hello_file):
    # SQL tools read `script` the same way; the loader is public for them.
    assert load_script({"uri": str(hello_file), "source": {"type": "file"}}) == HELLO
