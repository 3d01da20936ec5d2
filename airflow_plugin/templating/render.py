"""Template rendering with NoETL semantics (reference/noetl_dsl.md section 5).

What this module reproduces, and why:

* **Native values.** A string that is exactly one ``{{ expr }}`` evaluates to the object itself
  (a list stays a list, an int an int). Playbooks pass whole step results and collections through
  ``input`` this way.
* **Coercion of rendered text.** Any other template renders to a string which is then coerced:
  ``[...]``/``{...}`` parsed as JSON or a Python literal, ``true``/``false`` to bool, integers,
  floats, ``none``/``null`` to None. A template that uses ``| tojson`` keeps its string (the author
  asked for JSON text, typically to embed it in SQL).
* **Strict vs lenient.** The engine renders with undefined-is-an-error; the worker renders tool
  configuration leniently, where a template that cannot be rendered stays as its original text.
* **Two truthiness rules.** Routing arcs (engine) are true unless the value is false/0/no/none/
  empty and an error means false; policy rules (worker) match only on boolean true or a value that
  renders to true/1/yes.

Templates are compiled once per source string (cached): the same step spec is rendered for every
task instance, loop iteration and retry.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import contextvars
import datetime as _dt
import decimal
import functools
import json
import math
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, nodes, pass_context
from jinja2.sandbox import SandboxedEnvironment

from ..errors import NoetlFailure
from .filters5 import NOETL5_FILTERS
from .proxy import ResultProxy, ValueResult, unwrap

__all__ = [
    "RenderError",
    "RenderIssue",
    "coerce_rendered",
    "collect_issues",
    "environment",
    "evaluate_condition",
    "has_template",
    "noted_issues",
    "render_blank_undefined",
    "render_value",
    "to_jsonable",
]

Flavor = Literal["arc", "policy"]

# Aliases so callers can name the rule by where NoETL evaluates it.
_FLAVORS = {"arc": "arc", "engine": "arc", "policy": "policy", "worker": "policy"}

_ARC_FALSE_WORDS = frozenset({"false", "0", "no", "none", "null", ""})
_POLICY_TRUE_WORDS = frozenset({"true", "1", "yes"})

_SINGLE_EXPR = re.compile(r"^\s*\{\{[-+]?(?P<expr>.*?)[-+]?\}\}\s*$", re.DOTALL)
_TOJSON = re.compile(r"\|\s*tojson\b")
_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


class RenderError(NoetlFailure):
    """A template could not be rendered in strict mode."""

    def __init__(self, template: str, cause: BaseException, field: str = ""):
        self.template = template
        self.cause = cause
        self.field = field
        super().__init__(f"cannot render {template!r}: {type(cause).__name__}: {cause}")


# --------------------------------------------------------------------------------------------
# Issues: what lenient rendering and condition evaluation would otherwise swallow
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderIssue:
    """A template NoETL's semantics let pass, that a user must still hear about.

    ``kind``: ``unrendered`` (lenient rendering kept the template text as the value) or
    ``guard`` (a condition could not be evaluated and counts as false); ``field``: where in the
    step (``input.city``, ``next.arcs[0].when``); ``expression``: the template; ``cause``: why.
    """

    kind: Literal["unrendered", "guard", "blank"]
    field: str
    expression: str
    cause: str

    def describe(self, step: str) -> str:
        what = {
            "unrendered": "kept its template text (lenient rendering)",
            "guard": "could not be evaluated and counts as false",
            "blank": "rendered with its undefined names as '' (the engine's python tool does)",
        }[self.kind]
        return f"step {step!r} field {self.field or '?'}: {self.expression!r} {what}: {self.cause}"


_issues: contextvars.ContextVar[list[RenderIssue] | None] = contextvars.ContextVar(
    "noetl_render_issues", default=None
)


@contextlib.contextmanager
def collect_issues() -> Iterator[list[RenderIssue]]:
    """Collect the :class:`RenderIssue` s noted while the block runs (nested scopes see their own)."""
    found: list[RenderIssue] = []
    token = _issues.set(found)
    try:
        yield found
    finally:
        _issues.reset(token)


def noted_issues() -> list[RenderIssue]:
    """The issues noted so far in the current ``collect_issues`` scope, as its live list (a
    caller that reports them may clear it); an empty list outside any scope."""
    found = _issues.get()
    return found if found is not None else []


def _note(
    kind: Literal["unrendered", "guard", "blank"], field: str, template: str, exc: BaseException
):
    found = _issues.get()
    if found is not None:
        cause = exc.cause if isinstance(exc, RenderError) else exc
        found.append(RenderIssue(kind, field, template, f"{type(cause).__name__}: {cause}"))


# --------------------------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------------------------


class _NoetlEnvironment(SandboxedEnvironment):
    """Sandboxed Jinja where a mapping key wins over a method of the same name.

    Plain Jinja resolves ``{{ workload.items }}`` to ``dict.items`` (attribute first). Playbooks
    mean the key (``items``, ``values``, ``count`` are common field names), so keys come first.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            try:
                if attribute in obj:
                    return obj[attribute]
            except TypeError:
                pass
        return super().getattr(obj, attribute)


# Context entry (not a valid template name) present where the run's engine writes a bool into
# text as `true`/`false` (``profile.bools_render_lowercase``: NoETL 5's minijinja); Python's
# Jinja writes `True`/`False`. templating/context.build_context sets it from the profile.
LOWER_BOOLS_KEY = "__noetl_lower_bools__"


@pass_context
def _finalize(context: Any, value: Any) -> Any:
    # Only what a `{{ }}` writes into text passes here: a template that is the whole value is
    # evaluated as an expression (``_render_string``) and keeps the bool itself.
    if (value is True or value is False) and context.get(LOWER_BOOLS_KEY):
        return "true" if value else "false"
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, ResultProxy):
        return unwrap(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Undefined):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _filter_tojson(value: Any, indent: int | None = None) -> str:
    # NoETL replaces Jinja's HTML-escaping tojson with plain json.dumps: the output goes into SQL
    # and HTTP bodies, not HTML.
    if isinstance(value, Undefined):
        return "null"
    return json.dumps(unwrap(value), default=_json_default, indent=indent, ensure_ascii=False)


def _filter_b64encode(value: Any) -> str:
    if isinstance(value, Undefined):
        value = ""
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, bytes):
        data = value
    else:
        data = json.dumps(unwrap(value), default=_json_default).encode("utf-8")
    return base64.b64encode(data).decode("ascii")


@functools.lru_cache(maxsize=1)
def environment() -> SandboxedEnvironment:
    """The one Jinja environment of the runtime (sandboxed, strict undefined)."""
    env = _NoetlEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,  # python ``code`` and SQL keep their exact text
        finalize=_finalize,
    )
    env.filters["tojson"] = _filter_tojson
    env.filters["b64encode"] = _filter_b64encode
    env.filters.update(NOETL5_FILTERS)  # keys, values, get, split (filters5.py)
    return env


@functools.lru_cache(maxsize=4096)
def _template(source: str):
    return environment().from_string(source)


@functools.lru_cache(maxsize=4096)
def _single_expression(source: str) -> str | None:
    """The inner expression when ``source`` is exactly one ``{{ expr }}``, else None."""
    match = _SINGLE_EXPR.match(source)
    if not match:
        return None
    try:
        body = environment().parse(source).body
    except TemplateSyntaxError:
        return None
    # Exactly one output node holding one expression (surrounding whitespace allowed): rules
    # out "{{ a }}-{{ b }}", which the non-greedy regex alone would misread.
    if len(body) != 1 or not isinstance(body[0], nodes.Output):
        return None
    parts = [
        n for n in body[0].nodes if not (isinstance(n, nodes.TemplateData) and not n.data.strip())
    ]
    if len(parts) != 1 or isinstance(parts[0], nodes.TemplateData):
        return None
    expr = match.group("expr")
    try:
        environment().compile_expression(expr)
    except TemplateSyntaxError:
        # Greedy/non-greedy mismatch on nested braces: fall back to text rendering.
        return None
    return expr


@functools.lru_cache(maxsize=4096)
def _expression(expr: str):
    return environment().compile_expression(expr, undefined_to_none=False)


def has_template(text: str) -> bool:
    return "{{" in text or "{%" in text


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


_SIMPLE_PATH = re.compile(r"[\w.]+")


def coerce_rendered(text: str) -> Any:
    """Value coercion NoETL applies to a rendered template string."""
    stripped = text.strip()
    if not stripped:
        return text
    if (stripped[0] == "[" and stripped[-1] == "]") or (stripped[0] == "{" and stripped[-1] == "}"):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
        try:
            return ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return text
    lowered = stripped.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered in ("none", "null"):
        return None
    if _INT.match(stripped):
        return int(stripped)
    if _FLOAT.match(stripped):
        return float(stripped)
    return text


def _render_string(
    text: str, context: Mapping[str, Any], strict: bool, coerce: bool, field: str = ""
) -> Any:
    if not has_template(text):
        return text
    try:
        expr = _single_expression(text)
        if expr is not None:
            value = _expression(expr)(**context)
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()  # raises UndefinedError with Jinja's message
            if coerce and isinstance(value, str) and not _SIMPLE_PATH.fullmatch(expr.strip()):
                # NoETL's renderers turn an expression's "true"/"false" text into a bool
                # (engine _render_template) and its "none"/"null" text into None (the worker's
                # render_template, recorded: case_v2/next_args); a plain `{{ name.path }}`
                # hands back the value as it is, and `tojson` text stays text.
                if value.lower() in ("true", "false"):
                    return value.lower() == "true"
                if value.strip().lower() in ("none", "null") and not _TOJSON.search(text):
                    return None
            return unwrap(value)
        rendered = _template(text).render(context)
    except Exception as exc:
        if strict:
            raise RenderError(text, exc, field) from exc
        # Lenient (worker tool config): keep the author's text, as NoETL's worker does, and say so.
        _note("unrendered", field, text, exc)
        return text
    if not coerce or _TOJSON.search(text):
        return rendered
    return coerce_rendered(rendered)


@functools.lru_cache(maxsize=1)
def _blank_environment() -> SandboxedEnvironment:
    """The runtime's environment with Jinja's default undefined (an undefined name renders
    ''), as NoETL's worker hands its python tool (``python_input_undefined_blank``)."""
    env = _NoetlEnvironment(
        undefined=Undefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize
    )
    env.filters.update(environment().filters)
    return env


@functools.lru_cache(maxsize=4096)
def _blank_template(source: str):
    return _blank_environment().from_string(source)


def render_blank_undefined(text: str, context: Mapping[str, Any], field: str = "") -> Any:
    """Render ``text`` as NoETL's python tool renders a text input: undefined names are ''
    (a field of an undefined name still fails, and the text stays: the first rendering's
    ``unrendered`` note stands), then coerced like any rendered text. A rendering that went
    through replaces that note with a ``blank`` one at the same field: the user still hears
    that a name was undefined, and what the value became."""
    try:
        rendered = _blank_template(text).render(context)
    except Exception:  # noqa: BLE001 - as the engine: any failure keeps the text
        return text
    found = _issues.get()
    if found is not None:
        earlier = [i for i in found if i.kind == "unrendered" and i.expression == text]
        for issue in earlier:
            found.remove(issue)
        where = earlier[0].field if earlier else field
        found.append(RenderIssue("blank", where, text, f"it rendered {rendered!r}"))
    if _TOJSON.search(text):
        return rendered
    return coerce_rendered(rendered)


def render_value(
    value: Any, context: Mapping[str, Any], *, strict: bool, coerce: bool = True, field: str = ""
) -> Any:
    """Render every template string inside ``value`` (dicts, lists, strings; keys untouched).

    ``strict=True`` raises :class:`RenderError` on an undefined variable or any template error;
    ``strict=False`` leaves such a string as its original template text. ``coerce=False`` keeps
    rendered text as text (used for python ``code``). ``field`` names where ``value`` sits in the
    step (``input``, ``tool.url``); lenient failures are noted with the path below it.
    """
    if isinstance(value, str):
        return _render_string(value, context, strict, coerce, field)
    if isinstance(value, Mapping):
        return {
            key: render_value(
                item,
                context,
                strict=strict,
                coerce=coerce,
                field=f"{field}.{key}" if field else str(key),
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [
            render_value(item, context, strict=strict, coerce=coerce, field=f"{field}[{i}]")
            for i, item in enumerate(value)
        ]
    return value


# --------------------------------------------------------------------------------------------
# Conditions
# --------------------------------------------------------------------------------------------


def _arc_truthy(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float, decimal.Decimal)):
        return value != 0
    if isinstance(value, str):
        return value.strip().lower() not in _ARC_FALSE_WORDS
    if isinstance(value, Undefined):
        return False
    try:
        return len(value) > 0
    except TypeError:
        return bool(value)


def _policy_truthy(value: Any) -> bool:
    if value is True:
        return True
    if isinstance(value, bool) or value is None:
        return False
    return str(value).strip().lower() in _POLICY_TRUE_WORDS


def evaluate_condition(
    expr: Any, context: Mapping[str, Any], *, flavor: str, field: str = "when"
) -> bool:
    """Evaluate a ``when`` with NoETL's truthiness for ``flavor``.

    ``flavor="arc"`` (alias ``engine``): routing arcs / case rules — true unless the value is
    false/0/no/none/empty; a rendering error counts as false; ``None`` (no ``when``) is true.
    ``flavor="policy"`` (alias ``worker``): tool policy rules — true only for boolean true or a
    value rendering to true/1/yes. A YAML boolean is used as it is in both. A condition that
    cannot be evaluated is false (NoETL's semantics) and is noted as a ``guard`` issue.
    """
    try:
        rule = _FLAVORS[flavor]
    except KeyError:
        raise ValueError(
            f"unknown condition flavor {flavor!r}; expected 'arc' or 'policy'"
        ) from None
    if expr is None:
        return rule == "arc"
    if isinstance(expr, bool):
        return expr
    try:
        value = render_value(expr, context, strict=True)
    except RenderError as exc:
        _note("guard", field, expr if isinstance(expr, str) else repr(expr), exc)
        return False
    return _arc_truthy(value) if rule == "arc" else _policy_truthy(value)


# --------------------------------------------------------------------------------------------
# JSON safety
# --------------------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """Plain JSON data for XCom and events (datetimes as ISO text, unknown objects as str)."""
    # Plain data first, by exact type: it is what nearly every event carries, and the checks
    # below (abstract Mapping, the proxies, a copy by ``unwrap`` at every level) cost each event
    # of every loop item more than its encoding. A proxy or a subclass (``ValueResult``) takes
    # the general path, so the result is the same.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {
            key if type(key) is str else str(key): to_jsonable(item) for key, item in value.items()
        }
    if kind is list:
        return [to_jsonable(item) for item in value]
    value = (
        unwrap(value)
        if isinstance(value, (ResultProxy, Mapping, list, tuple, ValueResult))
        else value
    )
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        # NaN/inf are not JSON; NoETL's json.dumps would emit them, XCom on Postgres rejects them.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(item) for item in value]
    try:
        return to_jsonable(_json_default(value))
    except TypeError:
        return str(value)
