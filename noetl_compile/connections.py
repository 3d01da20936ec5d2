"""`--connections FILE`: the connection names a deployment has (check, compile) and, for
`noetlc run`, their definitions as ``AIRFLOW_CONN_<ID>`` variables.

Accepted forms (README "Connections file"), so that the output of ``airflow connections export``
can be passed as it is:

- YAML or JSON, a list of names (``[pg_prod, http_api]``) or of mappings with ``conn_id``;
- YAML or JSON, a mapping keyed by name whose values are ``null`` (the name only), a URI string
  (``postgresql://user:pass@host:5432/db``), a JSON string, or a mapping of Airflow connection
  fields (``conn_type``, ``host``, ``login``, ``password``, ``schema``, ``port``, ``extra``,
  ``description``): ``airflow connections export FILE.json|FILE.yaml``;
- ``name=URI`` lines (a ``.env`` file, or any file whose every line has that shape):
  ``airflow connections export FILE.env``.

Anything else is a usage error (``ConnectionsError``): a file that is misread would make every
R203 finding wrong. Airflow reads ``AIRFLOW_CONN_<ID upper-cased>`` itself, as a URI or as JSON,
when a task asks for the connection. Messages never include an entry's value: it may hold a
password. Standard library and PyYAML only: `noetlc check` runs without Airflow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConnectionsError", "ConnectionsFile", "env_connection_ids", "load_connections_file"]

ENV_PREFIX = "AIRFLOW_CONN_"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_FIELDS = ("conn_type", "description", "host", "login", "password", "schema", "port", "extra")
_ENV_LINE = re.compile(r"^\s*(?P<name>[A-Za-z0-9_.-]+)\s*=(?P<value>.*)$")


class ConnectionsError(ValueError):
    """The connections file cannot be used (the message names the entry, never its value)."""


@dataclass
class ConnectionsFile:
    names: set[str] = field(default_factory=set)  # every name the file declares
    env: dict[str, str] = field(default_factory=dict)  # AIRFLOW_CONN_<ID> -> URI or JSON


def env_connection_ids(environ: Mapping[str, str]) -> set[str]:
    """Connection ids defined by ``AIRFLOW_CONN_*`` variables (as written and lower-cased)."""
    ids: set[str] = set()
    for key in environ:
        if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX):
            ids.update({key[len(ENV_PREFIX) :], key[len(ENV_PREFIX) :].lower()})
    return ids


def _definition(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if _URI.match(text):
            return text
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError:
                raise ConnectionsError(f"connection {name!r}: not valid JSON") from None
            return _definition(name, parsed)
        raise ConnectionsError(
            f"connection {name!r}: a string must be a connection URI (scheme://...) or JSON"
        )
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _FIELDS and k not in ("conn_id", "name"))
        if unknown:
            raise ConnectionsError(
                f"connection {name!r}: unknown field(s) {', '.join(unknown)}"
                f" (expected {', '.join(_FIELDS)})"
            )
        fields = {k: value[k] for k in _FIELDS if value.get(k) is not None}
        if "conn_type" not in fields:
            raise ConnectionsError(f"connection {name!r}: a definition needs `conn_type`")
        return json.dumps(fields, default=str)
    raise ConnectionsError(
        f"connection {name!r}: expected a URI, JSON or a mapping of connection fields,"
        f" got {type(value).__name__}"
    )


def _env_entries(path: str, text: str) -> list[tuple[str, Any]]:
    """``name=URI`` lines (blank lines and ``#`` comments skipped)."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ENV_LINE.match(line)
        if match is None:
            raise ConnectionsError(
                f"connections file {path}, line {number}: expected name=URI (the env format)"
            )
        entries.append((match["name"], match["value"].strip() or None))
    return entries


def _looks_like_env(text: str) -> bool:
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    return bool(lines) and all(_ENV_LINE.match(line) and ": " not in line for line in lines)


def _yaml_entries(path: str, data: Any) -> list[tuple[str, Any]]:
    entries: list[tuple[str, Any]] = []
    if isinstance(data, Mapping):
        for name, value in data.items():
            if not isinstance(name, str) or not name:
                raise ConnectionsError(f"connections file {path}: a name must be a string")
            entries.append((name, value))
    elif isinstance(data, list):
        for index, item in enumerate(data, 1):
            if isinstance(item, Mapping):
                name = item.get("conn_id", item.get("name"))
                if not isinstance(name, str) or not name:
                    raise ConnectionsError(
                        f"connections file {path}: a list entry needs `conn_id` (or `name`)"
                    )
                has_fields = any(k in item for k in _FIELDS)
                entries.append((name, item if has_fields else None))
            elif isinstance(item, str) and item:
                entries.append((item, None))
            else:
                raise ConnectionsError(
                    f"connections file {path}: list entry {index} must be a name or a mapping"
                    f" with `conn_id`, got {type(item).__name__}"
                )
    elif data is not None:
        raise ConnectionsError(
            f"connections file {path} must hold a list of names, a mapping keyed by name, or"
            " name=URI lines (see README, Connections file)"
        )
    return entries


def load_connections_file(path: str) -> ConnectionsFile:
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConnectionsError(f"cannot read connections file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConnectionsError(f"connections file {path} is not UTF-8 text") from None
    if path.endswith(".env") or _looks_like_env(text):
        entries = _env_entries(path, text)
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConnectionsError(
                f"connections file {path} is not valid YAML/JSON{where}"
            ) from None
        entries = _yaml_entries(path, data)
    result = ConnectionsFile()
    for name, value in entries:
        result.names.add(name)
        definition = _definition(name, value)
        if definition is not None:
            result.env[ENV_PREFIX + name.upper()] = definition
    return result
