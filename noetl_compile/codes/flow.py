"""Flow (F4xx): the step graph: unreachable steps, cycles, ctx variables never or concurrently
written.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import I, W, rule

RULES = (
    rule(
        "F401",
        W,
        "unreachable step",
        "No route from the entry step reaches this step, so it never runs.",
        "route to it from another step's `next`, or delete it",
    ),
    rule(
        "F402",
        I,
        "cycle",
        "These steps route back into each other (pagination, queues). It compiles: the cycle becomes one "
        "region task that interprets it; make sure a guard ends it.",
        'arcs:\n  - step: fetch_page\n    when: "{{ fetch_page.has_more }}"\n  - step: done',
    ),
    rule(
        "F403",
        W,
        "ctx variable never written",
        "A template reads `ctx.<name>` but no step, arc or policy writes it and it is not a workload key.",
        'set: {ctx.total: "{{ count.rows[0].n }}"}   # on an upstream step',
    ),
    rule(
        "F404",
        W,
        "ctx variable written in parallel",
        "Two steps that can run at the same time write the same ctx variable; the last writer wins at random.",
        "write distinct names in each branch and combine them after the join",
    ),
    rule(
        "F405",
        I,
        "parallel-write search stopped",
        "Finding which writers of a ctx variable can run in parallel compares writers that "
        "sit after a join pair by pair; past 200,000 comparisons in one playbook the "
        "search stops, so races among the remaining variables are not reported.",
        "split the playbook, or write fewer steps to the same ctx variable after a join",
    ),
)
