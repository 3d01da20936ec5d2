"""Templates (T3xx): whether a Jinja template parses, and the names, filters and step results it
reads.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, W, rule

RULES = (
    rule(
        "T301",
        E,
        "template syntax error",
        "Jinja cannot parse the template, so rendering fails at run time.",
        'before:  "{{ workload.x }"\nafter:   "{{ workload.x }}"',
    ),
    rule(
        "T302",
        W,
        "unknown name in template",
        "The name is not a workload key, step, loop iterator, ctx/vars variable or runtime name; "
        "lenient rendering leaves the template text unrendered, strict rendering fails. It is "
        "a warning, not an error, because it is close to no declared name (that would be "
        "T307) and may come from the runtime; `--strict` or `--select T302` makes it count.",
        'before:  "{{ wokload.url }}"\nafter:   "{{ workload.url }}"',
    ),
    rule(
        "T307",
        E,
        "misspelt name in template",
        "The name resolves to nothing, and it is one typo away from a name the playbook declares "
        "in plain sight: a step, a workload key or a loop iterator. The lenient runtime renders "
        "an unknown name by keeping the template text, so the step would receive the text "
        "`{{ transfrom.total }}` as its value and the run would still be green. A name that is "
        "close to none of these stays a warning (T302): it may be one the runtime provides "
        "that noetlc does not model.",
        'before:  "{{ transfrom.total }}"\nafter:   "{{ transform.total }}"',
    ),
    rule(
        "T303",
        W,
        "step result may be missing",
        "The template reads a step result, but that step does not run before this one on every path.",
        'route every path through the step, or guard: "{{ s.data if s is defined else none }}"',
    ),
    rule(
        "T304",
        E,
        "unknown filter",
        "Jinja refuses to compile a template with an unknown filter.",
        'before:  "{{ x | to_json }}"\nafter:   "{{ x | tojson }}"',
    ),
    rule(
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
    rule(
        "T306",
        W,
        "step result read before the step runs",
        "The template reads the result of a step that can only run after this one, so it is never available here.",
        "move the reading step after the producing step in the routing",
    ),
)
