"""Table (a)'s specs for NoETL 138c10ed (canonical) rows recorded after the first rounds.

The same shape as ``dsl_key_specs.CANONICAL`` (name, engine, key, default, file, playbook with
the key absent, playbook with it present); the builders come from ``dsl_key_specs`` and
``dsl_key_specs_older``. Kept apart so that those modules stay under the size the project keeps.
"""

from __future__ import annotations

CANONICAL_MORE: tuple[tuple[str, str, str, str, str, dict, dict], ...] = ()
