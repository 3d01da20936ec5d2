"""Datasets a task touched, named by OpenLineage's naming spec (plain Python, no provider import).

Two sources, so no SQL is parsed at run time:

* the tables the compiler found (``x-noetl://<kind>/<connection or file>/<schema>/<table>``, the
  task's ``inlets``/``outlets``, see ``noetl_compile/lower/assets.py``), mapped here to where the
  table lives now: the connection's host and database are known only at run time;
* what the tools note while a task runs (:func:`note_http`): an HTTP request's URL is known only
  after rendering.

Naming (https://openlineage.io/docs/spec/naming):

* postgres: namespace ``postgres://{host}:{port}`` (port 5432 when the connection has none), name
  ``{database}.{schema}.{table}``, as Airflow's postgres provider names them;
* duckdb (not in the spec; as OpenLineage's dbt integration names it): namespace
  ``duckdb://{absolute file path}``, name ``{catalog}.{schema}.{table}``, the catalog being the
  file's stem as DuckDB names it;
* http: namespace ``{scheme}://{host}[:{port}]`` (the default port left out), name the path.
  User-info, query and fragment never reach a name: a token in a query string or credentials in
  a URL stay out of every facet.

Nothing here fails a task: a table whose connection cannot be read is left out (and logged).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import PurePath
from urllib.parse import unquote, urlsplit

from .connections import ConnectionNotFound, get_connection

__all__ = [
    "Dataset",
    "Seen",
    "collecting",
    "http_dataset",
    "note_http",
    "table_dataset",
    "table_datasets",
]

log = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Methods that only read what the URL names; any other method is a write to it.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Dataset:
    namespace: str
    name: str


@dataclass(slots=True)
class Seen:
    """What the tools of one task noted, in order, without repeats."""

    inputs: list[Dataset] = field(default_factory=list)
    outputs: list[Dataset] = field(default_factory=list)

    def add(self, dataset: Dataset, *, output: bool) -> None:
        into = self.outputs if output else self.inputs
        if dataset not in into:
            into.append(dataset)


# One task runs at a time in a process (a worker's task process, or dag.test() / noetlc run
# driving tasks one after another), and a tool may run in a thread of that task (a loop's
# parallel iterations), so the collector is process-wide rather than a context variable.
_lock = threading.Lock()
_current: Seen | None = None


@contextmanager
def collecting() -> Iterator[Seen]:
    """Collect what the tools note until the block ends (the operator's ``execute``)."""
    global _current
    seen = Seen()
    with _lock:
        previous, _current = _current, seen
    try:
        yield seen
    finally:
        with _lock:
            _current = previous


def http_dataset(url: str) -> Dataset | None:
    """The dataset an absolute http(s) URL names; None for anything else."""
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname
    if ":" in host:  # an IPv6 literal keeps its brackets in an authority
        host = f"[{host}]"
    authority = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return Dataset(f"{scheme}://{authority}", parts.path or "/")


def note_http(method: str, url: str) -> None:
    """An HTTP tool sent ``method`` to ``url``: an input when it reads, else an output."""
    seen = _current
    if seen is None:
        return
    dataset = http_dataset(url)
    if dataset is not None:
        with _lock:
            seen.add(dataset, output=str(method).upper() not in _READS)


def table_dataset(uri: str) -> Dataset | None:
    """The dataset a compiler table URI names where the table lives now; None when the URI is
    not one of ours or its connection cannot tell where."""
    if not uri.startswith("x-noetl://"):
        return None
    segments = [unquote(s) for s in uri[len("x-noetl://") :].split("/")]
    if len(segments) != 4 or not all(segments):
        return None
    kind, location, schema, table = segments
    if kind == "postgres":
        try:
            conn = get_connection(location)
        except ConnectionNotFound:
            log.warning("lineage: connection %r of %s is not defined; left out", location, uri)
            return None
        if not conn.host or not conn.schema:
            log.warning(
                "lineage: connection %r names no host or database; %s left out", location, uri
            )
            return None
        return Dataset(
            f"postgres://{conn.host}:{conn.port or 5432}", f"{conn.schema}.{schema}.{table}"
        )
    if kind == "duckdb":
        # Relative to the task's working directory, as the tool opens it (hooks/duckdb.py).
        path = os.path.abspath(os.path.expanduser(location))
        return Dataset(f"duckdb://{path}", f"{PurePath(path).stem}.{schema}.{table}")
    return None


def table_datasets(uris: Iterable[str]) -> list[Dataset]:
    out: list[Dataset] = []
    for uri in uris:
        dataset = table_dataset(uri)
        if dataset is not None and dataset not in out:
            out.append(dataset)
    return out
