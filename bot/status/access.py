"""Who may see the status page: the holder of `PLAN_CASCADE_STATUS_TOKEN`, and nobody else.

- Scripts send `Authorization: Bearer <token>`.
- A browser signs in once with the token (a form POST) and gets a session cookie:
  `<issued>.<HMAC(token, issued)>`, `HttpOnly`, `SameSite=Strict`, `Path=/`, and `Secure` when
  the request came over TLS (uvicorn trusts `X-Forwarded-Proto` only from `FORWARDED_ALLOW_IPS`,
  loopback by default). The cookie never holds the token; it expires after `SESSION_SECONDS`,
  and changing the token signs every browser out.
- Every POST made with the cookie carries a CSRF token bound to that session.
Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping

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

    def new_session(self) -> str:
        """A session cookie's value for a browser that just gave the token."""
        issued = str(int(self._clock()))
        return f"{issued}.{_mac(self._key, b'session', issued)}"

    def session_ok(self, value: str | None) -> bool:
        """Whether a cookie is a session this token issued, not older than `SESSION_SECONDS`."""
        if not value or "." not in value:
            return False
        issued, mac = value.split(".", 1)
        if not same(mac, _mac(self._key, b"session", issued)) or not issued.isdigit():
            return False
        return 0 <= self._clock() - int(issued) <= SESSION_SECONDS

    def bearer_ok(self, header: str | None) -> bool:
        """Whether an `Authorization` header is `Bearer <token>`."""
        if not header:
            return False
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(value.strip())

    def who(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
        """`bearer`, `session` or None (nobody we know)."""
        if self.bearer_ok(headers.get("authorization")):
            return "bearer"
        if self.session_ok(cookies.get(COOKIE)):
            return "session"
        return None

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
