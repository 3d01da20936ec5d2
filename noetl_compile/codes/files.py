"""Files and YAML (E0xx, Y0xx): a file that cannot be read, written or skipped, and YAML that
does not load as a playbook.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, I, W, rule

RULES = (
    rule(
        "E001",
        E,
        "file cannot be read",
        "The path does not exist or is not readable, so nothing in it can be checked.",
        "noetlc check playbooks/   # pass files or folders that exist",
    ),
    rule(
        "E002",
        E,
        "internal error",
        "noetlc itself failed on this file. The other files were still checked; this one may hide "
        "findings until the bug is fixed.",
        "report the playbook and the message to the noetlc maintainers",
    ),
    rule(
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
    rule(
        "E004",
        E,
        "output cannot be written",
        "The DAG file cannot be written safely: the output folder is not a folder or not "
        "writable, or a symlink or special file sits where the DAG file goes.",
        "compile into a plain, writable folder:  noetlc compile playbooks/ -o dags/",
    ),
    rule(
        "Y001",
        E,
        "invalid YAML",
        "The file is not valid YAML, so no engine can load it.",
        "before:  next:\n\t- step: end   # tab\nafter:   next:\n          - step: end",
    ),
    rule(
        "Y002",
        E,
        "duplicate key",
        "YAML silently keeps the last of two equal keys; the first value is lost without notice.",
        "before:  tool: {kind: python}\n         tool: {kind: http}\nafter:   keep one `tool:`",
    ),
    rule(
        "Y003",
        E,
        "invalid mapping key or merge",
        "A mapping key must be a scalar and `<<` must merge mappings.",
        "before:  [a, b]: 1\nafter:   a: 1",
    ),
    rule(
        "Y004",
        E,
        "recursive alias",
        "An alias that contains itself cannot be expanded into a finite playbook.",
        "before:  a: &x {b: *x}\nafter:   a: {b: 1}",
    ),
    rule(
        "Y005",
        E,
        "invalid scalar",
        "A tagged or typed scalar (e.g. `!!int abc`) does not hold a value of its type.",
        "before:  shots: !!int many\nafter:   shots: 1024",
    ),
    rule(
        "Y006",
        E,
        "empty document",
        "The file holds no YAML document, so there is no playbook.",
        "apiVersion: noetl.io/v2\nkind: Playbook\n...",
    ),
    rule(
        "Y007",
        W,
        "several YAML documents",
        "Engines read one playbook per file; documents after the first are ignored.",
        "split the file at `---` into one file per playbook",
    ),
    rule(
        "Y008",
        E,
        "alias expansion too large",
        "Aliases that repeat anchors of anchors (a 'billion laughs' document) expand a few lines "
        "into millions of values: no engine can load it, and a DAG built from it would be huge.",
        "before:  b: &b [*a, *a, *a, *a]\n         c: &c [*b, *b, *b, *b]\nafter:   write the values out",
    ),
)
