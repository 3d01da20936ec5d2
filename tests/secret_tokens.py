"""Fresh random tokens for the generated secrets tests (test_secrets_generated.py,
test_secrets_disguises.py), from one seed per session printed on failure (``NOETLC_SECRETS_SEED``
replays it)."""

from __future__ import annotations

import os
import random
import string

SEED = int(os.environ.get("NOETLC_SECRETS_SEED", random.SystemRandom().randrange(1 << 30)))


def token(rng: random.Random) -> str:
    """14-22 letters and digits with at least one of each case and a digit: no env var name, no
    placeholder word, nothing a reference could be mistaken for."""
    alphabet = string.ascii_letters + string.digits
    while True:
        body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12, 20)))
        text = rng.choice("QZXJKW") + body + rng.choice("0123456789") + rng.choice("qzxjkw")
        lowered = text.lower()
        if not any(w in lowered for w in ("example", "test", "fake", "todo", "none", "null")):
            return text
