"""Which key names hold a secret: X601's rules and Airflow's sensitive names.

A leaf (standard library and ``lookalike``, itself a leaf) shared by the compiler and the runtime, so a key is a secret by one
rule wherever it is asked: X601 (``check/security.py``) refuses a literal under it, compile
masks its Param (``lower/credentials.py``), and the runtime's redaction (``airflow_plugin/
hooks/redact.py``) masks its value in events, ``noetlc status`` and the NoETL view.

* ``is_secret_key``: X601's rule, by words of the key as it reads (``lookalike.skeleton``: NFKC
  and Unicode's confusables, so `pаssword` with a Cyrillic `а` is `password`) (`db_password`, `X-Api-Key`, `PGPASSWORD`; not
  `password_file`, `token_url`, `max_tokens`, `token_length`);
* ``airflow_hides``: Airflow's secrets masker (``should_hide_value_for_key``) with its default
  names, a substring rule (any key holding `token`); Airflow masks only the *strings* under
  such a key, and so does the runtime for a key only this rule names.
"""

from __future__ import annotations

import functools
import re

from .lookalike import skeleton

__all__ = ["AIRFLOW_SENSITIVE_FIELDS", "airflow_hides", "is_secret_key"]

# Key names are split into words (snake, kebab, camel case, spaces); a key is a credential when
# its words end with one of these phrases, optionally followed by neutral words (`_prod`, `2`).
_PHRASES = (
    ("password",),
    ("passwd",),
    ("pass",),
    ("pw",),
    ("pwd",),
    ("passphrase",),
    ("passcode",),
    ("secret",),
    ("token",),
    ("api", "key"),
    ("apikey",),
    ("credentials",),
    ("private", "key"),
    ("access", "key"),
    ("secret", "key"),
    ("signing", "key"),
    ("encryption", "key"),
    ("master", "key"),
    ("account", "key"),
    ("subscription", "key"),
    ("function", "key"),
    ("functions", "key"),
    ("client", "secret"),
    ("authorization",),
    ("cookie",),
    ("bearer",),
    ("jwt",),
    ("creds",),
    ("ssh", "key"),
    ("license", "key"),
    ("session", "key"),
    ("hmac", "key"),
    ("app", "key"),
    ("auth", "key"),
    ("totp", "seed"),
    ("otp", "seed"),
    ("pin",),
    ("pincode",),
    ("pin", "code"),
    # Plurals: a list of them. Not `tokens` alone (`max_tokens` counts, it holds none).
    ("passwords",),
    ("passwds",),
    ("passphrases",),
    ("secrets",),
    ("api", "keys"),
    ("apikeys",),
    ("private", "keys"),
    ("access", "keys"),
    ("client", "secrets"),
    ("access", "tokens"),
    ("auth", "tokens"),
    ("api", "tokens"),
    ("refresh", "tokens"),
)
_NEUTRAL = frozenset(
    [
        "prod",
        "production",
        "dev",
        "development",
        "test",
        "staging",
        "stage",
        "live",
        "value",
        "val",
        "raw",
        "plain",
        "literal",
        "b64",
        "base64",
        "str",
        "string",
        "text",
        "hex",
        "pem",
        "json",
        # which one of several (`password_old`, `api_key_primary`, `tokens_list`)
        "old",
        "new",
        "current",
        "primary",
        "secondary",
        "backup",
        "default",
        "list",
    ]
)
# Written as one word (`PGPASSWORD`, `dbpassword`, `xapikey`): only words that cannot end an
# innocent word (`pass` ends `bypass`, `pw` ends nothing useful).
_JOINED = re.compile(
    r"(?:password|passwd|passphrase|secret|token|apikey|privatekey|accesskey|secretkey"
    r"|clientsecret|authorization|credentials|subscriptionkey|pwd)$"
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@functools.lru_cache(maxsize=8192)
def is_secret_key(key: object) -> bool:
    """`password`, `db_password`, `dbPassword`, `X-Api-Key`, `PGPASSWORD`, `Password_Prod`,
    `Ocp-Apim-Subscription-Key` ...; `password_file`, `token_url`, `max_tokens` are not."""
    if not isinstance(key, str) or len(key) > 200:
        return False
    if not key.isascii():  # `pаssword` (Cyrillic а), `ｐａｓｓｗｏｒｄ`: the key it imitates
        key = skeleton(key)
    words = [w.lower() for w in _WORDS.findall(key)]
    if len(words) > 1 and words[-2:] == ["b", "64"]:  # `KeyB64`: base64, a neutral suffix
        words[-2:] = ["b64"]
    versioned = False  # `password_v2`: a version number is a neutral suffix
    while words and (
        words[-1] in _NEUTRAL or words[-1].isdigit() or (versioned and words[-1] == "v")
    ):
        versioned = words.pop().isdigit()
    if not words:
        return False
    if words[0] == "x" and words[-1] in ("key", "auth") and len(words) > 1:  # X-Api-Key, X-Auth
        return True
    if any(tuple(words[-len(p) :]) == p for p in _PHRASES):
        return True
    return _JOINED.search("".join(words)) is not None


# airflow._shared.secrets_masker.secrets_masker.DEFAULT_SENSITIVE_FIELDS (Airflow 3.3).
AIRFLOW_SENSITIVE_FIELDS = frozenset(
    {
        "access_key",
        "access_token",
        "api_key",
        "apikey",
        "auth_header",
        "authorization",
        "bearer",
        "connection_string",
        "dsn",
        "passphrase",
        "passwd",
        "password",
        "private_key",
        "proxy",
        "proxy_password",
        "proxies",
        "secret",
        "service_account",
        "service_key",
        "token",
        "keyfile_dict",
        "webhook_url",
    }
)
_NON_WORD = re.compile(r"\W+")


@functools.lru_cache(maxsize=4096)
def airflow_hides(name: str) -> bool:
    """Airflow's ``SecretsMasker.should_hide_value_for_key`` with the default names (cached:
    the redaction asks it for every key of every event, and the keys repeat)."""
    normalized = _NON_WORD.sub("_", name.strip().lower())
    return any(field in normalized for field in AIRFLOW_SENSITIVE_FIELDS)
