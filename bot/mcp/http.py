"""A remote MCP server's HTTP client: the bot's own process, only to the hosts the operator allows.

The bot (not a sandbox) talks to a remote server, so the check is made where connections are
opened: every TCP connection the client makes goes through `CheckedBackend`, which connects only
to a host on `PLAN_CASCADE_MCP_EGRESS`, at an address the egress rules accept (public, or named
by the operator with its port; `bot.network.rules`), and to the very address it checked
(a second lookup cannot rebind it). TLS still verifies the host's name. Redirects to another
origin are not followed (the SDK's rule), the environment's proxy settings are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import httpcore2
import httpx2

from bot.network.rules import Entry, Resolver, decide, mcp_allowlist, system_resolver

CONNECT_TIMEOUT = 30.0
READ_TIMEOUT = 300.0
"""A tool call may take long; the caller's own time limit ends it sooner."""


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """Opens TCP connections to the allowed hosts only, at the address that was checked."""

    def __init__(self, allowed: Sequence[Entry], *, resolve: Resolver = system_resolver) -> None:
        self.rules = mcp_allowlist(allowed)
        self.resolve = resolve
        self.refused: list[str] = []
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        address, _, why = await decide(host, port, self.rules, resolve=self.resolve)
        if address is not None:
            return await self._inner.connect_tcp(
                address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
            )
        self.refused.append(why)
        raise httpcore2.ConnectError(f"refused: {why}")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("refused: a remote MCP server is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CheckedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, backend: CheckedBackend) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False), network_backend=backend
        )


def checked_client(
    allowed: Sequence[Entry], *, headers: Mapping[str, str], resolve: Resolver = system_resolver
) -> tuple[httpx2.AsyncClient, CheckedBackend]:
    """An HTTP client for one remote server (`headers` on every request), and its backend (which
    says what it refused)."""
    backend = CheckedBackend(allowed, resolve=resolve)
    client = httpx2.AsyncClient(
        transport=_CheckedTransport(backend),
        headers=dict(headers),
        timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT),
        trust_env=False,
        follow_redirects=False,
    )
    return client, backend
