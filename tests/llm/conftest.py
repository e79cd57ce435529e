"""Fixtures for the LLM tests: respx routes behind the SDKs' httpx2 transport.

The anthropic and openai SDKs speak `httpx2`, which respx does not patch. The
`http_client` fixture is an `httpx2.AsyncClient` whose `MockTransport` hands
every request to a respx router (converted to an `httpx.Request`) and converts
the routed `httpx.Response` back. Unrouted requests fail the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import httpx2
import pytest
import respx


def bridge(router: respx.Router) -> httpx2.MockTransport:
    """An httpx2 transport answered by `router`."""

    async def handle(request: httpx2.Request) -> httpx2.Response:
        converted = httpx.Request(
            request.method,
            str(request.url),
            headers=request.headers.multi_items(),
            content=request.content,
        )
        try:
            answer = await router.async_handler(converted)
        except httpx.TimeoutException as exc:
            raise httpx2.ReadTimeout(str(exc), request=request) from exc
        except httpx.ConnectError as exc:
            raise httpx2.ConnectError(str(exc), request=request) from exc
        return httpx2.Response(
            answer.status_code,
            headers=answer.headers.multi_items(),
            content=answer.content,
        )

    return httpx2.MockTransport(handle)


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(assert_all_mocked=True, assert_all_called=False)


@pytest.fixture
async def http_client(router: respx.Router) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=bridge(router)) as client:
        yield client


class SleepRecorder:
    """An injected `sleep` that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def sleep() -> SleepRecorder:
    return SleepRecorder()
