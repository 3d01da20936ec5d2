"""Lowering (L7xx): a playbook that checks but cannot be compiled into a DAG.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, rule

RULES = (
    rule(
        "L701",
        E,
        "cannot compile",
        "The playbook passed `check` but the compiler could not lower it into a DAG: a compiler "
        "bug. The other playbooks are still compiled.",
        "report the playbook and the message to the noetlc maintainers",
    ),
)
