"""Retries of LLM calls, and the translation of SDK errors into `LLMError`.

The SDK clients are built with `max_retries=0`: this module is the only place
that retries, so the policy is ours and tests drive it with an injected `sleep`.
Retried: 408, 429, 5xx, connection errors and timeouts. A `retry-after-ms` or
`retry-after` header (seconds or an HTTP date) sets the wait, otherwise the
wait doubles from `base_delay`; every wait is capped at `max_delay`.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import httpx2

from bot.errors import LLMError

T = TypeVar("T")


@functools.cache
def _sdk_errors() -> tuple[type[Exception], ...]:
    """The SDKs' API errors, imported on first use (the SDKs are large)."""
    import anthropic
    import openai

    return (anthropic.APIError, openai.APIError)


@functools.cache
def _connection_errors() -> tuple[type[Exception], ...]:
    import anthropic
    import openai

    return (anthropic.APIConnectionError, openai.APIConnectionError, httpx2.TransportError)


_RETRY_STATUSES = frozenset({408, 429})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status carried by an SDK error, if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt may succeed."""
    if isinstance(exc, _connection_errors()):
        return True
    status = status_of(exc)
    return status is not None and (status in _RETRY_STATUSES or status >= 500)


def retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds to wait as asked by `retry-after-ms` / `retry-after`, or None."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def describe_error(exc: BaseException, *, label: str, secrets: Iterable[str] = ()) -> str:
    """A one-line explanation of `exc` for an operator; never contains a secret."""
    status = status_of(exc)
    detail = _provider_message(exc)
    if status is not None:
        text = f"{label}: HTTP {status}: {detail}"
    elif isinstance(exc, _connection_errors()):
        text = f"{label}: connection failed: {detail}"
    else:
        text = f"{label}: {type(exc).__name__}: {detail}"
    return redact(text, secrets)


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-trivial secret replaced by `***`."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _provider_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    message = getattr(exc, "message", None)
    return str(message if isinstance(message, str) and message else exc) or type(exc).__name__


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int = 4,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    base_delay: float = 1.0,
    max_delay: float = 60.0,
    label: str = "LLM request",
    secrets: Iterable[str] = (),
    now: Callable[[], float] = time.time,
) -> T:
    """Await `call()` up to `attempts` times; SDK and transport errors become `LLMError`.

    `label` names the call in error messages (e.g. "anthropic claude-sonnet-5-5");
    `secrets` are scrubbed from them. Errors that are not SDK or transport errors
    (bugs) propagate unchanged.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    secret_list = list(secrets)
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except (*_sdk_errors(), *_connection_errors()) as exc:
            message = describe_error(exc, label=label, secrets=secret_list)
            if not is_retryable(exc):
                raise LLMError(message) from exc
            if attempt == attempts:
                raise LLMError(f"{message} (gave up after {attempts} attempts)") from exc
            response = getattr(exc, "response", None)
            wait = retry_after(getattr(response, "headers", None), now=now())
            if wait is None:
                wait = base_delay * 2 ** (attempt - 1)
            await sleep(min(wait, max_delay))
    raise AssertionError("unreachable: attempts must be >= 1")  # pragma: no cover
