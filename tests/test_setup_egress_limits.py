"""The setup egress proxy's edges (issue 37, item 4; issue 41, item 5), attacked as setup code would.

Setup code reaches the proxy's Unix socket (through the forwarder in its sandbox) and may send it
anything. Here the test is that code: it talks to the proxy's socket directly, and the "registry"
is a loopback server the allowlist names by its exact address and port. Nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.network.proxy import EgressProxy, destination, parse_egress, public
from tests.processes import Server


class Upstream(Server):
    """A loopback "registry": records every connection (`accepted`) and the request head it got,
    holds it open (until `close`)."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        super().__init__(("127.0.0.1", 0), backlog=512)

    def answer(self, conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            with self.lock:
                self.heads += [head, rest] if rest else [head]  # `rest`: a second, pipelined request
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            conn.shutdown(socket.SHUT_WR)  # done, as a server says after `Connection: close`
            conn.settimeout(5)
            while more := conn.recv(65536):  # anything after the first request: a second request
                with self.lock:
                    self.heads.append(more)
        except OSError:
            return


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    try:
        yield server
    finally:
        server.close()


@contextlib.asynccontextmanager
async def proxy_to(upstream: Upstream, tmp_path: Path, **limits: float) -> AsyncIterator[EgressProxy]:
    allowed = parse_egress(f"127.0.0.1:{upstream.port}")
    async with EgressProxy(tmp_path / "proxy.sock", allowed, **limits) as proxy:  # type: ignore[arg-type]
        yield proxy


async def client(path: Path, head: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(head.encode())
    await writer.drain()
    return reader, writer


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def until(condition, what: str, *, seconds: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Wait (a generous bound, no timing assert) until `condition()` holds."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what


# -- (a) connections: a cap per run, an idle timeout ------------------------------------------
MAX_CONNECTIONS = 32  # the proxy's cap per run (bot.network.proxy.MAX_CONNECTIONS)


async def test_hundreds_of_idle_tunnels_cannot_exhaust_the_servers_file_descriptors(
    upstream: Upstream, tmp_path: Path
) -> None:
    """Setup opens 150 tunnels and leaves them idle: the proxy holds at most its cap, the rest wait
    in the socket's backlog (no descriptor of the server), and get their turn as tunnels close."""
    attackers = 150
    before = open_fds()
    async with proxy_to(upstream, tmp_path) as proxy:
        clients = []
        for _ in range(attackers):
            clients.append(
                await client(proxy.socket_path, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n")
            )
        await until(lambda: upstream.accepted >= MAX_CONNECTIONS, "the first tunnels were opened")
        await asyncio.sleep(0.5)  # room for more to be (wrongly) accepted
        assert upstream.accepted == MAX_CONNECTIONS, f"{upstream.accepted} tunnels held open at once"
        # The server holds at most the cap's two descriptors per tunnel; the test's own clients and
        # the upstream's side of each tunnel (one descriptor each, in this process too) are the rest.
        assert open_fds() - before <= attackers + 3 * MAX_CONNECTIONS + 8
        for _reader, writer in clients[:MAX_CONNECTIONS]:
            writer.close()
        await until(lambda: upstream.accepted >= 2 * MAX_CONNECTIONS, "waiting tunnels got their turn")
        for _reader, writer in clients[MAX_CONNECTIONS:]:
            writer.close()


async def test_an_idle_tunnel_is_closed(upstream: Upstream, tmp_path: Path) -> None:
    async with proxy_to(upstream, tmp_path, idle_timeout=0.3) as proxy:
        reader, writer = await client(
            proxy.socket_path, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n"
        )
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        async with asyncio.timeout(20):  # the tunnel is idle: the proxy ends it
            assert await reader.read() == b""
        writer.close()


async def test_a_busy_tunnel_outlives_the_idle_timeout(upstream: Upstream, tmp_path: Path) -> None:
    """Only silence ends a tunnel: data in either direction keeps it open."""
    async with proxy_to(upstream, tmp_path, idle_timeout=0.5) as proxy:
        reader, writer = await client(
            proxy.socket_path, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n"
        )
        await reader.readuntil(b"\r\n\r\n")
        for _ in range(8):  # 1.6 s of traffic, never 0.5 s apart
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.2)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.close()


# -- (b) plain http: the proxy names the host, not the client ---------------------------------
async def test_plain_http_goes_to_the_checked_host_whatever_the_client_says(
    upstream: Upstream, tmp_path: Path
) -> None:
    """Behind an allowed CDN address, `Host` picks the site: the client's is never passed on, and
    nothing the client sends after its request (a second, pipelined one) reaches the upstream."""
    async with proxy_to(upstream, tmp_path) as proxy:
        target = f"127.0.0.1:{upstream.port}"
        smuggled = "GET /other HTTP/1.1\r\nHost: internal.example\r\n\r\n"
        head = f"GET http://{target}/simple/ HTTP/1.1\r\nHost: internal.example\r\nAccept: */*\r\n\r\n"
        reader, writer = await client(proxy.socket_path, head + smuggled)
        async with asyncio.timeout(20):
            answer = await reader.read()
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
    assert len(upstream.heads) == 1, upstream.heads
    lines = upstream.heads[0].decode().split("\r\n")
    assert lines[0] == "GET /simple/ HTTP/1.1"
    hosts = [line for line in lines if line.lower().startswith("host:")]
    assert hosts == [f"Host: {target}"], lines
    assert "Accept: */*" in lines


async def test_plain_http_with_a_body_or_another_method_is_refused(
    upstream: Upstream, tmp_path: Path
) -> None:
    async with proxy_to(upstream, tmp_path) as proxy:
        target = f"http://127.0.0.1:{upstream.port}/x"
        for head in (
            f"POST {target} HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
            f"GET {target} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            f"GET {target} HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        ):
            reader, writer = await client(proxy.socket_path, head)
            async with asyncio.timeout(20):
                assert (await reader.read()).startswith(b"HTTP/1.1 400")
            writer.close()
    assert upstream.accepted == 0


@pytest.mark.parametrize(
    "line",
    [
        "GET http://{t}/a\tHTTP/1.1\nHost:other.example\nX: HTTP/1.1",  # issue #47: a second head
        "GET http://{t}/a\rHost:other.example HTTP/1.1",
        "GET http://{t}/a\x00b HTTP/1.1",
        "GET http://{t}/a\x7fb HTTP/1.1",
        "GET http://{t}/a\x85b HTTP/1.1",  # NEL: whitespace to some servers
        "GET http://{t}/a  HTTP/1.1",  # a third space
        "GET  http://{t}/a HTTP/1.1",
        "GET\thttp://{t}/a HTTP/1.1",
        "GET http://{t}/a HTTP/1.1 extra",
        "GET http://{t}/a HTTP/2.0",
        "GET http://{t}/a HTTP/0.9",
        "GET http://{t}/a http/1.1",
        "CONNECT {t} HTTP/1.1\nHost:other.example",
        "CONNECT {t} HTTP/3",
    ],
)
async def test_a_request_line_with_control_characters_or_another_version_is_refused(
    upstream: Upstream, tmp_path: Path, line: str
) -> None:
    """Bare CR/LF in the target reached the upstream as they were: a lenient server behind an
    allowed name would read a Host the client chose, or a second request."""
    async with proxy_to(upstream, tmp_path) as proxy:
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(20)
        raw.connect(str(proxy.socket_path))
        head = line.format(t=f"127.0.0.1:{upstream.port}") + "\r\nAccept: */*\r\n\r\n"
        await asyncio.to_thread(raw.sendall, head.encode("latin-1"))
        answer = await asyncio.to_thread(raw.recv, 65536)
        raw.close()
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert upstream.accepted == 0 and upstream.heads == []


async def test_a_well_formed_request_line_still_goes_through(upstream: Upstream, tmp_path: Path) -> None:
    async with proxy_to(upstream, tmp_path) as proxy:
        head = f"GET http://127.0.0.1:{upstream.port}/a%09b?q=1 HTTP/1.0\r\n\r\n"
        reader, writer = await client(proxy.socket_path, head)
        async with asyncio.timeout(20):
            answer = await reader.read()
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert upstream.heads[0].decode().split("\r\n")[0] == "GET /a%09b?q=1 HTTP/1.0"


# -- (c) addresses that embed an inward IPv4 address -------------------------------------------
@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (cloud metadata)
        "64:ff9b:1::a00:1",  # local-use NAT64 (RFC 8215)
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "::127.0.0.1",  # IPv4-compatible
        "::10.0.0.1",
        "::151.101.0.223",  # IPv4-compatible: deprecated, never a public destination
        "::ffff:0:7f00:1",  # IPv4-translated (SIIT)
        "fec0::1",  # site-local
        "fec0:0:0:1::5",
    ],
)
def test_inward_addresses_in_ipv6_clothing_are_not_public(address: str) -> None:
    assert not public(address), address


def test_public_ipv6_forms_of_public_addresses_stay_public() -> None:
    assert public("64:ff9b::9765:df")  # NAT64 of 151.101.0.223
    assert public("2002:9765:df::1")  # 6to4 of 151.101.0.223
    assert public("2a04:4e42::223") and public("151.101.0.223")


async def test_a_listed_name_that_resolves_to_nat64_of_loopback_is_refused() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["64:ff9b::7f00:1"]

    address, why = await destination("pypi.org", 443, parse_egress("pypi.org"), resolve=resolve)
    assert address is None and "non-public address (64:ff9b::7f00:1)" in why


# -- issue 41, item 5: the end of a setup run is quiet -----------------------------------------
async def test_tunnels_cancelled_at_the_end_of_a_setup_run_log_no_traceback(
    upstream: Upstream, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with proxy_to(upstream, tmp_path) as proxy:
        open_tunnel = await client(proxy.socket_path, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n")
        await open_tunnel[0].readuntil(b"\r\n\r\n")
        half_a_head = await client(proxy.socket_path, "CONNECT 127.0.0.1")
        await until(lambda: upstream.accepted == 1, "the tunnel is open")
        await asyncio.sleep(0.1)
    for _reader, writer in (open_tunnel, half_a_head):
        async with asyncio.timeout(20):
            assert await _reader.read() == b"", "the proxy closed it"
        writer.close()
    await asyncio.sleep(0.1)  # done-callbacks of the cancelled tasks run
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert noisy == [], [f"{r.name}: {r.getMessage()}" for r in noisy]
    assert not (tmp_path / "proxy.sock").exists()
