"""OpenLineage for NoETL tasks, through the provider's operator hook (docs/ui.md, "Lineage").

The OpenLineage provider (``apache-airflow-providers-openlineage``, extra ``lineage``) asks an
operator that has ``get_openlineage_facets_on_start`` / ``_on_complete`` for its datasets, as it
asks Airflow's own SQL operators. Every NoETL operator has them (``LineageMixin``, in
``NoetlTaskMixin``'s bases); nothing here imports the provider until the provider itself calls,
so a deployment without it pays nothing but one process-wide collector per task run.

* inputs: the task's ``inlets`` (tables its SQL reads, found by the compiler), plus URLs the http
  tool read (GET/HEAD/OPTIONS) in this run;
* outputs: the task's ``outlets`` (tables written: SQL, sink targets, transfer targets), plus URLs
  the http tool sent anything else to.

``hooks/lineage.py`` names each one by OpenLineage's naming spec. On start only the compiler's
tables are known; on completion (or failure) the URLs the run touched are added.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

# hooks/lineage.py (OpenLineage naming, connection lookups) is imported where a task runs or the
# provider asks, not here: every DAG file parse imports this module through the operators, and
# a parse never needs it (2 ms of each cold parse, measured with bench/dag_import_baseline.py).
if TYPE_CHECKING:
    from ..hooks.lineage import Dataset, Seen

__all__ = ["LineageMixin"]


def _uris(assets: Any) -> list[str]:
    return [uri for uri in (getattr(a, "uri", None) for a in assets or ()) if isinstance(uri, str)]


def _merge(*groups: list[Dataset]) -> list[Dataset]:
    out: list[Dataset] = []
    for group in groups:
        out += [d for d in group if d not in out]
    return out


class LineageMixin:
    """``get_openlineage_facets_on_start/_on_complete`` for NoETL operators."""

    _noetl_seen: Seen | None = None

    @contextmanager
    def lineage_scope(self) -> Iterator[None]:
        """Collect what the tools note while the block runs (each ``recording`` block)."""
        from ..hooks.lineage import Seen, collecting

        with collecting() as seen:
            try:
                yield
            finally:
                total = self._noetl_seen or Seen()
                for dataset in seen.inputs:
                    total.add(dataset, output=False)
                for dataset in seen.outputs:
                    total.add(dataset, output=True)
                self._noetl_seen = total

    def _noetl_lineage(self, seen: Seen | None) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset as OLDataset

        from ..hooks.lineage import table_datasets

        inputs = table_datasets(_uris(getattr(self, "inlets", None)))
        outputs = table_datasets(_uris(getattr(self, "outlets", None)))
        if seen is not None:
            inputs, outputs = _merge(inputs, seen.inputs), _merge(outputs, seen.outputs)
        return OperatorLineage(
            inputs=[OLDataset(namespace=d.namespace, name=d.name) for d in inputs],
            outputs=[OLDataset(namespace=d.namespace, name=d.name) for d in outputs],
        )

    def get_openlineage_facets_on_start(self) -> Any:
        return self._noetl_lineage(None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        # The provider calls this in a fork (or thread) of the task process after execute():
        # what the tools noted is on this object.
        return self._noetl_lineage(self._noetl_seen)
