"""Security (X6xx): secrets written into a playbook, and kept out of the DAG file.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, W, rule

RULES = (
    rule(
        "X601",
        E,
        "literal secret",
        "A password, token or key written into a playbook ends up in version control, the catalog and logs.",
        "before:  password: hunter2\nafter:   auth: pg_prod   # a connection / keychain entry",
    ),
    rule(
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
    rule(
        "X603",
        W,
        "key mixes scripts",
        "A key whose letters come from several scripts (a Cyrillic `а` in `pаssword`) reads "
        "as another key; X601 judges it as the key it imitates (NFKC and Unicode's "
        "confusable skeleton), and this warning names the look-alike.",
        'before:  pаssword: x   # Cyrillic а\nafter:   password: "{{ env.DB_PASSWORD }}"',
    ),
)
