"""Differences (D9xx): a construct whose run on Airflow differs from its run on NoETL's engine.

Each code names one row of docs/semantics.md section 1 ("Where noetlc deliberately does not copy
NoETL"): the playbook is valid and noetlc runs it as that row says, but NoETL's engine of the
playbook's generation ends it otherwise. They are infos: nothing is wrong with the playbook; a
team moving it from NoETL sees each difference at its construct before the run, not after
(tests/test_semantics_rows.py walks section 1 and holds every row a playbook's text can trigger
to a code here or in another family).

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import I, rule

_ROW = "docs/semantics.md section 1, row "
_NOETL5_ROW = "docs/semantics.md section 1, NoETL 5 table, row "

RULES = (
    rule(
        "D901",
        I,
        "runs differently on NoETL: a step without a tool",
        "A step with no tool that only routes issues no command on NoETL's engine, so the "
        "execution never reaches a terminal status there; noetlc passes through it and finishes "
        "the run (" + _ROW + "'A step without a tool').",
        "give it a tool if the playbook must also run on NoETL:\n  tool: {kind: noop}",
    ),
    rule(
        "D903",
        I,
        "runs differently on NoETL: a loop over an empty collection or null",
        "NoETL issues no command for an empty (or null) loop collection and its execution stays "
        "RUNNING (the case-v2 engine refuses an empty entry loop with HTTP 500); noetlc completes "
        "the loop step with an empty aggregate and goes on (" + _ROW + "'A loop over an empty "
        "collection, or over `null`').",
        "nothing to change for Airflow; on NoETL, route around an empty collection first",
    ),
    rule(
        "D904",
        I,
        "runs differently on NoETL: a pipeline or policy step with no `next`",
        "NoETL's engine leaves the execution RUNNING after a pipeline (or a tool with "
        "`spec.policy.rules`) that has no `next`; noetlc ends the run there (" + _ROW + "'A "
        "pipeline step ... with no `next`').",
        "next:\n  - step: end   # a terminal step with a tool, if the playbook must end on NoETL",
    ),
    rule(
        "D905",
        I,
        "runs differently on NoETL: a case-v2 retry on `call.error`",
        "The case-v2 engine (dc55c492) re-issues the call without bound and the execution never "
        "ends; noetlc stops after `max_attempts` and fails the step (" + _ROW + "'case-v2 "
        "`case: [{when: call.error, then: {retry: ...}}]`').",
        "keep `max_attempts`: it is the documented bound, which noetlc honours",
    ),
    rule(
        "D906",
        I,
        "runs differently on NoETL: a recovery arc after a failed call",
        "NoETL marks the execution failed at the error; its recovery step races that mark and "
        "sometimes never runs, and a step after it never does. noetlc runs the recovery chain to "
        "its end and ends the run failed (" + _ROW + "'A recovery step reached by a "
        "`call.error` arc').",
        "nothing to change; expect the recovery chain to run to its end on Airflow",
    ),
    rule(
        "D907",
        I,
        "runs differently on NoETL: a canonical loop's `results`",
        "NoETL's engine hands templates one result-store record per iteration (`r.field` of an "
        "item fails there); noetlc hands the iteration results themselves (" + _ROW + "'A "
        "canonical loop step's `results`').",
        "read an item's fields as written (`{{ r.sq }}`): noetlc's results are the values",
    ),
    rule(
        "D908",
        I,
        "runs differently on NoETL: a parallel loop's aggregate",
        "NoETL's aggregate of a parallel loop misses iterations that finish together, may start "
        "the next step twice and orders results by completion; noetlc counts each iteration "
        "once, in collection order (" + _ROW + "'A parallel loop whose items finish together').",
        "nothing to change; `stats.total` equals the number of items on Airflow",
    ),
    rule(
        "D909",
        I,
        "runs differently on NoETL: a v1 iterator",
        "58c2a16b runs every item inside one worker job (one call) and `{{ step }}` is the plain "
        "list; noetlc runs one call per item and the step's result is the loop record, with "
        "`{{ step.result }}` the plain list (" + _ROW + "'A v1 `type: iterator` step').",
        "read the items' results as `{{ step.result }}` or `{{ step.results }}`",
    ),
    rule(
        "D910",
        I,
        "runs differently on NoETL: a v1 value that is one whole template",
        "58c2a16b's worker renders `{{ a.x }}` to text ('5', 'True'); noetlc keeps the value's "
        "type (5, True), as the later engines do (" + _ROW + "'A v1 `with` value ... that is "
        "one whole template').",
        "nothing to change; code that converted the text with int() still works",
    ),
    rule(
        "D911",
        I,
        "runs differently on NoETL: a v1 argument spelling that engine ignores",
        "58c2a16b reads a step's arguments from `with`/`args` only and an arc's from "
        "`data`/`input` only (the arc from `start` to the first step: `data` only); noetlc "
        "reads every spelling as arguments (" + _ROW + "'v1 argument spellings').",
        "a step's `with`, an arc's `data`: the spellings every engine reads",
    ),
    rule(
        "D912",
        I,
        "runs differently on NoETL: a v1 arc that routes a failure",
        "58c2a16b fails the execution at the first failed action and takes no arc; noetlc takes "
        "an arc whose condition addresses the failure and the run completes (" + _ROW + "'A v1 "
        "step whose code raises, with an arc whose `when` addresses the failure').",
        "nothing to change for Airflow; on that engine the recovery step is unreachable",
    ),
    rule(
        "D913",
        I,
        "runs differently on NoETL: v1 python code without `main`",
        "58c2a16b fails python code that defines no `main` ('Main function must be defined in "
        "Python task.'); noetlc runs it and takes `result` (" + _ROW + "'v1 python code that "
        "sets `result` and defines no `main`').",
        "def main():\n    return {...}",
    ),
    rule(
        "D914",
        I,
        "runs differently on NoETL: a v1 conditional `next`",
        "58c2a16b finalizes an execution only when every typed step completed, so a branch not "
        "taken keeps it RUNNING; noetlc ends the run when the branch taken ends ("
        + _ROW
        + "'A v1 conditional `next` whose other branch is not taken').",
        "nothing to change for Airflow",
    ),
    rule(
        "D915",
        I,
        "runs differently on NoETL: v1 `when`/`then`/`else` blocks",
        "58c2a16b's broker reads only `step` of a `next` entry: neither block runs and the "
        "execution stays RUNNING; noetlc follows the whitepaper's blocks (" + _ROW + "'v1 "
        "`next: [{when, then: [...]}, {else: [...]}]`').",
        "nothing to change for Airflow",
    ),
    rule(
        "D916",
        I,
        "runs differently on NoETL: a step's result rendered whole",
        "NoETL's engine renders `{{ step }}` as its result-store envelope (`ref`, `_ref`, "
        "`context`, ...), or '' for a failed step; noetlc renders the result ("
        + _ROW
        + "'`{{ step }}` rendered as a whole value').",
        "read the fields you need (`{{ step.field }}`): they read the same on both",
    ),
    rule(
        "D917",
        I,
        "runs differently on NoETL: a `next` list read as an exclusive router",
        "A playbook with no mark of the case-v2 generation is read as canonical: `next: [a, b]` "
        "without conditions starts only `a`. The case-v2 engine (dc55c492) starts every listed "
        "step, so a case-v2 playbook read as canonical silently drops branches ("
        + _ROW
        + "'A playbook recorded on the case-v2 engine that carries no mark of that "
        "generation').",
        "case-v2: noetlc check --dialect case-v2 (or a `case` rule); canonical fan-out:\n"
        "  next:\n    spec: {mode: inclusive}\n    arcs: [{step: a}, {step: b}]",
    ),
    rule(
        "D918",
        I,
        "runs differently on NoETL: several statements in one postgres call",
        "NoETL runs each statement in autocommit: when a later one fails the earlier writes "
        "stay; noetlc runs the call's statements in one transaction that rolls back together ("
        + _ROW
        + "'A postgres call whose later statement fails').",
        "nothing to change; a failed call leaves nothing behind on Airflow",
    ),
    rule(
        "D919",
        I,
        "runs differently on NoETL: a duckdb step's result",
        "NoETL's duckdb result is `{executed_commands, command_N_rows, command_N_sample, ...}` "
        "with no named columns; noetlc's is the postgres tool's shape (`rows` with named "
        "columns, `row_count`, ...) plus `command_N_rows`/`command_N_sample` (" + _ROW + "'A "
        "duckdb step's result').",
        "read `{{ step.rows[0].name }}` as for postgres",
    ),
    rule(
        "D920",
        I,
        "runs differently on NoETL: a postgres transfer source's error text",
        "A failed postgres transfer source quotes noetlc's server-side cursor "
        "(`DECLARE ... CURSOR FOR SELECT ...`) where NoETL quotes its plain SELECT ("
        + _ROW
        + "'The error text of a failed postgres transfer source').",
        "match an error on its SQLSTATE or message, not on the statement text",
    ),
    rule(
        "D921",
        I,
        "runs differently on NoETL: a case-v2 `then.sink` with `tool` and `args`",
        "dc55c492 refuses this sink form at run time, writes nothing and completes the run; "
        "noetlc writes the row (" + _ROW + "'A case-v2 `then.sink` written as the seed "
        "playbooks write it').",
        "nothing to change for Airflow; on that engine the row is never written",
    ),
    rule(
        "D922",
        I,
        "runs differently on NoETL: `response` in a case-v2 `case` `when`",
        "dc55c492 binds `response` in a case rule to its worker's envelope `{id, status, data}`, "
        "so `response.status_code` is undefined there after a successful call; noetlc binds it "
        "to the step's result (" + _ROW + "'`response` in a case-v2 `case` `when`').",
        "nothing to change for Airflow: `response.status_code` reads the status",
    ),
    rule(
        "D923",
        I,
        "runs differently on NoETL: a step's result read through `ctx`",
        "NoETL's `ctx.<step>` is the step's result-store envelope (the result's keys plus `ref`, "
        "`_ref`, `data`, `status`, ...); noetlc's is the result itself (" + _ROW + "'`{{ ctx }}` "
        "rendered whole, after a step finished').",
        "read `{{ step.field }}` or `{{ ctx.step.field }}`: they read the same on both",
    ),
    rule(
        "D924",
        I,
        "runs differently on NoETL: python `result = None`",
        "NoETL stores a `None` result as `{_value: None}` (plus the worker's `command_id`); "
        "noetlc keeps `None` (" + _ROW + "'A python step whose code sets `result = None`').",
        "nothing to change; test the result with `is none` on Airflow",
    ),
    rule(
        "D925",
        I,
        "runs differently on NoETL: a pipeline rule's `set` of `ctx`",
        "NoETL's worker renders the value to text and later steps read `{{ ctx.x }}` as ''; "
        "noetlc keeps the value's type and later steps read it (" + _ROW + "'A pipeline "
        "rule's `set: {ctx.x: ...}`').",
        "nothing to change for Airflow",
    ),
    rule(
        "D926",
        I,
        "runs differently on NoETL: `ctx` in a case-v2 template",
        "dc55c492 has no `ctx` in its render context (`{{ ctx.k }}` stays text there); noetlc "
        "keeps `ctx` in case-v2 templates, as the formal specification's case example needs ("
        + _ROW
        + "'A case-v2 template reading `ctx`').",
        "read the value from `vars` or a step's result if the playbook must also run on dc55c492",
    ),
    rule(
        "D934",
        I,
        "runs differently on NoETL: a v1 step key that never reaches the tool",
        "58c2a16b's broker copies a fixed list of step fields onto the job: a step's `timeout` "
        "(http: 30 s applies) and `code_b64`/`code_base64` (python: 'No code provided') are not "
        "on it, and its http plugin takes the step's empty `data` map as the query before it "
        "looks at `params`, so `params` is never sent; noetlc applies each key ("
        + _ROW
        + "'A v1 step's `params`, `timeout` or `code_b64`').",
        "inline `code`, and put the query under `data:`, if the playbook must also run on 58c2a16b",
    ),
    rule(
        "D938",
        I,
        "runs differently on NoETL: a transfer that fails before it copies",
        "A transfer without a `source` or `target`, with an end naming no "
        "`tool`/`kind`/`type`, or with a target lacking `table`/`query` or `auth`, fails on "
        "NoETL (`'target' configuration is required`, `source.tool is required`, `target.auth "
        "is required`) and on noetlc (its own words); an http source into a table "
        "without `target.mapping` makes NoETL insert no columns (`INSERT INTO t () VALUES ()`, "
        "a syntax error) where noetlc inserts each record's fields into the columns of the same "
        "name. A case-v2 step's result is dc55c492's `{error: 'Transfer failed: <text>', status: "
        "failed, error_type: ValueError}` in both, the text noetlc's ("
        + _ROW
        + "'A transfer that fails on NoETL before it copies').",
        "name each end's type and the target's columns:\n"
        "  source: {tool: http, ...}\n  target: {tool: postgres, mapping: {column: field}}",
    ),
    rule(
        "D939",
        I,
        "runs differently on NoETL: `headers` in a case-v2 http step's `args`",
        "dc55c492's worker hands a step's `args` to the http tool as its overrides; the tool "
        "merges `args.headers` into its `headers` before it has set them and fails the call "
        "(`cannot access local variable 'headers'`), where `args.params` and `args.payload` "
        "are merged as meant; noetlc merges the headers over the tool's and sends them ("
        + _ROW
        + "'`headers` in the `args` of a case-v2 http step').",
        "put the headers on the tool if the playbook must also run on dc55c492:\n"
        "  tool: {kind: http, headers: {...}}",
    ),
    rule(
        "D940",
        I,
        "runs differently on NoETL: a case-v2 postgres `pool` without `timeout`",
        "dc55c492's postgres tool drops the pool settings left unset and opens its connection "
        "pool with `timeout=None`, so taking a connection fails every call (`unsupported "
        "operand type(s) for +: 'float' and 'NoneType'`); noetlc runs each call on its own "
        "connection and ignores `pool` (" + _ROW + "'A case-v2 postgres tool's `pool` without "
        "`timeout`').",
        "give the pool a timeout if the playbook must also run on dc55c492:\n  pool: {timeout: 10}",
    ),
    rule(
        "D941",
        I,
        "runs differently on NoETL: a `case` rule's `then.next` on the canonical engine",
        "A playbook whose only case-v2 mark is `case` may be a canonical one: 138c10ed's worker "
        "evaluates such a rule and reports `case.evaluated`, but no command follows, so neither "
        "branch runs and the run completes after the step; noetlc reads `case` as case-v2 and "
        "takes the branch (" + _ROW + "'A `case` rule with `then.next` in a playbook').",
        "route with arcs if the playbook must also run on the canonical engine:\n"
        "  next: {arcs: [{step: ..., when: ...}]}",
    ),
    rule(
        "D942",
        I,
        "runs differently on NoETL: a case-v2 python step returning a list or a scalar",
        "dc55c492's worker cannot report a result that is not a mapping (its event is refused, "
        "HTTP 422, three times): the call fails and the run ends failed; noetlc keeps the value "
        "(" + _ROW + "'A case-v2 python step whose result is a list or a scalar').",
        "return a mapping (`{'items': [...]}`) if the playbook must also run on dc55c492",
    ),
    rule(
        "D943",
        I,
        "runs differently on NoETL: a case-v2 case rule routing on `error`, `response` or `result`",
        "dc55c492 evaluates a step's case rules on more than one of the step's events: a rule on "
        "`error` routes its branch twice after a successful call, both rules' branches run after "
        "a failed one, and a run whose call failed completes; noetlc takes the first rule that "
        "holds, once, and a failed call no rule handles ends the run failed ("
        + _ROW
        + "'A case-v2 step whose case rules route on `error`, `response` or `result`').",
        "make each branch's steps safe to run twice if the playbook must also run on "
        "dc55c492 (it may run a branch twice, or both)",
    ),
    rule(
        "D944",
        I,
        "runs differently on NoETL: `output.ref` or `output.context` in a canonical template",
        "138c10ed's output view takes `ref` and `context` from the worker's result-store record, "
        "a mapping after every call (failed or not; with no result of its own, `output.data` is "
        "that context too, so `output.data` read whole is a mapping after a failed call); "
        "noetlc stores results in XCom, has no such record and binds them to none (after a "
        "failed call `output.data` is none) ("
        + _ROW
        + "'`output.ref` or `output.context` in a canonical template').",
        "read the step's result (`output.data`, `{{ step }}`) rather than NoETL's storage "
        "record, and route a failure on `output.status` or `error`, if the playbook must also "
        "run on 138c10ed",
    ),
    rule(
        "D948",
        I,
        "runs differently on NoETL: a loop item's position (`loop.first`, `loop.index`)",
        "138c10ed and dc55c492 render an item's templates before the loop's counter follows the "
        "item: recorded, `loop.first` is false and `loop.index` 0 on the item the step records, "
        "and `iter` also holds the engine's `loop_event_id`; noetlc gives each item its own "
        "index (0, 1, ...) and `loop.first` true on the first only ("
        + _ROW
        + "'A loop item's `loop.first`').",
        "do first-item work in a step before the loop, and carry a position in the items "
        "themselves, if the playbook must also run on NoETL's engine",
    ),
    rule(
        "D949",
        I,
        "runs differently on NoETL: a step's name in a case-v2 `args` value",
        "dc55c492 does not hand a case-v2 tool's `args` the earlier step's result under its "
        "name: recorded, a comparison with the result is false and the value arrives as text "
        "(`'False'`); noetlc binds the result and keeps the value's type ("
        + _ROW
        + "'A step's name in a case-v2 `args` value').",
        "pass the value through `vars` (`vars: {a: '{{ result.a }}'}` in the step's case rule) "
        "if the playbook must also run on dc55c492",
    ),
    rule(
        "D950",
        I,
        "runs differently on NoETL: a failed step's name read after its failure",
        "138c10ed keeps no step result for a failed call, so a step reached after the failure "
        "finds the failed step's name undefined; noetlc binds the failed step's error document "
        "(`{status: error, error: {...}}`) to it ("
        + _ROW
        + "'A failed step's name in a later step').",
        "read the failure where the engine offers it (`error`, `output.error` in the arc's "
        "`when` or `set`) if the playbook must also run on 138c10ed",
    ),
    rule(
        "D954",
        I,
        "runs differently on NoETL: a canonical `kind: playbook` call's result",
        "138c10ed's worker does not return the child's step result: without `return_step` its "
        "playbook plugin returns the start record {id, status: success, data: {execution_id, "
        "status: started, ...}} at once; with it the worker polls the child and returns the "
        "server's status document (or {status: started, ..., async: false} after `timeout` "
        "seconds); noetlc waits for the child and returns the named (or last) step's result, as "
        "NoETL's playbook reference and its composition fixture read it (" + _ROW + "'A "
        "canonical `kind: playbook` call's result').",
        "read the child's outcome from its own sink (a table it writes) if the playbook must "
        "also run on 138c10ed",
    ),
    rule(
        "D952",
        I,
        "runs differently on NoETL: a case-v2 rule's `sink` and the step's result",
        "dc55c492's worker runs a case rule's `sink` and reports its summary only in a "
        "`sink.done` event: the step's result stays the call's; noetlc adds the summary "
        "(`{status, kind, table, mode, rows_written}`) to the step's result as `_sink` ("
        + _ROW
        + "'A case-v2 rule's `sink` and the step's result').",
        "read the call's fields, not `_sink`, downstream if the playbook must also run on dc55c492",
    ),
    rule(
        "D953",
        I,
        "runs differently on NoETL: a case-v2 rule's `sink` that fails at run time",
        "dc55c492's worker catches every error of a case rule's `sink` (a kind its sink "
        "executor has no handler for, a `tool` neither text nor a mapping, a template that does "
        "not render) and records only a `sink.error` event; a postgres sink that cannot connect "
        "(no `auth`) or whose write the database refuses returns an error summary, recorded as "
        "`sink.done`. Either way the step and the run complete and nothing is written; noetlc "
        "fails the step when the sink cannot run (" + _ROW + "'A case-v2 rule's `sink` that "
        "fails at run time').",
        "name a kind the engine writes (postgres, duckdb, python, http, event_log) and its "
        "`auth` if the playbook must also run on dc55c492: there a mistake loses the rows "
        "without a failure",
    ),
    rule(
        "D960",
        I,
        "runs differently on NoETL: a case-v2 postgres `auth` mapping naming another service",
        "dc55c492 resolves an `auth` mapping's service from its `service`, else `type`, else "
        "`tool`, and its postgres tool takes the credential's connection fields only when that "
        "service is 'postgres': any other fails the call ('Postgres connection is not "
        "configured'); noetlc connects with the Airflow connection the mapping names ("
        + _ROW
        + "'A case-v2 postgres `auth` mapping that names another service').",
        "drop the key (the credential's own type decides) or write `postgres` if the playbook "
        "must also run on dc55c492",
    ),
    rule(
        "D951",
        I,
        "runs differently on NoETL: a case-v2 rule's `collect`",
        "dc55c492's engine reads a case rule's `collect` (`strategy`, `path`, `into`) but looks "
        "for the data in the call event's `response`/`result`, which its worker never sends, so "
        "it collects nothing and the step's result stays the call's; noetlc adds the collected "
        "values to the step's result under `into` (" + _ROW + "'A case-v2 rule's `collect`').",
        "read the pages from the step's result downstream if the playbook must also run on "
        "dc55c492",
    ),
    rule(
        "D935",
        I,
        "runs differently on NoETL: a canonical tool's `output:` block",
        "138c10ed's worker hands a tool's `output` to its result store (`inline_max_bytes`, "
        "`output_select`, `store`): without a `store` the step's stored result is only "
        "`{command_id}`, a `store.kind: memory` result cannot be read back (404), and "
        "`output.select` is refused at registration; noetlc keeps results in XCom, ignores the "
        "block and the step's result is its value (" + _ROW + "'A canonical tool's `output:` "
        "block').",
        "drop `output:` (noetlc keeps every result), or give it a `store` if the playbook must "
        "also run on 138c10ed",
    ),
    rule(
        "D936",
        I,
        "runs differently on NoETL: a canonical python tool's `args`",
        "138c10ed's worker replaces a tool's `args` with its `input` before the call "
        "(v2_worker_nats.py: `task_config['args'] = merged_input`), so a name only `args` binds "
        "is undefined there and the call fails; noetlc binds `args` as the formal "
        "specification's python tool does (" + _ROW + "'A canonical python tool's `args`').",
        "bind the names with `input:` (both engines read it)",
    ),
    rule(
        "D937",
        I,
        "runs differently on NoETL: a pipeline `break` at `init_page` before `paginate`",
        "138c10ed's task-sequence executor carries a guard written for one of NoETL's own "
        "pagination playbooks: a `break` at a pipeline whose only finished task is `init_page`, "
        "with tasks named `paginate` and `fetch_page`/`save_page` after it and a `patient_count` "
        "above 0 anywhere in the context, fails the step (TASK_SEQUENCE_NO_PROGRESS); noetlc "
        "ends the pipeline as any `break` ("
        + _ROW
        + "'A pipeline `break` at its first task `init_page` before tasks named `paginate` ...').",
        "rename the tasks if the playbook must also run on 138c10ed",
    ),
    rule(
        "D945",
        I,
        "runs differently on NoETL: a v1 `loop:` block on a step",
        "58c2a16b's broker copies a fixed list of step fields onto the job and `loop` is not on "
        "it (its own `normalize_step` would turn `loop: {in, iterator}` into an iterator, but "
        "never sees it): the step runs no item, and a step without `type` is a control step "
        "after which the execution stays RUNNING; noetlc runs the loop as the v1 whitepaper "
        "describes it (" + _ROW + "'A v1 step's `loop:` block').",
        "write it as a `type: iterator` step if the playbook must also run on 58c2a16b:\n"
        "  type: iterator\n  collection: ...\n  element: item\n  task: {...}",
    ),
    rule(
        "D946",
        I,
        "runs differently on NoETL: a v1 step's `save` block",
        "58c2a16b's worker runs the save after the call and keeps its outcome out of the step's "
        "result (under the envelope's `meta`); a save that fails (no endpoint, no statement, a "
        "refused request) is only noted there as `meta.save_error` and the step succeeds, a "
        "python save without `code` runs a default that prints the data, and a duckdb save "
        "without `table` writes to `save_data`. noetlc records the "
        "outcome as the result's `_sink` and a failed save fails the step (" + _ROW + "'A v1 "
        "step's `save` block').",
        "give the save everything it needs (`code`, `url`, a statement or `table`) so that it "
        "cannot fail; on 58c2a16b, check the written data yourself",
    ),
    rule(
        "D947",
        I,
        "runs differently on NoETL: a v1 first step that is not an action",
        "58c2a16b dispatches the first step of `start`'s `next` directly; when that step is not "
        "an action (no `type`, a python step without `code`, a `route`), it marks it completed "
        "without following its `next`, and the execution stays RUNNING; noetlc passes through "
        "it and goes on (" + _ROW + "'A v1 first step that is not an action').",
        "give the first step a `type` (and its `code`) if the playbook must also run on 58c2a16b",
    ),
    rule(
        "D955",
        I,
        "runs differently on NoETL: a v1 `type: playbook` call's result",
        "58c2a16b's playbook plugin posts the child's execution to the server and does not wait "
        "for it: the step's result is the execution record the server answers ({id, path, type: "
        "playbook, status: running, result: {status: success, message: 'Execution accepted "
        "...'}, execution_id, ...}); noetlc waits for the child and returns its last step's "
        "result, as it does for the later engines (" + _ROW + "'A v1 `type: playbook` call's "
        "result').",
        "read the child's outcome from its own sink (a table it writes) if the playbook must "
        "also run on 58c2a16b",
    ),
    # NoETL 5 (docs/semantics.md section 1, table "NoETL 5: where noetlc departs from its source")
    rule(
        "D956",
        I,
        "runs differently on NoETL: a NoETL 5 cursor claim that is no SELECT/WITH",
        "NoETL 5's postgres tool reads rows only from a statement starting with SELECT or WITH "
        "(noetl/tools postgres.rs:326); the server takes a claim's frame from those rows, finds "
        "none after an `UPDATE ... RETURNING` and drains the loop at once, its first row left "
        "claimed; noetlc works every row the claim returns (" + _NOETL5_ROW + "'A cursor claim "
        "written `UPDATE ... RETURNING` on NoETL 5').",
        "wrap the claim so that it starts with WITH:\n"
        "  claim: WITH c AS (UPDATE jobs SET ... RETURNING id) SELECT id FROM c",
    ),
    rule(
        "D957",
        I,
        "runs differently on NoETL: a NoETL 5 transfer's `target.query`",
        "NoETL 5's transfer declares `target.query` and never reads it: the rows go into "
        "`target.table`, and a target without one fails (`Target table name required`); noetlc "
        "runs the statement once per row (" + _NOETL5_ROW + "'A transfer's `target.query` on "
        "NoETL 5').",
        "give `target.table` (and `mapping`) instead if the playbook must also run on NoETL 5",
    ),
    rule(
        "D958",
        I,
        "runs differently on NoETL: a NoETL 5 cursor loop step's result read",
        "NoETL 5's result of a drained cursor loop is `{cursor: drained, frames: N}`; noetlc's "
        "is the loop's aggregate (`results`, `stats`, `omitted_results_count`), as for every "
        "loop (" + _NOETL5_ROW + "'A cursor loop's step result on NoETL 5').",
        "read what the rows wrote (a table) rather than the loop's result if the playbook must "
        "also run on NoETL 5",
    ),
    rule(
        "D962",
        I,
        "runs differently on NoETL: a template in a NoETL 5 `next` target's `args`",
        "NoETL 5 merges a target's `args` into the target's context as written (noetl/server "
        "orchestrator.rs:1483, `with_params`: no rendering; its CLI alike), so the target reads "
        "the template's text; noetlc renders the value where the arc is taken ("
        + _NOETL5_ROW
        + "'A template in a `next` target's `args`').",
        "write the template in the target step's own fields if the playbook must also run on "
        "NoETL 5",
    ),
    rule(
        "D963",
        I,
        "runs differently on NoETL: a loop in a NoETL 5 playbook for the CLI's local runtime",
        "NoETL 5's CLI (`noetl run -r local`, 5.3.2) does not read `loop:`: the tool runs once, "
        "its item's tag left as text; noetlc runs one call per item, as NoETL 5's server does ("
        + _NOETL5_ROW
        + "'A step `loop:` run by NoETL 5's CLI').",
        "run the playbook on NoETL 5's server (`noetl run -r distributed`) to compare a loop",
    ),
)
