"""NoETL 5's python calling convention, in one place: `noetlc check` (C501 of a NoETL 5 playbook)
and the runtime's python tool (``airflow_plugin/tools/python.py``) both read this module, so it
stays standard-library only and imports nothing of the compiler's stages (like
``shell_surface``).

NoETL 5's python tool (noetl/tools, ``src/tools/python.rs``, ``wrap_top_level_return``) decides
by the text of the code, line by line: an unindented line that starts with ``return`` (``return``
alone or ``return `` and a value), found before any unindented ``def``/``async def``/``class``,
is a top-level return. Then the whole code becomes the body of
``def __noetl_step__(args, input_data, **kw)`` (each line indented by four spaces) and its return
value is the result. Otherwise the code runs at module level as it is (a ``return`` only inside an
``if`` at top level is then Python's "'return' outside function", as NoETL 5 fails it).

In both cases the code sees ``args`` (the tool's inputs as a dict), ``input_data`` (a copy of
it) and every input as a global of its own name.
"""

from __future__ import annotations

__all__ = ["FUNCTION_NAME", "has_top_level_return", "wrapped_source"]

FUNCTION_NAME = "__noetl_step__"
_HEAD = f"def {FUNCTION_NAME}(args, input_data, **kw):\n"
_OPENERS = ("def ", "async def ", "class ")


def _lines(code: str) -> list[str]:
    # Rust's str::lines(): split at \n, a trailing \r dropped, no empty last line.
    lines = [line.removesuffix("\r") for line in code.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def has_top_level_return(code: str) -> bool:
    """NoETL 5's rule: an unindented ``return`` before any unindented def/class."""
    for line in _lines(code):
        if line.startswith((" ", "\t")):
            continue
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith(_OPENERS):
            return False
        if text.startswith("return ") or text == "return":
            return True
    return False


def wrapped_source(code: str) -> str:
    """The code as NoETL 5 runs a top-level return: a function body whose return value is bound
    to ``result``. The function starts one line above the code, so the code's line N is line
    N + 1 of this source."""
    body = "\n".join(f"    {line}" for line in _lines(code))
    return f"{_HEAD}{body}\n\nresult = {FUNCTION_NAME}(args, input_data)\n"
