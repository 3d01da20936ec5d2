"""References (R2xx): steps, workbook and pipeline tasks, connections and nested playbooks a
playbook names.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, W, rule

RULES = (
    rule(
        "R201",
        E,
        "unknown step",
        "Routing to a step that does not exist. In canonical and case-v2 `next` arcs it is a "
        "warning when the name is close to no step: their engines run the playbook and skip "
        "the arc (it never matches; the step's other arcs decide), and noetlc leaves it out "
        "too. A near miss of a step's name (a typo), a case rule's target and any v1 arc "
        "are errors.",
        "before:  next: [{step: sav}]\nafter:   next: [{step: save}]",
    ),
    rule(
        "R202",
        E,
        "unknown workbook task",
        "A workbook step names a task the workbook does not define.",
        "workbook:\n  - name: score\n    ...\nworkflow:\n  - step: s\n    tool: {kind: workbook, name: score}",
    ),
    rule(
        "R203",
        E,
        "unknown connection",
        "`auth` names a credential that is not in the connections file, so the tool cannot connect.",
        "add the connection to the file given with --connections, or fix the name",
    ),
    rule(
        "R204",
        W,
        "nested playbook not found",
        "A `playbook` tool names a path that none of the checked playbooks declares. NoETL's "
        "catalog finds a child by its exact catalog path (`metadata.path`, else `path`, else "
        "the name), so a call by the name of a playbook that has a path runs nothing; the "
        "compiled call triggers the DAG id of the path as written.",
        "tool: {kind: playbook, path: tests/child}   # metadata.path of the child",
    ),
    rule(
        "R205",
        E,
        "end_loop does not close a loop",
        "`end_loop` must name a step that has a `loop`.",
        "end_loop: city_loop   # the loop step's name",
    ),
    rule(
        "R206",
        E,
        "unknown pipeline task",
        "A `jump` policy names a task label that is not in this step's pipeline.",
        "then: {do: jump, to: fetch_page}   # a `name` of a task above",
    ),
    rule(
        "R207",
        E,
        "executor names an unknown step",
        "`executor.spec.entry_step`/`final_step` must name a step of the workflow.",
        "executor: {spec: {entry_step: start}}",
    ),
    rule(
        "R208",
        E,
        "two playbooks claim one catalog path or DAG id",
        "NoETL registers the second playbook with a catalog path as a newer version of the "
        "first, so which one a nested call runs depends on registration order; and a DAG id is "
        "the catalog path alone (`a/b` -> `a.b`, never a suffix that would change when another "
        "file comes or goes), so Airflow would load only one of the two DAGs. Both files are "
        "reported; check or compile them in separate runs if they are separate deployments.",
        "before:  v1/x.yaml and v2/x.yaml both with metadata.path: tests/x\n"
        "after:   metadata.path: tests/x_v2   # in one of them",
    ),
    rule(
        "R209",
        E,
        "nested playbook is ambiguous",
        "More than one playbook of the run has the catalog path a `playbook` tool calls; NoETL "
        "runs whichever was registered last, so the call cannot be compiled to one child DAG.",
        "give each playbook its own metadata.path, or check them in separate runs",
    ),
)
