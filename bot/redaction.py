"""One redaction function for every exit: GitHub (comments, PR bodies, check runs), transcripts, logs.

It removes the secrets this process knows (registered at start-up and as tokens are minted:
webhook secret, App key, LLM keys, state key, installation tokens) and anything shaped like a
credential (GitHub tokens, `sk-…` API keys, PEM private keys, basic/bearer authorization
values, credentials in URLs). Hidden plan-state blocks in our own comments are left exactly
as they are (they are base64 and signed; nothing printed by code reaches them).
"""

from __future__ import annotations

import re

MASK = "***"
_known: set[str] = set()
_names: dict[str, str] = {}
MIN_SECRET = 8
"""Shorter registered values are not masked (they would mask ordinary words)."""

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S
        ),
        "-----BEGIN PRIVATE KEY----- *** -----END PRIVATE KEY-----",
    ),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"), MASK),
    (re.compile(r"x-access-token:[^@\s'\"]+", re.IGNORECASE), "x-access-token:" + MASK),
    (
        re.compile(r"(authorization:\s*(?:basic|bearer|token)\s+)[A-Za-z0-9+/=._\-]+", re.IGNORECASE),
        r"\1" + MASK,
    ),
    (re.compile(r"(\w+://)[^/@\s:]+:[^/@\s]+@"), r"\1" + MASK + "@"),
)
_HIDDEN = re.compile(
    r"<!-- plan-cascade:state v\d+ (?:sig=(?:[0-9a-f]{64}|-) )?[A-Za-z0-9+/=\s]+ -->"
    r"|<!-- plan-cascade:state-ref v\d+ parts=[0-9,]+ sha256=[0-9a-f]{64}(?: sig=(?:[0-9a-f]{64}|-))? -->"
    r"|<!-- plan-cascade:state-data [A-Za-z0-9+/=\s]+ -->"
)
"""Exactly our state blocks: base64, hex and digits only, so nothing credential-shaped fits inside."""


def register_secret(value: str | None, *, name: str | None = None) -> None:
    """Never let `value` leave the process in clear (tokens, keys, webhook secrets); `name`: the
    variable it was handed over by, which the secret scan may say (a name, never the value)."""
    if value and maskable(value):
        _known.add(value.strip())
        if name:
            _names[value.strip()] = name


def maskable(value: str) -> bool:
    """Whether `value` is long enough to be registered and masked (`MIN_SECRET`)."""
    return len(value.strip()) >= MIN_SECRET


def secret_name(value: str) -> str | None:
    """The variable a registered `value` was handed over by, if it was."""
    return _names.get(value.strip())


def known_secrets() -> tuple[str, ...]:
    """Every value registered with `register_secret`: what the secret scan looks for in a push."""
    return tuple(_known)


def redact(text: str, *, secrets: tuple[str, ...] = ()) -> str:
    """`text` with known secrets, `secrets` and credential-shaped strings masked."""
    if not text:
        return text
    pieces = []
    last = 0
    for match in _HIDDEN.finditer(text):  # our signed state blocks pass untouched
        pieces.append(_redact_plain(text[last : match.start()], secrets))
        pieces.append(match.group(0))
        last = match.end()
    pieces.append(_redact_plain(text[last:], secrets))
    return "".join(pieces)


def _redact_plain(text: str, extra: tuple[str, ...]) -> str:
    for secret in sorted({*_known, *(s for s in extra if s and len(s) >= MIN_SECRET)}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_value(value: object) -> object:
    """Redact every string inside JSON-like data (dicts, lists)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(item) for item in value]
    return value
