"""Step-level nested playbooks (``tool.kind: playbook``) as ``TriggerDagRunOperator``.

``NoetlPlaybookOperator`` is a ``TriggerDagRunOperator`` whose ``conf`` is the step's input
rendered with the NoETL context (Airflow's Jinja never sees the DSL: ``template_fields = ()``),
with ``logical_date=None`` and a unique ``trigger_run_id`` so one parent run may call the same
child many times, waiting deferrably for the child; the step result is then read from the
child run. A templated ``path`` is resolved at run time with the same path -> dag id mapping as
the compiler (``noetl_compile.lower.names.dag_id_for_path``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

from .loop import not_built, validate_reads, validate_step_payload

__all__ = ["NoetlPlaybookOperator", "dag_id_for_path"]

_INVALID_DAG = re.compile(r"[^A-Za-z0-9_.-]+")
UNRESOLVED_DAG_ID = "__noetl_child_resolved_at_run_time__"


def dag_id_for_path(path: str) -> str:
    """Mirror of ``noetl_compile.lower.names.dag_id_for_path`` (a test keeps them equal)."""
    text = unicodedata.normalize("NFKD", str(path)).encode("ascii", "ignore").decode("ascii")
    text = text.strip().strip("/").replace("/", ".")
    text = _INVALID_DAG.sub("_", text)
    text = re.sub(r"\.{2,}", ".", text).strip("._")
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    if not text:
        return f"playbook_{digest}"
    if len(text) > 200:
        text = f"{text[:190]}_{digest}"
    return text


class NoetlPlaybookOperator(TriggerDagRunOperator):
    template_fields = ()
    ui_color = "#fdf3e1"

    def __init__(
        self,
        *,
        payload: dict[str, Any],
        reads: dict[str, Any],
        trigger_dag_id: str | None = None,
        wait_for_completion: bool = True,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        validate_step_payload(payload)
        step = payload.get("step")
        validate_reads(reads, f"nested playbook step {step!r}")
        tool = payload.get("tool")
        child = payload.get("playbook")
        if not isinstance(tool, Mapping) or tool.get("kind") not in ("playbook", "playbooks"):
            raise ValueError(f"step {step!r}: NoetlPlaybookOperator needs a `playbook` tool")
        if (
            not isinstance(child, Mapping)
            or not isinstance(child.get("path"), str)
            or not child["path"]
        ):
            raise ValueError(f"step {step!r}: the nested playbook needs a string `path`")
        static = child.get("dag_id")
        if trigger_dag_id is not None and static is not None and trigger_dag_id != static:
            raise ValueError(
                f"step {step!r}: trigger_dag_id {trigger_dag_id!r} does not match the payload"
            )
        super().__init__(
            trigger_dag_id=trigger_dag_id or static or UNRESOLVED_DAG_ID,
            logical_date=None,
            wait_for_completion=wait_for_completion,
            deferrable=deferrable,
            **kwargs,
        )
        self.payload = payload
        self.reads = reads

    def execute(self, context: Any) -> Any:
        raise not_built(self, "rendering the child's conf, triggering it and reading its result")
