"""Structure (S1xx): the playbook's shape: keys, types, values, steps, loops, tool kinds, and
the forms of another generation or of NoETL 5.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, I, W, rule

RULES = (
    rule(
        "S101",
        E,
        "required key missing",
        "The engine cannot run a playbook or step without this key.",
        "before:  - desc: fetch\nafter:   - step: fetch\n           desc: fetch",
    ),
    rule(
        "S102",
        E,
        "wrong type",
        "The value has a type the engine does not accept here (e.g. a string where a list is needed).",
        "before:  workflow: start\nafter:   workflow:\n           - step: start",
    ),
    rule(
        "S103",
        W,
        "unknown key",
        "The engine ignores keys it does not know, so a misspelt key silently does nothing.",
        "before:  nxt: end\nafter:   next: end",
    ),
    rule(
        "S104",
        E,
        "empty workflow",
        "A playbook without steps has nothing to run.",
        "workflow:\n  - step: start\n    tool: {kind: noop}",
    ),
    rule(
        "S105",
        E,
        "entry step missing",
        "Execution starts at the step named `start` (or `executor.spec.entry_step`); without it nothing runs.",
        "before:  - step: begin\nafter:   - step: start",
    ),
    rule(
        "S106",
        E,
        "duplicate step name",
        "Routing and result references address steps by name; two steps with one name are ambiguous.",
        "rename one of the steps and update the `next` entries that target it",
    ),
    rule(
        "S107",
        E,
        "step does nothing",
        "A step needs at least one of `tool`, `next` or `case` (a pure router routes; a tool step acts).",
        "before:  - step: noop\nafter:   - step: noop\n           tool: {kind: noop}",
    ),
    rule(
        "S108",
        E,
        "incomplete loop",
        "A loop needs a collection (`in`) or a cursor, and an `iterator` name to bind each item to.",
        'loop:\n  in: "{{ workload.items }}"\n  iterator: item',
    ),
    rule(
        "S109",
        E,
        "conflicting loop forms",
        "`loop.in` and `loop.cursor` are exclusive; `cursor` requires `spec.mode: cursor` and vice versa.",
        "loop:\n  cursor: {kind: postgres, auth: pg, claim: ...}\n  iterator: row\n  spec: {mode: cursor}",
    ),
    rule(
        "S110",
        E,
        "unknown tool kind",
        "The worker has no executor for this kind, so the step fails at run time.",
        "before:  tool: {kind: pyhton}\nafter:   tool: {kind: python}",
    ),
    rule(
        "S111",
        E,
        "conditional `next` in the v2 dialect",
        "The v2 specification forbids `when`/`then` inside `next`; conditional routing uses `case`.",
        'case:\n  - when: "{{ ok }}"\n    then: {next: [{step: a}]}\nnext: b',
    ),
    rule(
        "S112",
        E,
        "invalid value",
        "The value is not one of those the engine accepts for this key.",
        "before:  mode: paralel\nafter:   mode: parallel",
    ),
    rule(
        "S113",
        E,
        "unsupported document",
        "apiVersion/kind do not name a NoETL playbook generation this tool (or the engine) knows.",
        "apiVersion: noetl.io/v2\nkind: Playbook",
    ),
    rule(
        "S114",
        E,
        "form of another DSL generation",
        "The key or routing shape belongs to another generation of the DSL, and the engine of "
        "this playbook's generation rejects it or silently drops it: a `next` list of "
        "`when`/`then` blocks in a canonical playbook is never routed, a `case` there is "
        "dropped, a canonical `next: {arcs}` is not a v2 or v1 router. noetlc never gives it the "
        "other generation's meaning; the message names the form this generation expects.",
        'canonical, before:  next: [{when: "{{ ok }}", then: [{step: a}]}]\n'
        'canonical, after:   next: {arcs: [{step: a, when: "{{ ok }}"}]}',
    ),
    rule(
        "S115",
        W,
        "implicit entry step",
        "The specification starts at a step named `start`. The canonical engine falls back to "
        "the first step of the workflow, so the playbook runs, but reordering the steps "
        "silently changes where it starts.",
        "executor:\n  spec: {entry_step: begin}   # or name the first step `start`",
    ),
    rule(
        "S116",
        W,
        "NoETL 5 construct accepted, not executed on Airflow",
        "The key (or template filter or function) belongs to NoETL 5 and is read, but the "
        "Airflow runtime has no equivalent yet (a server-side admission policy, a storage "
        "tier of an outside service, worker frame sizing, a filter of NoETL 5's renderer...). "
        "The playbook compiles; that part of its meaning does not run. The message names "
        "the construct and what would be needed.",
        "# keep the key for NoETL; on Airflow, express it with what runs there, e.g.\n"
        "next: {spec: {mode: exclusive}, arcs: [...]}   # instead of on_no_match",
    ),
    rule(
        "S117",
        W,
        "case-v2 action the engine never applies",
        "The case-v2 engine reads each action mapping of a `then` as one action: `next`, "
        "else `set`, else `result` (dc55c492). A `result` in the same mapping as `next` or "
        "`set` is never applied: the step keeps its tool's result (noetlc does the same). A "
        "`set` in the same mapping as `next` is never applied either: that engine does not "
        "write its variables (noetlc still does; playbooks written for it rely on that). The "
        "`args` of a step's plain `next: [{step, args}]` never reach the target: the engine "
        "starts it with no args, only a case rule's `then.next[].args` are passed (noetlc "
        "drops them too). Each is reported here.",
        "before:  then: {set: {n: 1}, result: {from: page}, next: [{step: b}]}\n"
        "after:   then: [{set: {n: 1}}, {result: {from: page}}, {next: [{step: b}]}]\n"
        "before:  next: [{step: b, args: {v: '{{ a.v }}'}}]\n"
        "after:   case: [{when: \"{{ event.name == 'call.done' }}\",\n"
        "                 then: {next: [{step: b, args: {v: '{{ a.v }}'}}]}}]",
    ),
    rule(
        "S118",
        E,
        "routing in the wrong place: the step's edges are dropped",
        "A step's edges live in its own `next` (canonical: `next: {arcs: [...]}`). A `next` or "
        "`arcs` anywhere else (indented under `tool:` or `loop:`, `arcs` beside `next` instead "
        "of under it) or a misspelt `next` is read by no engine: the step has no way on, the "
        "run ends after it and reports success, the steps after it never run. An unknown key "
        "elsewhere is a warning (S103, C516); one that drops the workflow's edges is an error.",
        "before:  tool:\n           kind: python\n           code: result = 1\n"
        "           next: {arcs: [{step: b}]}\n"
        "after:   tool:\n           kind: python\n           code: result = 1\n"
        "         next: {arcs: [{step: b}]}",
    ),
    rule(
        "S119",
        I,
        "read as NoETL 5 because of a construct only NoETL 5 reads",
        "The generations share apiVersion and shape, so a canonical-shaped file is read as "
        "NoETL's April 2026 engine (138c10ed) unless it holds something only NoETL 5 reads: a "
        "step-level `when` or `args`, python `code` that returns at its top level, a pipeline "
        "task in the label form `- fetch: {kind: http, ...}`, a step's `spec.next_mode`, a key "
        "only a NoETL 5 tool reads "
        "(postgres `params`, http `timeout_seconds`, playbook `return_result`...), or an explicit "
        "marker (`executor.profile: local`, a NoETL 5 tool kind...). The note names the construct "
        "that decided, at its position. `--dialect canonical` forces the April reading (where "
        "these constructs are errors), `--dialect noetl5` the NoETL 5 one.",
        "# nothing to fix when the file is NoETL 5; for the April 2026 engine, e.g.\n"
        'before:  - step: load\n           when: "{{ workload.enabled }}"\n'
        "after:   - step: load\n           spec: {policy: {admit: {rules: [...]}}}",
    ),
    rule(
        "S125",
        W,
        "step `args` beside the tool's own `args` (NoETL 5 drops the step's)",
        "NoETL 5's worker gives a step's `args` to its tool only when the tool declares no "
        "`args` of its own (noetl/worker command.rs:612); when it does, every step key is "
        "dropped. noetlc lays the step's args over the tool's, key by key, so the same file "
        "runs with different values on the two engines (docs/semantics.md, the row 'Step "
        "`args` beside a tool's own `args` on NoETL 5'). Keep the values in one place.",
        "before:  - step: start\n           args: {n: 9}\n           tool: {kind: python, "
        "args: {n: 1}, code: ...}\n"
        "after:   - step: start\n           tool: {kind: python, args: {n: 9}, code: ...}",
    ),
)
