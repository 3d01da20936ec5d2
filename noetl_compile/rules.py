"""The catalogue of diagnostic codes: severity, meaning, why it matters, and a fix.

Codes are stable (tests and users' `--select`/`--ignore` lists depend on them) and grouped by
family: Y yaml, S structure, R references, T templates, F flow, C tool config, X security.
`noetlc explain CODE` prints an entry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    severity: Severity
    title: str
    why: str
    fix: str  # a short before/after example


def _rule(code: str, severity: Severity, title: str, why: str, fix: str) -> Rule:
    return Rule(code, severity, title, why, fix.strip("\n"))


RULES: dict[str, Rule] = {
    r.code: r
    for r in [
        # -- files and YAML ------------------------------------------------------------------------
        _rule(
            "E001",
            E,
            "file cannot be read",
            "The path does not exist or is not readable, so nothing in it can be checked.",
            "noetlc check playbooks/   # pass files or folders that exist",
        ),
        _rule(
            "E002",
            E,
            "internal error",
            "noetlc itself failed on this file. The other files were still checked; this one may hide "
            "findings until the bug is fixed.",
            "report the playbook and the message to the noetlc maintainers",
        ),
        _rule(
            "E003",
            I,
            "file skipped: not a playbook, or not a regular file",
            "A YAML file found under a folder that has no NoETL `apiVersion`, no `kind: Playbook` and "
            "no `workflow` (a docker-compose.yml, a CI config) is not checked: reporting its keys "
            "as playbook mistakes would bury the real findings. Files named on the command line "
            "are always checked. A FIFO, device or socket (or a symlink to one) is never opened: "
            "reading it could block forever or never end.",
            "noetlc check playbooks/ --exclude 'docker-compose*.yml'   # or name the file to check it",
        ),
        _rule(
            "E004",
            E,
            "output cannot be written",
            "The DAG file cannot be written safely: the output folder is not a folder or not "
            "writable, or a symlink or special file sits where the DAG file goes.",
            "compile into a plain, writable folder:  noetlc compile playbooks/ -o dags/",
        ),
        _rule(
            "Y001",
            E,
            "invalid YAML",
            "The file is not valid YAML, so no engine can load it.",
            "before:  next:\n\t- step: end   # tab\nafter:   next:\n          - step: end",
        ),
        _rule(
            "Y002",
            E,
            "duplicate key",
            "YAML silently keeps the last of two equal keys; the first value is lost without notice.",
            "before:  tool: {kind: python}\n         tool: {kind: http}\nafter:   keep one `tool:`",
        ),
        _rule(
            "Y003",
            E,
            "invalid mapping key or merge",
            "A mapping key must be a scalar and `<<` must merge mappings.",
            "before:  [a, b]: 1\nafter:   a: 1",
        ),
        _rule(
            "Y004",
            E,
            "recursive alias",
            "An alias that contains itself cannot be expanded into a finite playbook.",
            "before:  a: &x {b: *x}\nafter:   a: {b: 1}",
        ),
        _rule(
            "Y005",
            E,
            "invalid scalar",
            "A tagged or typed scalar (e.g. `!!int abc`) does not hold a value of its type.",
            "before:  shots: !!int many\nafter:   shots: 1024",
        ),
        _rule(
            "Y006",
            E,
            "empty document",
            "The file holds no YAML document, so there is no playbook.",
            "apiVersion: noetl.io/v2\nkind: Playbook\n...",
        ),
        _rule(
            "Y007",
            W,
            "several YAML documents",
            "Engines read one playbook per file; documents after the first are ignored.",
            "split the file at `---` into one file per playbook",
        ),
        _rule(
            "Y008",
            E,
            "alias expansion too large",
            "Aliases that repeat anchors of anchors (a 'billion laughs' document) expand a few lines "
            "into millions of values: no engine can load it, and a DAG built from it would be huge.",
            "before:  b: &b [*a, *a, *a, *a]\n         c: &c [*b, *b, *b, *b]\nafter:   write the values out",
        ),
        # -- structure -----------------------------------------------------------------------------
        _rule(
            "S101",
            E,
            "required key missing",
            "The engine cannot run a playbook or step without this key.",
            "before:  - desc: fetch\nafter:   - step: fetch\n           desc: fetch",
        ),
        _rule(
            "S102",
            E,
            "wrong type",
            "The value has a type the engine does not accept here (e.g. a string where a list is needed).",
            "before:  workflow: start\nafter:   workflow:\n           - step: start",
        ),
        _rule(
            "S103",
            W,
            "unknown key",
            "The engine ignores keys it does not know, so a misspelt key silently does nothing.",
            "before:  nxt: end\nafter:   next: end",
        ),
        _rule(
            "S104",
            E,
            "empty workflow",
            "A playbook without steps has nothing to run.",
            "workflow:\n  - step: start\n    tool: {kind: noop}",
        ),
        _rule(
            "S105",
            E,
            "entry step missing",
            "Execution starts at the step named `start` (or `executor.spec.entry_step`); without it nothing runs.",
            "before:  - step: begin\nafter:   - step: start",
        ),
        _rule(
            "S106",
            E,
            "duplicate step name",
            "Routing and result references address steps by name; two steps with one name are ambiguous.",
            "rename one of the steps and update the `next` entries that target it",
        ),
        _rule(
            "S107",
            E,
            "step does nothing",
            "A step needs at least one of `tool`, `next` or `case` (a pure router routes; a tool step acts).",
            "before:  - step: noop\nafter:   - step: noop\n           tool: {kind: noop}",
        ),
        _rule(
            "S108",
            E,
            "incomplete loop",
            "A loop needs a collection (`in`) or a cursor, and an `iterator` name to bind each item to.",
            'loop:\n  in: "{{ workload.items }}"\n  iterator: item',
        ),
        _rule(
            "S109",
            E,
            "conflicting loop forms",
            "`loop.in` and `loop.cursor` are exclusive; `cursor` requires `spec.mode: cursor` and vice versa.",
            "loop:\n  cursor: {kind: postgres, auth: pg, claim: ...}\n  iterator: row\n  spec: {mode: cursor}",
        ),
        _rule(
            "S110",
            E,
            "unknown tool kind",
            "The worker has no executor for this kind, so the step fails at run time.",
            "before:  tool: {kind: pyhton}\nafter:   tool: {kind: python}",
        ),
        _rule(
            "S111",
            E,
            "conditional `next` in the v2 dialect",
            "The v2 specification forbids `when`/`then` inside `next`; conditional routing uses `case`.",
            'case:\n  - when: "{{ ok }}"\n    then: {next: [{step: a}]}\nnext: b',
        ),
        _rule(
            "S112",
            E,
            "invalid value",
            "The value is not one of those the engine accepts for this key.",
            "before:  mode: paralel\nafter:   mode: parallel",
        ),
        _rule(
            "S113",
            E,
            "unsupported document",
            "apiVersion/kind do not name a NoETL playbook generation this tool (or the engine) knows.",
            "apiVersion: noetl.io/v2\nkind: Playbook",
        ),
        _rule(
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
        # -- references ----------------------------------------------------------------------------
        _rule(
            "S115",
            W,
            "implicit entry step",
            "The specification starts at a step named `start`. The canonical engine falls back to "
            "the first step of the workflow, so the playbook runs, but reordering the steps "
            "silently changes where it starts.",
            "executor:\n  spec: {entry_step: begin}   # or name the first step `start`",
        ),
        _rule(
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
        _rule(
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
        _rule(
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
        _rule(
            "R202",
            E,
            "unknown workbook task",
            "A workbook step names a task the workbook does not define.",
            "workbook:\n  - name: score\n    ...\nworkflow:\n  - step: s\n    tool: {kind: workbook, name: score}",
        ),
        _rule(
            "R203",
            E,
            "unknown connection",
            "`auth` names a credential that is not in the connections file, so the tool cannot connect.",
            "add the connection to the file given with --connections, or fix the name",
        ),
        _rule(
            "R204",
            W,
            "nested playbook not found",
            "A `playbook` tool names a path that none of the checked playbooks declares. NoETL's "
            "catalog finds a child by its exact catalog path (`metadata.path`, else `path`, else "
            "the name), so a call by the name of a playbook that has a path runs nothing; the "
            "compiled call triggers the DAG id of the path as written.",
            "tool: {kind: playbook, path: tests/child}   # metadata.path of the child",
        ),
        _rule(
            "R205",
            E,
            "end_loop does not close a loop",
            "`end_loop` must name a step that has a `loop`.",
            "end_loop: city_loop   # the loop step's name",
        ),
        _rule(
            "R206",
            E,
            "unknown pipeline task",
            "A `jump` policy names a task label that is not in this step's pipeline.",
            "then: {do: jump, to: fetch_page}   # a `name` of a task above",
        ),
        _rule(
            "R207",
            E,
            "executor names an unknown step",
            "`executor.spec.entry_step`/`final_step` must name a step of the workflow.",
            "executor: {spec: {entry_step: start}}",
        ),
        _rule(
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
        _rule(
            "R209",
            E,
            "nested playbook is ambiguous",
            "More than one playbook of the run has the catalog path a `playbook` tool calls; NoETL "
            "runs whichever was registered last, so the call cannot be compiled to one child DAG.",
            "give each playbook its own metadata.path, or check them in separate runs",
        ),
        # -- templates -----------------------------------------------------------------------------
        _rule(
            "T301",
            E,
            "template syntax error",
            "Jinja cannot parse the template, so rendering fails at run time.",
            'before:  "{{ workload.x }"\nafter:   "{{ workload.x }}"',
        ),
        _rule(
            "T302",
            W,
            "unknown name in template",
            "The name is not a workload key, step, loop iterator, ctx/vars variable or runtime name; "
            "lenient rendering leaves the template text unrendered, strict rendering fails. It is "
            "a warning, not an error, because it is close to no declared name (that would be "
            "T307) and may come from the runtime; `--strict` or `--select T302` makes it count.",
            'before:  "{{ wokload.url }}"\nafter:   "{{ workload.url }}"',
        ),
        _rule(
            "T307",
            E,
            "misspelt name in template",
            "The name resolves to nothing, and it is one typo away from a name the playbook declares "
            "in plain sight: a step, a workload key or a loop iterator. Loop-scoped names are "
            "checked alike: `iter.ordr` when the iterator is `order`, `loop.indx` (a loop holds "
            "index, first, length, done), and `order.totl` when the loop's items are mappings "
            "written in the playbook (a YAML list, or the workload key `in` names). The lenient "
            "runtime renders an unknown name by keeping the template text, so the step would "
            "receive the text `{{ transfrom.total }}` as its value and the run would still be "
            "green (`noetlc run --strict` fails the step before its tool runs). A name that is "
            "close to none of these stays a warning (T302): it may be one the runtime provides "
            "that noetlc does not model.",
            'before:  "{{ transfrom.total }}"\nafter:   "{{ transform.total }}"',
        ),
        _rule(
            "T303",
            W,
            "step result may be missing",
            "The template reads a step result, but that step does not run before this one on every path.",
            'route every path through the step, or guard: "{{ s.data if s is defined else none }}"',
        ),
        _rule(
            "T304",
            E,
            "unknown filter",
            "Jinja refuses to compile a template with an unknown filter.",
            'before:  "{{ x | to_json }}"\nafter:   "{{ x | tojson }}"',
        ),
        _rule(
            "T305",
            W,
            "stale result field",
            "The engine no longer produces this field (postgres returns only the last statement's result "
            "since 2026-03: `rows`, `row_count`, `columns`; python code that looks `command_N` up is "
            "reported too; a case-v2 postgres step still returns `command_N` per statement, as its "
            "engine did, so case-v2 playbooks are not told), or the field belongs to another "
            "dialect (a canonical `output` has no case-v2 `response`: the tool result is "
            "`output.data`).",
            'before:  "{{ load.command_0.rows }}"\nafter:   "{{ load.rows }}"',
        ),
        _rule(
            "T306",
            W,
            "step result read before the step runs",
            "The template reads the result of a step that can only run after this one, so it is never available here.",
            "move the reading step after the producing step in the routing",
        ),
        # -- flow ----------------------------------------------------------------------------------
        _rule(
            "F401",
            W,
            "unreachable step",
            "No route from the entry step reaches this step, so it never runs.",
            "route to it from another step's `next`, or delete it",
        ),
        _rule(
            "F402",
            I,
            "cycle",
            "These steps route back into each other (pagination, queues). It compiles: the cycle becomes one "
            "region task that interprets it; make sure a guard ends it.",
            'arcs:\n  - step: fetch_page\n    when: "{{ fetch_page.has_more }}"\n  - step: done',
        ),
        _rule(
            "F403",
            W,
            "ctx variable never written",
            "A template reads `ctx.<name>` but no step, arc or policy writes it and it is not a workload key.",
            'set: {ctx.total: "{{ count.rows[0].n }}"}   # on an upstream step',
        ),
        _rule(
            "F404",
            W,
            "ctx variable written in parallel",
            "Two steps that can run at the same time write the same ctx variable; the last writer wins at random.",
            "write distinct names in each branch and combine them after the join",
        ),
        _rule(
            "F405",
            I,
            "parallel-write search stopped",
            "Finding which writers of a ctx variable can run in parallel compares writers that "
            "sit after a join pair by pair; past 200,000 comparisons in one playbook the "
            "search stops, so races among the remaining variables are not reported.",
            "split the playbook, or write fewer steps to the same ctx variable after a join",
        ),
        # -- tool config ---------------------------------------------------------------------------
        _rule(
            "C501",
            E,
            "python code does not compile",
            "The python tool compiles `code` before running it; a syntax error fails the step every time.",
            "before:  code: |\n  return 1\nafter:   code: |\n  result = 1",
        ),
        _rule(
            "C502",
            E,
            "http without url",
            "An http tool needs `url` (or `endpoint`).",
            'tool: {kind: http, method: GET, url: "{{ api }}/items"}',
        ),
        _rule(
            "C503",
            E,
            "postgres without auth",
            "The canonical engine refuses postgres commands without `auth` (on the tool or in `input`); "
            "older engines also took `credential(s)` or `db_*` fields.",
            'tool: {kind: postgres, auth: "{{ pg_auth }}", query: SELECT 1}',
        ),
        _rule(
            "C504",
            E,
            "SQL tool without SQL",
            "A postgres/duckdb/ducklake/snowflake tool needs SQL: `query`/`queries`, `command`/`commands`, "
            "`cmd`/`cmds`, `sql`, `statement` or `script` (or their `_b64` forms).",
            "tool: {kind: duckdb, query: SELECT 42}",
        ),
        _rule(
            "C505",
            E,
            "gate without timeout",
            "An approve/input gate must time out, or a forgotten execution waits forever.",
            "tool: {kind: gate, gate: approve, subject: Pay?, timeout: 2d}",
        ),
        _rule(
            "C506",
            E,
            "input gate without params",
            "An input gate asks for typed values and needs a non-empty `params` mapping.",
            "params:\n  rate: {type: number, default: 0.05}",
        ),
        _rule(
            "C507",
            E,
            "gate default unusable",
            "`on_timeout: default` needs `default` (approve) or a default on every param (input).",
            "on_timeout: default\ndefault: reject",
        ),
        _rule(
            "C508",
            E,
            "sleep gate needs exactly one of duration/until",
            "A sleep gate waits for a duration or until a time, not both and not neither.",
            "tool: {kind: gate, gate: sleep, duration: 5m}",
        ),
        _rule(
            "C509",
            E,
            "gate in a loop or pipeline",
            "A gate pauses one branch of the execution; it must be a step of its own.",
            "move the gate into its own step before or after the loop",
        ),
        _rule(
            "C510",
            E,
            "invalid gate config",
            "A gate key holds a value the gate cannot use (unknown gate type, bad duration, bad param "
            "type, or a template in a key read when the DAG file is parsed: gate, timeout, "
            "assignees, on_timeout, default, params).",
            "timeout: 1h30m   # or PT1H30M",
        ),
        _rule(
            "C511",
            E,
            "invalid quantum config",
            "The quantum tool needs a circuit for run/submit, a job_id for status/results, and valid "
            "provider/op/shots/transpile values, and `device` CPU or GPU.",
            'tool: {kind: quantum, provider: aer, circuit: "OPENQASM 3.0; ...", shots: 1024}',
        ),
        _rule(
            "C512",
            E,
            "invalid cursor config",
            "A cursor loop needs a driver `kind`, `auth` and a `claim` statement. An unknown driver kind "
            "is only a warning: drivers can be registered under `noetl.cursor_drivers`.",
            'cursor: {kind: postgres, auth: pg_local, claim: "UPDATE ... RETURNING id"}',
        ),
        _rule(
            "C513",
            W,
            "tool key outside its tool",
            "A tool setting (e.g. `command`) sits on the step or inside the tool's `spec`, where the "
            "engine does not read it.",
            "before:  - step: s\n           command: SELECT 1\nafter:   - step: s\n           tool: {kind: postgres, command: SELECT 1}",
        ),
        _rule(
            "C514",
            E,
            "invalid policy rule",
            "A policy rule needs `when` or `else` and a `then` with a known action.",
            "rules:\n  - when: \"{{ output.status == 'error' }}\"\n    then: {do: retry, attempts: 3}",
        ),
        _rule(
            "C515",
            W,
            "tool kind the Airflow runtime cannot execute",
            "The Airflow runtime (airflow_plugin) has no executor for this tool kind, even though "
            "the NoETL engine may run it: the compiled task fails every time it reaches the tool. "
            "Found before deploy, the gap can be closed first.",
            "before:  tool: {kind: snowflake, auth: sf_dw, command: SELECT 1}\n"
            "after:   tool: {kind: postgres, auth: pg_dw, command: SELECT 1}\n"
            "         # or add an executor for the kind to airflow_plugin/tools before deploying",
        ),
        _rule(
            "C516",
            W,
            "unknown tool field",
            "The tool config holds a key its kind does not read (`mehtod:` in an http tool): the "
            "runtime ignores it, so the request goes out with the default instead, and the run "
            "stays green. The fields of every kind are listed in docs/tools/ (generated from "
            "noetl_compile/tool_catalogue.py, the table this check reads).",
            "before:  tool: {kind: http, mehtod: POST, url: ...}\n"
            "after:   tool: {kind: http, method: POST, url: ...}",
        ),
        _rule(
            "C517",
            E,
            "invalid shell config",
            "The shell tool runs `cmds` (a list, one process each) or `command` (one script), with "
            "`env` a mapping and `timeout_seconds` a positive number.",
            'tool: {kind: shell, cmds: ["echo hello"], env: {MODE: test}, timeout_seconds: 60}',
        ),
        # -- lowering ------------------------------------------------------------------------------
        _rule(
            "L701",
            E,
            "cannot compile",
            "The playbook passed `check` but the compiler could not lower it into a DAG: a compiler "
            "bug. The other playbooks are still compiled.",
            "report the playbook and the message to the noetlc maintainers",
        ),
        # -- upgrade -------------------------------------------------------------------------------
        _rule(
            "U801",
            E,
            "no exact equivalent in the target generation",
            "`noetlc upgrade` rewrites a construct only into a form that means the same. This one "
            "has none in the target generation, so it is left as written under a "
            "`# noetlc upgrade:` comment and the file is not written: rewrite it by hand.",
            'before (case-v2):  vars: {id: "{{ result.id }}"}\n'
            'after (canonical): set: {ctx.id: "{{ output.data.id }}"}   # check the value read',
        ),
        _rule(
            "U802",
            E,
            "fix check's errors before upgrading",
            "A playbook `noetlc check` rejects has no meaning to keep: upgrading it could not "
            "tell a rewrite that keeps the meaning from one that changes it.",
            "noetlc check playbook.yaml   # fix what it reports, then upgrade",
        ),
        _rule(
            "U803",
            E,
            "the upgraded playbook does not check as the original did",
            "After rewriting, the upgraded text is checked again; a finding the original did not "
            "have means the rewrite changed something it should not have (a bug of noetlc "
            "upgrade). The file is not written.",
            "report the playbook to the noetlc maintainers; upgrade it by hand meanwhile",
        ),
        _rule(
            "U804",
            W,
            "exact within a bound the upgrade cannot see",
            "The rewrite is written, but it means the same only under a condition that depends on "
            "the data of a run, which the upgrade cannot know: a case-v2 loop or a v1 iterator "
            "becomes a canonical loop, whose result NoETL's canonical engine bounds (the last 128 "
            "iteration results, each over 64 KiB kept as a preview) where the older generations "
            "kept every result whole (and case-v2 iterated a string `in` by character, v1 failed "
            "on it, where canonical takes it as one item). The condition is written above the "
            "construct as a "
            "`# noetlc upgrade:` comment.",
            "# noetlc upgrade: loop of step 'items': the canonical loop result keeps the last 128 "
            '...\nloop: {in: "{{ workload.items }}", iterator: item, spec: {mode: sequential}}',
        ),
        # -- security ------------------------------------------------------------------------------
        _rule(
            "X601",
            E,
            "literal secret",
            "A password, token or key written into a playbook ends up in version control, the catalog and logs.",
            "before:  password: hunter2\nafter:   auth: pg_prod   # a connection / keychain entry",
        ),
        _rule(
            "X602",
            W,
            "credential value left out of the DAG file",
            "A workload key that names a credential (`api_key`, `db_password`) is a Param of the "
            "DAG. Whatever X601 made of its value, `noetlc compile` writes no literal of it into "
            "the DAG file (every scheduler and worker reads that file, and Param defaults are shown "
            "in the trigger form): the default is left out (None), the Param is masked in the "
            "trigger form, and the run request supplies the value. Templates are kept.",
            'before:  api_key: MY_VENDOR_KEY\nafter:   api_key: "{{ env.MY_VENDOR_KEY }}"   # or pass it with --conf',
        ),
    ]
}


def severity_of(code: str) -> Severity:
    return RULES[code].severity


# The docs page that teaches what a rule checks (the site under docs/; README links it).
_DOCS = {
    **dict.fromkeys(("C505", "C506", "C507", "C508", "C509", "C510"), "docs/gates.md"),
    "C511": "docs/quantum.md",
    "C512": "docs/cursor-loops.md",
    **dict.fromkeys(("C502", "C503", "C504", "C513", "C515", "C516"), "docs/tools/index.md"),
    **dict.fromkeys(("T302", "T304", "T307", "R203"), "docs/writing-playbooks.md"),
}


def docs_page(code: str) -> str | None:
    return _DOCS.get(code.upper())


def explain(code: str) -> str | None:
    rule = RULES.get(code.upper())
    if rule is None:
        return None
    fix = "\n".join("    " + line for line in rule.fix.splitlines())
    page = docs_page(rule.code)
    docs = f"\nDocs: {page}\n" if page else ""
    return (
        f"{rule.code} ({rule.severity.label}): {rule.title}\n\nWhy: {rule.why}\n\nFix:\n{fix}\n"
        + docs
    )
