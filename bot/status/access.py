"""Who may see the status page: the holder of `PLAN_CASCADE_STATUS_TOKEN`, and nobody else.

- Scripts send `Authorization: Bearer <token>`.
- A browser signs in once with the token (a form POST) and gets a session cookie:
  `<issued>.<session id>.<HMAC(token, issued.session id)>`, `HttpOnly`, `SameSite=Strict`,
  `Path=/`, and `Secure` when the request came over TLS (uvicorn trusts `X-Forwarded-Proto` only
  from `FORWARDED_ALLOW_IPS`, loopback by default). The cookie never holds the token; it is good
  while the server keeps its session (`bot.status.sessions`: signing out ends it, for a copy of
  the cookie too), for `SESSION_SECONDS` at most, and changing the token signs every browser out.
- Every POST made with the cookie carries a CSRF token bound to that session.
Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

COOKIE = "plan_cascade_status"
SESSION_SECONDS = 7 * 24 * 3600
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
"""Sent with every answer under `/status` (the data is private: never cached, never framed)."""


def _mac(key: bytes, purpose: bytes, value: str) -> str:
    return hmac.new(key, purpose + b"\0" + value.encode(), hashlib.sha256).hexdigest()


def same(offered: str, expected: str) -> bool:
    """Constant-time string comparison (false for different lengths, without early exit on content)."""
    return hmac.compare_digest(offered.encode(), expected.encode())


class Access:
    """Checks a request's credentials against the operator's token."""

    def __init__(self, token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._token = token
        self._key = hashlib.sha256(b"plan-cascade/status/v1\0" + token.encode()).digest()
        self._clock = clock

    def token_ok(self, offered: str | None) -> bool:
        """Whether `offered` is the token."""
        return offered is not None and same(offered, self._token)

    def new_session(self) -> tuple[str, str]:
        """A session for a browser that just gave the token: its cookie's value, and its id
        (which the server keeps until the session ends)."""
        body = f"{int(self._clock())}.{secrets.token_urlsafe(24)}"
        return f"{body}.{_mac(self._key, b'session', body)}", body.split(".", 1)[1]

    def session_id(self, value: str | None) -> str | None:
        """The id of a session cookie this token issued, not older than `SESSION_SECONDS`; None
        for anything else. Whether that session is still open is for the server to say."""
        if not value or value.count(".") != 2:
            return None
        issued, sid, mac = value.split(".")
        if not same(mac, _mac(self._key, b"session", f"{issued}.{sid}")) or not issued.isdigit():
            return None
        return sid if 0 <= self._clock() - int(issued) <= SESSION_SECONDS else None

    def bearer_ok(self, header: str | None) -> bool:
        """Whether an `Authorization` header is `Bearer <token>`."""
        if not header:
            return False
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(value.strip())

    def csrf_for(self, session: str | None) -> str:
        """The CSRF token a page made for `session` puts in its forms."""
        return _mac(self._key, b"csrf", session or "")

    def csrf_ok(self, session: str | None, offered: str | None) -> bool:
        """Whether a form's CSRF token belongs to the session that sends it."""
        return bool(session) and offered is not None and same(offered, self.csrf_for(session))


def cookie_header(value: str, *, secure: bool, max_age: int = SESSION_SECONDS) -> str:
    """The `Set-Cookie` value for a session (empty value and `max_age=0` sign out)."""
    parts = [f"{COOKIE}={value}", "Path=/", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def safe_next(path: str | None) -> str:
    """Where to go after signing in: a path of the status page, never another site."""
    if path and path.startswith("/status") and "//" not in path and "\\" not in path:
        return path
    return "/status"
