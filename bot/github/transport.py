"""One HTTP transport for every githubkit client of the process.

githubkit opens a new httpx client per request unless a client is entered as an async
context (a ContextVar, so per task). Without a transport of its own, each of those clients
builds a fresh SSL context (loading the CA bundle: milliseconds of CPU on the event loop)
and a fresh connection. A shared transport keeps one SSL context and one keep-alive pool;
clients closing it after each request do not close the pool.
"""

from __future__ import annotations

import httpx


class SharedTransport(httpx.AsyncBaseTransport):
    """A pooled transport that outlives the short-lived clients using it."""

    def __init__(self, *, max_connections: int = 50) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._inner = httpx.AsyncHTTPTransport(limits=limits, retries=1)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send through the shared pool."""
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Clients close their transport after each request: keep the pool open."""
        return None

    async def shutdown(self) -> None:
        """Close the pool (at process exit)."""
        await self._inner.aclose()
