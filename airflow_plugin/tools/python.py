"""``kind: python`` — run inline Python code with NoETL's conventions.

Conventions reproduced (reference/noetl_dsl.md sections 1b and 3.5):

* inputs — the tool's ``args`` and ``input`` with the step's ``input`` laid over them — become
  global variables of the code, and are also available whole as ``input`` / ``args``; where the
  engine's python tool renders its text inputs again with Jinja's default undefined
  (``python_input_undefined_blank``), an input still holding a template is rendered so: an
  undefined name is '' (noted as a warning);
* ``context`` (the render context as plain data), ``json``, ``os``, ``datetime``, ``uuid`` are
  preset globals; ``libs: {alias: module}`` or ``{alias: {from, import}}`` adds more;
* the result is the value of a top-level ``result = ...``; otherwise, for v1 playbooks, the return
  value of ``def main(...)`` called with the inputs as keyword arguments (a single parameter
  named ``input_data``/``input``/``args``/``data`` that is not itself an input receives the whole
  input dict); otherwise NoETL's summary ``{status: "success", message, locals_count,
  locals_keys}`` (the names the code bound, not their values);
* a raised exception or a syntax error becomes an error outcome carrying the exception type,
  message and traceback, and the step result is NoETL's ``{id, status: "error", error: <text>}``;
  a result dict with ``status == "error"`` is an error outcome too (case-v2 and canonical), whose
  step result is that dict as it is; in a v1 playbook it is the step's result like any other
  (NoETL's v1 worker judges the tool's envelope, not what ``main`` returned). The engines
  recorded (v1 58c2a16b, case-v2 dc55c492, canonical 138c10ed) return the same error document
  for a raised exception.
* ``def main(context)``: a parameter named ``context`` that is no input receives the render
  context as plain data (NoETL's python tool passes it).
* NoETL 5 playbooks (``call.profile.python_function_body``) get NoETL 5's python tool: code with a
  top-level ``return`` (NoETL 5's line rule, ``noetl_compile/python_surface.py``) runs as the body
  of ``def __noetl_step__(args, input_data, **kw)`` whose return value is the result; the inputs
  are also the dict ``input_data``; with no ``result`` (None) a callable ``main`` (async too) is
  called; with still none, the result is ``{stdout, stderr}`` of what the code printed (shown in
  the task log as well). Failures are reported as above.

NoETL 5's ``env``, ``cwd`` and ``timeout_seconds`` (else ``timeout``) apply while the code runs,
in every generation (``code_scope.py``): a timeout fails the call with ``TimeoutError``. NoETL 5's
``python`` (an interpreter) runs the code in a process of that interpreter instead, as NoETL 5's
tool does (``python_interpreter.py``).

The code runs in the task's process with full builtins: playbook code is trusted like DAG code.
The Jinja sandbox protects template rendering, not this.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import datetime
import functools
import importlib
import inspect
import json
import os
import sys
import time
import traceback
import types
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from noetl_compile.python_surface import has_top_level_return, wrapped_source

from ..errors import NoetlConfigError
from ..templating.context import INTERNAL_KEYS
from ..templating.render import has_template, render_blank_undefined, to_jsonable
from .code_scope import CodeScope
from .outcome import ToolCall, ToolOutcome, error_from_exception
from .python_failure import Tee, failed, failed_code, failed_noetl5, quote_source
from .python_interpreter import run_in_interpreter
from .registry import ToolNotAvailable

__all__ = ["SCRIPT_ROOT_ENV", "load_script", "merged_inputs", "run_python", "script_root"]

KIND = "python"

# Parameter names v1 playbooks use for "give me all inputs as one dict".
_WHOLE_INPUT_PARAMS = ("input_data", "input", "args", "data", "payload", "kwargs")

_UNSET = object()


def merged_inputs(config: Mapping[str, Any], step_input: Mapping[str, Any]) -> dict[str, Any]:
    """Tool ``args``, then tool ``input``, then the step input on top (NoETL's worker order);
    text holding a JSON object or array becomes that object, as NoETL's python tool coerces its
    parameters (``"{{ x | tojson }}"`` arrives as data, not as a string)."""
    merged: dict[str, Any] = {}
    for layer in (config.get("args"), config.get("input"), step_input):
        if isinstance(layer, Mapping):
            merged.update(layer)
    return {key: _coerce_json_text(value) for key, value in merged.items()}


def _blank_undefined(inputs: dict[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """NoETL's python tool renders each text input again with Jinja's default undefined
    (138c10ed tools/python/executor.py:504): a template lenient rendering kept as text because
    a name is undefined (``{{ error }}`` on a success) arrives as '' (nested values are not
    rendered again there, nor here)."""
    return {
        key: render_blank_undefined(value, context, field=f"input.{key}")
        if isinstance(value, str) and has_template(value)
        else value
        for key, value in inputs.items()
    }


def _coerce_json_text(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if len(text) >= 2 and (text[0], text[-1]) in (("{", "}"), ("[", "]")):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def _source(config: Mapping[str, Any], code_first: bool = False) -> str | None:
    # NoETL's Python engines: an external `script` first, then `code_b64`, then inline `code`;
    # NoETL 5 takes `code` before `script` (profile.python_code_before_script).
    if code_first and isinstance(config.get("code"), str):
        return config["code"]
    if config.get("script") is not None:
        return load_script(config["script"])
    code = config.get("code")
    if isinstance(code, str):
        return code
    encoded = config.get("code_b64")
    if isinstance(encoded, str):
        return base64.b64decode(encoded).decode("utf-8")
    return None


# -- `script`: code loaded from a file, an http(s) URL or inline ----------------------------------
#
# NoETL writes ``script: {uri, source: {type: file|http|gcs|s3|inline, ...}}``. The config is
# already rendered by the runtime, so templated URIs and inline code arrive as plain strings.
# Every problem raises a ScriptSourceError subclass; ``run_python`` turns it into a failure
# outcome whose ``type`` is the class name (ScriptNotFound, ScriptSourceNotSupported...).

SCRIPT_ROOT_ENV = "NOETL_SCRIPT_ROOT"
_SCRIPT_TYPES = ("file", "http", "inline", "gcs", "s3")
_NO_CLIENT = {"gcs": "Google Cloud Storage", "s3": "Amazon S3"}
_HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")  # what NoETL's validation accepts
_HTTP_TIMEOUT_S = 30.0  # NoETL's default


class ScriptSourceError(NoetlConfigError):
    """The ``script`` block cannot give code: bad config, unreadable file, failed download."""


class ScriptNotFound(ScriptSourceError):
    """The file does not exist, or the server answered 404."""


class ScriptSourceNotSupported(ScriptSourceError):
    """A source type this runtime has no client for (gcs, s3)."""


class ScriptFetchError(ScriptSourceError):
    """An http(s) download failed (connection, timeout, an error status other than 404)."""


def script_root() -> Path:
    """What a relative ``file`` script path is relative to.

    NoETL's fixtures write paths relative to the checkout the worker runs from
    (``./tests/fixtures/playbooks/script_execution/scripts/hello_world.py``). An Airflow task's
    working directory is not something a deployment controls, so ``NOETL_SCRIPT_ROOT`` names
    that checkout (or any folder the scripts are deployed to); without it, the task process's
    current directory is used, as NoETL's worker does. Absolute paths are used as they are.
    Playbook code is trusted like DAG code, so a path is not confined to the root.
    """
    root = os.environ.get(SCRIPT_ROOT_ENV, "").strip()
    return Path(root).expanduser() if root else Path.cwd()


def load_script(script: Any) -> str:
    """The source text a ``script`` block names (also usable by SQL tools with `script`).

    ``script`` is ``{uri, source: {type, ...}, encoding?}``; a missing ``source.type`` is
    inferred from the URI (``gs://``, ``s3://``, ``http(s)://``, else a file), and a plain
    string is taken as that URI.
    """
    source_type, uri, source, holder = _script_spec(script)
    if source_type == "inline":
        code = source.get("code", holder.get("code"))
        if not isinstance(code, str):
            raise ScriptSourceError("an inline `script` needs its code in `source.code`")
        where = "inline script"
    elif source_type == "file":
        code = _read_script_file(uri, holder.get("encoding") or "utf-8")
        where = f"script file {uri!r}"
    elif source_type == "http":
        code, where = _fetch_script(uri, source)
    else:
        raise ScriptSourceNotSupported(
            f"python script source type {source_type!r} ({uri!r}) cannot be loaded: this "
            f"runtime has no {_NO_CLIENT[source_type]} client. Put the script in a file under "
            f"{SCRIPT_ROOT_ENV} (`source: {{type: file}}`), serve it over http(s), or inline it "
            "as `code`"
        )
    if not code.strip():
        raise ScriptSourceError(f"python {where} is empty")
    return code


def _script_spec(script: Any) -> tuple[str, Any, Mapping[str, Any], Mapping[str, Any]]:
    """(source type, uri, source mapping, the script mapping itself)."""
    if isinstance(script, str):
        holder: Mapping[str, Any] = {"uri": script}
    elif isinstance(script, Mapping):
        holder = script
    else:
        raise ScriptSourceError(
            f"`script` must be a mapping `{{uri, source: {{type}}}}` or a path/URL string, "
            f"not {type(script).__name__}"
        )
    uri = holder.get("uri", holder.get("path"))
    source = holder.get("source")
    if source is None:
        source = {}
    elif isinstance(source, str):  # `source: file` shorthand
        source = {"type": source}
    elif not isinstance(source, Mapping):
        raise ScriptSourceError("`script.source` must be a mapping with a `type`")
    source_type = source.get("type")
    if source_type is None:
        source_type = _infer_source_type(uri, source)
    source_type = str(source_type).strip().lower()
    if source_type not in _SCRIPT_TYPES:
        raise ScriptSourceError(
            f"unknown `script.source.type` {source_type!r}; this runtime loads file, http and "
            "inline scripts (gcs and s3 are recognised but have no client here)"
        )
    if source_type in ("file", "gcs", "s3") and not (isinstance(uri, str) and uri.strip()):
        raise ScriptSourceError(f"a {source_type} `script` needs a `uri`")
    return source_type, uri, source, holder


def _infer_source_type(uri: Any, source: Mapping[str, Any]) -> str:
    if "endpoint" in source:
        return "http"
    if "code" in source:
        return "inline"
    if not isinstance(uri, str) or not uri.strip():
        raise ScriptSourceError("`script` needs a `uri` (or `source.type: inline` with `code`)")
    scheme = urlsplit(uri.strip()).scheme.lower()
    return {"gs": "gcs", "s3": "s3", "http": "http", "https": "http"}.get(scheme, "file")


def _read_script_file(uri: str, encoding: str) -> str:
    text = uri.strip()
    text = text.removeprefix("file://")
    path = Path(text).expanduser()
    if path.is_absolute():
        resolved, note = path, ""
    else:
        root = script_root()
        resolved = root / path
        origin = (
            f"${SCRIPT_ROOT_ENV}"
            if os.environ.get(SCRIPT_ROOT_ENV, "").strip()
            else f"the task's working directory ({SCRIPT_ROOT_ENV} is not set)"
        )
        note = f"; relative paths are resolved against {origin}: {root}"
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ScriptSourceError(f"unknown `script.encoding` {encoding!r}") from None
    if not resolved.exists():
        raise ScriptNotFound(f"python script file not found: {uri!r} (looked at {resolved}{note})")
    if not resolved.is_file():
        raise ScriptSourceError(f"python script {uri!r} is not a regular file ({resolved})")
    try:
        return resolved.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise ScriptSourceError(
            f"python script {uri!r} is not {encoding} text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise ScriptSourceError(
            f"python script {uri!r} cannot be read ({resolved}): {exc.strerror or exc}"
        ) from None


def _shown_url(url: str) -> str:
    """The URL for messages: no user:password, query or fragment (they may carry a token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _fetch_script(uri: Any, source: Mapping[str, Any]) -> tuple[str, str]:
    # NoETL: `source.endpoint` is the full URL and wins over `uri`.
    url = source.get("endpoint") or uri
    if not isinstance(url, str) or not url.strip():
        raise ScriptSourceError("an http `script` needs `source.endpoint` (or `uri`) with its URL")
    url = url.strip()
    try:
        parts = urlsplit(url)
        shown = _shown_url(url)
    except ValueError:  # a bad port and the like
        raise ScriptSourceError("the http `script` URL is malformed") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ScriptSourceError(f"an http `script` needs an http(s) URL, not {shown!r}")
    method = str(source.get("method") or "GET").strip().upper()
    if method not in _HTTP_METHODS:
        raise ScriptSourceError(f"`script.source.method` {method!r} is not one of {_HTTP_METHODS}")
    headers = source.get("headers") or {}
    if not isinstance(headers, Mapping):
        raise ScriptSourceError("`script.source.headers` must be a mapping")
    try:
        timeout = float(source.get("timeout") or _HTTP_TIMEOUT_S)
    except (TypeError, ValueError):
        raise ScriptSourceError("`script.source.timeout` must be a number of seconds") from None
    verify = source.get("verify", source.get("verify_ssl", True))

    import httpx  # only steps that fetch a script pay for it

    try:
        response = httpx.request(
            method,
            url,
            headers={str(k): str(v) for k, v in headers.items()},
            timeout=timeout,
            follow_redirects=True,
            verify=verify if isinstance(verify, (bool, str)) else True,
        )
    except httpx.TimeoutException:
        raise ScriptFetchError(
            f"timed out after {timeout:g}s fetching the python script from {shown}"
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ScriptFetchError(
            f"cannot fetch the python script from {shown}: {type(exc).__name__}"
        ) from None
    if response.status_code == 404:
        raise ScriptNotFound(f"python script not found: HTTP 404 from {shown}")
    if response.status_code >= 400:
        raise ScriptFetchError(
            f"HTTP {response.status_code} fetching the python script from {shown}"
        )
    return response.text, f"script from {shown}"


def _load_libs(libs: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = {}
    if not isinstance(libs, Mapping):
        return loaded
    for alias, spec in libs.items():
        if isinstance(spec, str):
            loaded[alias] = importlib.import_module(spec)
        elif isinstance(spec, Mapping) and "from" in spec:
            module = importlib.import_module(spec["from"])
            loaded[alias] = getattr(module, spec.get("import", alias))
    return loaded


# Words through which code can reach the name ``context`` (directly, or by looking names up).
_CONTEXT_WORDS = ("context", "globals", "locals", "vars", "eval", "exec", "__dict__", "getattr")


def _plain_context(context: Mapping[str, Any], code: str) -> dict[str, Any]:
    """The run's context as plain data, for code that can name it; ``{}`` for code that cannot
    (its text has none of :data:`_CONTEXT_WORDS`). Converting the whole context costs more than
    a small loop item's own work, and a loop's python step pays it once per item."""
    if not any(word in code for word in _CONTEXT_WORDS):
        return {}
    return to_jsonable({k: v for k, v in context.items() if k not in INTERNAL_KEYS})


def _call_main(main: Any, inputs: dict[str, Any], context: Any = None) -> Any:
    try:
        signature = inspect.signature(main)
    except (TypeError, ValueError):
        return main(**inputs)
    params = list(signature.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return main(**inputs)
    kwargs: dict[str, Any] = {}
    for param in params:
        if param.kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            continue
        if param.name in inputs:
            kwargs[param.name] = inputs[param.name]
        elif param.name in _WHOLE_INPUT_PARAMS and param.default is inspect.Parameter.empty:
            kwargs[param.name] = dict(inputs)
        elif param.name == "context" and param.default is inspect.Parameter.empty:
            kwargs[param.name] = context
        # else: its default applies, or Python raises a clear "missing argument" TypeError.
    return main(**kwargs)


def _summary(namespace: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """NoETL's result for code that sets no ``result``: the names the code bound at top level
    (new ones and rebound presets, dunders left out), counted and listed, values not included."""
    bound = [
        name
        for name, value in namespace.items()
        if not name.startswith("__") and (name not in before or before[name] is not value)
    ]
    return {
        "status": "success",
        "message": "Code executed without explicit result variable",
        "locals_count": len(bound),
        "locals_keys": bound,
    }


def _run_noetl5(
    compiled: types.CodeType,
    namespace: dict[str, Any],
    inputs: dict[str, Any],
    out: Tee,
    err: Tee,
):
    """NoETL 5's python tool (noetl/tools ``python.rs``): the code (wrapped in a function when it
    has a top-level ``return``, see ``noetl_compile.python_surface``) binds ``result``; when that
    is None, a callable ``main`` is called with the inputs its parameters name; when there is
    still no result, the result is the code's printed ``{stdout, stderr}``."""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compiled, namespace)  # noqa: S102 - running playbook code is this tool's purpose
        value = namespace.get("result")
        if value is None and callable(namespace.get("main")):
            main = namespace["main"]
            value = _call_main(main, inputs)
            if inspect.iscoroutine(value):
                value = asyncio.run(value)
    if value is None:
        return {"stdout": out.copy.getvalue(), "stderr": err.copy.getvalue()}
    return value


@functools.lru_cache(maxsize=256)
def _compiled(source: str, filename: str) -> types.CodeType:
    """The code object of ``source``: compiled once per process, not once per loop item (a
    code object is immutable; every run execs it in a namespace of its own). A SyntaxError is
    not cached and is raised again by the next call."""
    return compile(source, filename, "exec")


def run_python(call: ToolCall) -> ToolOutcome:
    started = time.monotonic()
    config = call.config
    filename = f"<noetl python {call.step}:{call.task}>"

    def meta() -> dict[str, Any]:
        return {"duration_ms": round((time.monotonic() - started) * 1000, 3)}

    try:
        code = _source(config, call.profile.python_code_before_script)
    except ToolNotAvailable:
        raise
    except Exception as exc:  # noqa: BLE001 - bad base64 etc. is a tool error
        return failed(exc, error_from_exception(exc, kind=KIND), **meta())
    if code is None:
        missing = NoetlConfigError("python tool needs `code` (or `code_b64`)")
        return failed(
            missing, {"kind": KIND, "type": "ConfigError", "message": str(missing)}, **meta()
        )

    noetl5 = call.profile.python_function_body
    wrapped = noetl5 and has_top_level_return(code)
    try:
        compiled = _compiled(wrapped_source(code) if wrapped else code, filename)
    except SyntaxError as exc:
        if wrapped and exc.lineno:  # the wrapper's `def` line is not the user's
            exc.lineno -= 1
        error = error_from_exception(exc, kind=KIND, with_traceback=False)
        error["line"] = exc.lineno
        error["column"] = exc.offset
        error["traceback"] = "".join(traceback.format_exception_only(type(exc), exc))
        if noetl5:
            exited = failed_noetl5(exc, Tee(sys.stdout), Tee(sys.stderr), filename, **meta())
            exited.error.update(line=error["line"], column=error["column"])
            return exited
        return failed(exc, error, **meta())

    inputs = merged_inputs(config, call.step_input)
    if call.profile.python_input_undefined_blank:
        inputs = _blank_undefined(inputs, call.context)
    namespace: dict[str, Any] = {
        "__name__": "__noetl_python__",
        "__builtins__": __builtins__,
        "json": json,
        "os": os,
        "datetime": datetime,
        "uuid": uuid,
        "context": _plain_context(call.context, code),
        "input": dict(inputs),
        "args": dict(inputs),
    }
    if noetl5:  # NoETL 5's python tool also gives the inputs as the dict `input_data`
        namespace["input_data"] = dict(inputs)
    try:
        namespace.update(_load_libs(config.get("libs")))
    except Exception as exc:  # noqa: BLE001
        return failed(exc, error_from_exception(exc, kind=KIND), **meta())
    namespace.update(inputs)  # explicit bindings win over the presets
    preset = dict(namespace)
    before = namespace.get("result", _UNSET)

    try:
        scope = CodeScope.from_config(config)  # NoETL 5's env, cwd, timeout_seconds
    except NoetlConfigError as exc:
        return failed(exc, {"kind": KIND, "type": "ConfigError", "message": str(exc)}, **meta())
    interpreter = config.get("python")
    if interpreter not in (None, ""):
        # NoETL 5's `python`: the code runs in that interpreter's process (python_interpreter.py).
        return run_in_interpreter(str(interpreter), code, inputs, scope, call.step, meta())

    if not noetl5:
        # Its traceback quotes the playbook code's lines, as a file's would (NoETL 5's stderr
        # keeps the process's text, without them).
        quote_source(filename, code)
    out, err = Tee(sys.stdout), Tee(sys.stderr)
    try:
        with scope:
            if noetl5:
                value = _run_noetl5(compiled, namespace, inputs, out, err)
            else:
                exec(compiled, namespace)  # noqa: S102 - running playbook code is its purpose
                after = namespace.get("result", _UNSET)
                if after is not _UNSET and after is not before:
                    value = after
                elif isinstance(namespace.get("main"), types.FunctionType):
                    value = _call_main(namespace["main"], inputs, namespace["context"])
                else:
                    value = _summary(namespace, preset)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure of user code is data
        if noetl5:
            return failed_noetl5(exc, out, err, filename, **meta())
        return failed_code(exc, filename, **meta())

    value = to_jsonable(value)
    # NoETL's v1 worker judges the tool's own envelope {id, status, data}: what `main` returned
    # is its `data`, so there a returned `status: error` is data and the flow goes on
    # (recorded: tests/differential/cases/v1/python_returns_error_status). NoETL 5's tool decides
    # success by the process's exit code alone: a returned `{status: error}` is a result there too.
    errored = isinstance(value, dict) and str(value.get("status", "")).lower() == "error"
    if errored and call.profile.python_error_status_fails:
        message = (
            value.get("error") or value.get("message") or "python code returned status 'error'"
        )
        error = {
            "kind": KIND,
            "type": "ToolError",
            "message": message if isinstance(message, str) else json.dumps(message),
        }
        # NoETL hands back the dict itself as the step result: no error envelope merged in.
        return ToolOutcome.failure(error, data=value, reported=value, **meta())
    return ToolOutcome.success(value, **meta())
