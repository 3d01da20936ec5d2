"""Rename a guard's event-bound names to the step's own result.

A case-v2 rule at `step.exit` reads the step's result as `result` and, since the exit event carries
no `response` (NoETL dc55c492: the worker emits `step.exit` with `{result, status}` and the engine
binds `response` to the payload's `result` when there is no `response`), as `response` too; a v1
`next` condition reads it as `result` (NoETL 0d51146e's broker updates `result` with the step's
data). A canonical arc reads the same value by the step's name (`{{ fetch.rows }}`): the engine
stores the result under the step name before it evaluates the arcs.

The rename works on Jinja's own token stream, so a `result` inside a string, after a dot
(`x.result`), a filter bar or `is` stays as written; only a root name changes.
"""

from __future__ import annotations

import functools
import keyword

import jinja2

# Names a canonical render context binds itself (a step called so would be shadowed there) and
# Jinja's word operators and constants.
_TAKEN = frozenset(
    {
        "workload", "ctx", "vars", "execution_id", "catalog_id", "job", "iter", "loop",
        "loop_index", "event", "output", "error", "_prev", "results", "response", "result",
        "this", "args", "input", "keychain", "and", "or", "not", "in", "is", "if", "else",
        "true", "false", "none", "True", "False", "None",
    }
)  # fmt: skip


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment()


def addressable(step: str) -> bool:
    """Can a canonical template name this step bare (`{{ step.field }}`)?"""
    return step.isidentifier() and not keyword.iskeyword(step) and step not in _TAKEN


def rebind(template: str, names: frozenset[str], step: str) -> str | None:
    """``template`` with every root reference to one of ``names`` read from ``step`` instead;
    None when the text cannot be re-tokenised exactly or uses a name as a binding target."""
    body = template.rstrip("\n")  # the lexer drops a final line break; it is kept as is
    ending = template[len(body) :]
    template = body
    try:
        tokens = list(_environment().lex(template))
    except jinja2.TemplateSyntaxError:
        return None
    if "".join(value for _, _, value in tokens) != template:
        return None
    out: list[str] = []
    previous = None  # the last token that is not whitespace
    for index, (_, kind, value) in enumerate(tokens):
        if kind == "name" and value in ("for", "set", "with", "macro", "call"):
            return None  # a statement could bind the name itself
        if kind == "name" and value in names:
            after = next((t for t in tokens[index + 1 :] if t[1] != "whitespace"), None)
            follows = previous[2] if previous else None
            if follows in (".", "|") or (previous and previous[1:] == ("name", "is")):
                pass  # an attribute, a filter or a test of that name
            elif after is not None and after[1:] == ("operator", "="):
                return None  # a keyword argument of that name
            else:
                value = step
        out.append(value)
        if kind != "whitespace":
            previous = (None, kind, value)
    return "".join(out) + ending


def taken_names() -> frozenset[str]:
    """The names a canonical template cannot give a variable of its own."""
    return _TAKEN


# Names a mapping answers as an attribute before a key (Jinja's `x.k` tries getattr first), on
# the case-v2 `response` view and on the canonical step result alike: `response.keys` is a
# method in both, never the body's `keys`, so such a field is left to the hand.
_MAPPING_ATTRIBUTES = frozenset(
    {"get", "keys", "items", "values", "raw", "copy", "pop", "update", "setdefault", "clear"}
)


def rebind_body_first(template: str, step: str) -> str | None:
    """``template`` with every `response.k` of an HTTP step read as case-v2 reads it, body first
    and then the envelope, from the step's result by its name:
    `(step.data.k if step.data is mapping and 'k' in step.data else step.k)`.

    noetlc's case-v2 `response` (airflow_plugin/templating/proxy.py, ResponseProxy) answers a
    field from the result's `data` when `data` is a mapping holding it, else from the result;
    a canonical arc reads the same result by the step's name with no body-first view, so the
    choice is written out. None when `response` is read any other way (bare, subscripted,
    filtered, a mapping method's name) or the text cannot be re-tokenised exactly."""
    body = template.rstrip("\n")
    ending = template[len(body) :]
    try:
        tokens = list(_environment().lex(body))
    except jinja2.TemplateSyntaxError:
        return None
    if "".join(value for _, _, value in tokens) != body:
        return None
    solid = [(i, kind, value) for i, (_, kind, value) in enumerate(tokens) if kind != "whitespace"]
    replace: dict[int, tuple[int, str]] = {}  # first token index -> (last token index, text)
    for at, (index, kind, value) in enumerate(solid):
        if kind == "name" and value in ("for", "set", "with", "macro", "call"):
            return None
        if kind != "name" or value != "response":
            continue
        before = solid[at - 1] if at else None
        if before is not None and (before[2] in (".", "|") or before[1:] == ("name", "is")):
            continue  # an attribute, a filter or a test of that name
        dot = solid[at + 1] if at + 1 < len(solid) else None
        field = solid[at + 2] if at + 2 < len(solid) else None
        if dot is None or dot[1:] != ("operator", ".") or field is None or field[1] != "name":
            return None
        key = field[2]
        if key.startswith("_") or key in _MAPPING_ATTRIBUTES or key == "context":
            # `context`: a canonical result without it answers with itself (the canonical
            # engine's alias, airflow_plugin/templating/proxy.py CANONICAL_FALLBACKS), where
            # case-v2's `response.context` is undefined.
            return None
        data = f"{step}.data"
        text = f"({data}.{key} if {data} is mapping and '{key}' in {data} else {step}.{key})"
        replace[index] = (field[0], text)
    out: list[str] = []
    skip_to = -1
    for index, (_, _, value) in enumerate(tokens):
        if index <= skip_to:
            continue
        if index in replace:
            skip_to, text = replace[index]
            out.append(text)
        else:
            out.append(value)
    return "".join(out) + ending
