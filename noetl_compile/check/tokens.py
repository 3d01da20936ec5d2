"""Secrets known by their form, wherever they sit: token formats and random-looking strings.

The formats are those of the maintained scanners (detect-secrets' plugins, gitleaks' rules)
that have a fixed prefix or shape, written here as linear patterns: detect-secrets itself is not
a dependency (ARCHITECTURE.md, "Literal secrets", says why: some of its patterns are quadratic on
adversarial text and its scan is two orders slower than `noetlc check`). ``random_token`` is its
base64 entropy detector with a limit that follows the length. Pure text functions; ``secrets.py``
decides what is a reference and reports.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections import Counter

TOKEN_SHAPES = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,64}")),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----")),
    ("a Slack token", re.compile(r"\bxox[bpars]-[A-Za-z0-9-]{10,255}")),
    ("a JSON web token", re.compile(r"\beyJ[\w-]{8,4096}\.eyJ[\w-]{8,8192}\.[\w-]{8,1024}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Stripe secret key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,255}")),
    ("an OpenAI-style API key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,255}")),
    ("a SendGrid API key", re.compile(r"\bSG\.[\w-]{16,32}\.[\w-]{16,64}")),
    ("a Twilio API key", re.compile(r"\bSK[0-9a-f]{32}\b")),
    ("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,64}\b")),
    ("a PyPI token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,255}")),
    ("a Square secret", re.compile(r"\bsq0(?:csp|atp)-[0-9A-Za-z_-]{22,64}")),
    ("an Azure storage key", re.compile(r"\bAccountKey=[A-Za-z0-9+/=]{40,128}")),
    # from detect-secrets' plugins and gitleaks' rules: formats with a fixed prefix or shape
    ("an Artifactory token", re.compile(r"\bAKC[a-zA-Z0-9]{10,255}+\b")),
    ("a Mailchimp API key", re.compile(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b")),
    ("a Telegram bot token", re.compile(r"\b\d{8,10}:AA[0-9A-Za-z_-]{33}(?![\w-])")),
    ("a Shopify token", re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    ("a Databricks token", re.compile(r"\bdapi[a-f0-9]{32}(?:-\d)?+\b")),
    ("a DigitalOcean token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    ("a Postman API key", re.compile(r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b")),
    ("a HashiCorp Vault token", re.compile(r"\bhv[sb]\.[\w-]{24,255}+")),
    ("a Grafana token", re.compile(r"\bgl(?:sa|c)_[A-Za-z0-9+/_]{32,400}+={0,2}+")),
    ("an age secret key", re.compile(r"\bAGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}\b")),
    ("a Doppler token", re.compile(r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[a-zA-Z0-9]{40,44}\b")),
    ("a Linear API key", re.compile(r"\blin_api_[a-zA-Z0-9]{40}\b")),
    ("a New Relic key", re.compile(r"\bNR(?:AK|AA|II|JS)-[A-Za-z0-9]{19,32}\b")),
    ("a Mailgun key", re.compile(r"\bkey-[0-9a-f]{32}\b")),
    (
        "an Azure AD client secret",
        re.compile(r"(?<![\w~.-])[\w~.]{3}\dQ~[\w~.-]{31,34}+(?![\w~.-])"),
    ),
    ("an Atlassian API token", re.compile(r"\bATATT3[A-Za-z0-9_=-]{150,255}+")),
    ("an Anthropic API key", re.compile(r"\bsk-ant-(?:api|admin)\d\d-[\w-]{80,120}+")),
    (
        "a Slack webhook URL",
        re.compile(
            r"hooks\.slack\.com/services/T[A-Z0-9]{6,16}/B[A-Z0-9]{6,16}/[A-Za-z0-9]{16,64}"
        ),
    ),
    (
        "a Discord webhook URL",
        re.compile(r"discord(?:app)?\.com/api/webhooks/\d{5,32}/[\w-]{32,128}"),
    ),
)
# The literal text each shape's matches hold: a shape is searched only in a string holding one
# (a substring test), so that a string full of one format's near matches (`Q~` repeated) pays
# for that format's pattern alone, not for all of them.
SHAPE_LITERALS: dict[str, tuple[str, ...]] = {
    "an AWS access key id": ("AKIA", "ASIA"),
    "a GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "a GitLab token": ("glpat-",),
    "a private key": ("PRIVATE KEY",),
    "a Slack token": ("xox",),
    "a JSON web token": ("eyJ",),
    "a Google API key": ("AIza",),
    "a Stripe secret key": ("k_live_", "k_test_"),
    "an OpenAI-style API key": ("sk-",),
    "a SendGrid API key": ("SG.",),
    "a Twilio API key": ("SK",),
    "an npm token": ("npm_",),
    "a Hugging Face token": ("hf_",),
    "a PyPI token": ("pypi-AgE",),
    "a Square secret": ("sq0",),
    "an Azure storage key": ("AccountKey=",),
    "an Artifactory token": ("AKC",),
    "a Mailchimp API key": ("-us",),
    "a Telegram bot token": (":AA",),
    "a Shopify token": ("shp",),
    "a Databricks token": ("dapi",),
    "a DigitalOcean token": ("_v1_",),
    "a Postman API key": ("PMAK-",),
    "a HashiCorp Vault token": ("hvs.", "hvb."),
    "a Grafana token": ("glsa_", "glc_"),
    "an age secret key": ("AGE-SECRET-KEY-1",),
    "a Doppler token": ("dp.",),
    "a Linear API key": ("lin_api_",),
    "a New Relic key": ("NRAK-", "NRAA-", "NRII-", "NRJS-"),
    "a Mailgun key": ("key-",),
    "an Azure AD client secret": ("Q~",),
    "an Atlassian API token": ("ATATT3",),
    "an Anthropic API key": ("sk-ant-",),
    "a Slack webhook URL": ("hooks.slack.com/services/",),
    "a Discord webhook URL": ("/api/webhooks/",),
}
# Each shape's pattern starts with one of these. No `\b` here: an alternation whose branches all
# start with a literal lets the regex engine skip to candidate characters (twice as fast), and a
# wider prefilter only means the shapes themselves are searched more often.
SHAPE_HINTS = re.compile(
    r"AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|PRIVATE KEY|xox|eyJ|AIza|[sr]k_(?:live|test)_"
    r"|sk-|SG\.|SK[0-9a-f]|npm_|hf_|pypi-|sq0|AccountKey|hooks\.slack|discord"
    r"|AKC|-us\d|:AA|shp|dapi|_v1_|PMAK-|hv[sb]\.|gl(?:sa|c)_|AGE-SECRET|dp\.|lin_api_|NR[AIJ]"
    r"|key-|Q~|ATATT3"
)

# A whole scalar that reads as a random token (an AWS secret access key under `value:`, an API
# key in a list): base64 / base64url characters, all three of upper, lower and digit, and a
# Shannon entropy near that of random text of its length. detect-secrets' base64 limit is 4.5
# bits per character, which no string under 23 characters reaches; here the limit follows the
# length (90% of log2(n), 4.5 from 32 characters on), so 20-character tokens count too.
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9+/=_-]{20,128}+")
_WORDY = re.compile(r"[a-z]{4}|[A-Z][a-z]{3}|[A-Z]{4}|[0-9]{5}|[-_/=+]{2}")


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def random_token(text: str) -> bool:
    """Does ``text`` (stripped) read as a random token rather than a word, a path or encoded data?"""
    if not _TOKEN_TEXT.fullmatch(text) or text.startswith("/"):
        return False
    if not _mixed_classes(text):
        return False
    n = len(text)
    # identifiers and paths are runs of words: a random token has few 4-letter runs
    if len(_WORDY.findall(text)) * 8 > n:
        return False
    return entropy(text) >= min(4.5, 0.9 * math.log2(n)) and not _encoded_text(text)


def _encoded_text(text: str) -> bool:
    """Base64 of readable text (`command_b64: Q1JFQVRF...`, SQL or a message encoded): data, not
    a key. A random token decodes to bytes that are rarely all printable."""
    if len(text) % 4:
        return False
    try:
        decoded = base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return decoded.isprintable() or all(c.isprintable() or c in "\n\r\t" for c in decoded)


_DIGIT = re.compile(r"[0-9]")


def _mixed_classes(text: str) -> bool:
    """Upper and lower case letters and a digit (case tests and one search run in C)."""
    return text.lower() != text != text.upper() and _DIGIT.search(text) is not None


@functools.lru_cache(maxsize=4096)
def token_user(user: str) -> bool:
    """A URL's user that reads as a token: a known shape, or letters and digits mixed like one."""
    return SHAPE_HINTS.search(user) is not None or (
        "%" not in user
        and _mixed_classes(user)
        and entropy(user) >= 0.6 * math.log2(len(user))  # not `Aaaaaaaaaaa1`
    )
