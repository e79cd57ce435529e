"""The retry policy, driven directly with SDK-shaped errors."""

from __future__ import annotations

import email.utils

import anthropic
import httpx2
import openai
import pytest

from bot.errors import LLMError
from bot.llm.retry import is_retryable, retry_after, with_retries

REQUEST = httpx2.Request("POST", "https://api.example.test/v1/chat/completions")


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    response = httpx2.Response(status, headers=headers or {}, request=REQUEST)
    body = {"error": {"message": f"status {status}", "type": "x"}}
    return openai.APIStatusError(f"Error code: {status}", response=response, body=body)


class Flaky:
    """A call that raises the given errors, then returns "done"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)

    assert retry_after(httpx2.Headers({"retry-after": "7"})) == 7
    assert retry_after(httpx2.Headers({"retry-after": "0.5"})) == 0.5
    assert retry_after(httpx2.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after(httpx2.Headers({"retry-after": date}), now=now) == pytest.approx(30)
    assert retry_after(httpx2.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx2.Headers({})) is None


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, False), (401, False), (404, False), (408, True), (429, True), (500, True), (529, True)],
)
def test_which_statuses_are_retried(status: int, expected: bool) -> None:
    assert is_retryable(status_error(status)) is expected


def test_timeouts_are_retried() -> None:
    assert is_retryable(anthropic.APITimeoutError(REQUEST))
    assert is_retryable(openai.APIConnectionError(request=REQUEST))


async def test_http_date_retry_after_is_honoured_and_capped() -> None:
    now = 1_700_000_000.0
    later = email.utils.formatdate(now + 12, usegmt=True)
    much_later = email.utils.formatdate(now + 3600, usegmt=True)
    call = Flaky(status_error(429, {"retry-after": later}), status_error(503, {"retry-after": much_later}))
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    assert await with_retries(call, sleep=sleep, now=lambda: now, max_delay=60.0) == "done"
    assert delays == [pytest.approx(12), 60.0]


async def test_backoff_doubles_and_caps() -> None:
    call = Flaky(*(status_error(502) for _ in range(6)))
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    with pytest.raises(LLMError, match="HTTP 502: status 502"):
        await with_retries(call, attempts=6, sleep=sleep, base_delay=2.0, max_delay=10.0, label="x")
    assert call.calls == 6
    assert delays == [2.0, 4.0, 8.0, 10.0, 10.0]


async def test_bugs_are_not_swallowed() -> None:
    call = Flaky(TypeError("a bug"))

    with pytest.raises(TypeError):
        await with_retries(call)
    assert call.calls == 1


async def test_secrets_are_scrubbed() -> None:
    call = Flaky(status_error(400))

    with pytest.raises(LLMError) as caught:
        await with_retries(call, label="openai gpt-4.1", secrets=["status 400"])
    assert caught.value.message == "openai gpt-4.1: HTTP 400: ***"
