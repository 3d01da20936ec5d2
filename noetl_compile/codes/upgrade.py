"""Upgrade (U8xx): what `noetlc upgrade` cannot carry into the target generation exactly.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, W, rule

RULES = (
    rule(
        "U801",
        E,
        "no exact equivalent in the target generation",
        "`noetlc upgrade` rewrites a construct only into a form that means the same. This one "
        "has none in the target generation, so it is left as written under a "
        "`# noetlc upgrade:` comment and the file is not written: rewrite it by hand.",
        'before (case-v2):  vars: {id: "{{ result.id }}"}\n'
        'after (canonical): set: {ctx.id: "{{ output.data.id }}"}   # check the value read',
    ),
    rule(
        "U802",
        E,
        "fix check's errors before upgrading",
        "A playbook `noetlc check` rejects has no meaning to keep: upgrading it could not "
        "tell a rewrite that keeps the meaning from one that changes it.",
        "noetlc check playbook.yaml   # fix what it reports, then upgrade",
    ),
    rule(
        "U803",
        E,
        "the upgraded playbook does not check as the original did",
        "After rewriting, the upgraded text is checked again; a finding the original did not "
        "have means the rewrite changed something it should not have (a bug of noetlc "
        "upgrade). The file is not written.",
        "report the playbook to the noetlc maintainers; upgrade it by hand meanwhile",
    ),
    rule(
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
    rule(
        "U805",
        W,
        "unsafe fix applied: the rewrite behaves differently",
        "Applied only with `--unsafe-fixes`: the construct has no exact canonical form, so it "
        "was rewritten into the closest one, and the finding (with a `# noetlc upgrade:` note "
        "at the construct) says what changes, per aspect of a run (results, events, steps, "
        "final status). The kinds and their declared differences are one catalogue "
        "(noetl_compile/upgrade/unsafe.py); `noetlc upgrade --report` lists them per file.",
        "noetlc upgrade legacy/ --unsafe-fixes --diff   # read each note before --write",
    ),
)
