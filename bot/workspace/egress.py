"""Setup's only way out: an HTTP proxy run by the bot that reaches the allowed registries alone.

Setup commands run the repository's code (a build backend, a `setup.py`, an npm `postinstall`)
with network, so they can install. Sharing the host's network would let that code reach the
server's loopback services (`/metrics`, a database, an admin port), the private network and the
cloud's metadata address. Instead setup gets its own network namespace with nothing in it but
loopback, and this proxy, listening on a Unix socket that is bind-mounted into the sandbox; a
small forwarder started inside (`FORWARDER`) relays the sandbox's `127.0.0.1:3128` to it, and
`HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` point there (uv, pip, npm, yarn, go and cargo honour them).

The proxy answers `CONNECT host:port` (https) and absolute-form `GET http://host/...` (plain
http) for hosts on the operator's list (`PLAN_CASCADE_SETUP_EGRESS`) only. A name must resolve
to public addresses only (never loopback, link-local, private, multicast or reserved), and the
proxy connects to the address it checked (a second lookup cannot rebind it). An IP address is
reached only when the list names that exact address and port (a private index the operator runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_SETUP_EGRESS = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "proxy.golang.org",
    "sum.golang.org",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
)
"""The public package registries setup may reach by default (https and http on 443 and 80)."""
PROXY_PORT = 3128
"""Where the forwarder listens inside setup's own network namespace."""
DEFAULT_PORTS = (443, 80)
HEAD_LIMIT = 16_384
CONNECT_TIMEOUT = 30.0
Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True)
class Entry:
    """One allowed destination: a host (`*.example.org` for its subdomains), a port or the defaults."""

    host: str
    port: int | None = None

    def matches(self, host: str, port: int) -> bool:
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host


def parse_egress(text: str | Sequence[str]) -> tuple[Entry, ...]:
    """`host`, `host:port`, `*.domain`, `[v6]:port`, comma- or space-separated; ValueError when malformed."""
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    entries = []
    for item in items:
        host, port = _split_host_port(item.strip(), default=None)
        if not host or any(c in host for c in "/@?#") or (port is not None and not 0 < port < 65536):
            raise ValueError(f"{item!r} is not a host, host:port or *.domain")
        entries.append(Entry(host, port))
    return tuple(entries)


def _split_host_port(target: str, *, default: int | None) -> tuple[str, int | None]:
    host, port = target, default
    if target.startswith("["):
        inner, _, rest = target[1:].partition("]")
        host = inner
        if rest.startswith(":"):
            port = int(rest[1:])
    elif target.count(":") == 1:
        host, _, digits = target.partition(":")
        port = int(digits)
    return host.lower().rstrip("."), port


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def public(address: str) -> bool:
    """Whether an address is on the public internet: not loopback, link-local (cloud metadata),
    private, shared, multicast, reserved or unspecified."""
    ip = _ip(address.split("%")[0])
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system's resolver, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def destination(
    host: str, port: int, allowed: Sequence[Entry], *, resolve: Resolver = system_resolver
) -> tuple[str | None, str]:
    """(the address to connect to, "") when setup may reach `host:port`, else (None, why not)."""
    if not any(e.matches(host, port) for e in allowed):
        return None, f"{host}:{port} is not on the setup egress list (PLAN_CASCADE_SETUP_EGRESS)"
    if _ip(host) is not None:
        return host, ""  # the operator named this very address and port
    try:
        addresses = await resolve(host, port)
    except OSError as exc:
        return None, f"{host} does not resolve: {exc}"
    # A name that resolves inward (a registry mirror on the private network, split-horizon DNS)
    # is reached only at an address the operator listed with this port as well.
    inward = [a for a in addresses if not public(a) and not any(e.matches(a, port) for e in allowed)]
    if not addresses or inward:
        return None, f"{host} resolves to a non-public address ({', '.join(inward) or 'none'})"
    return addresses[0], ""


class EgressProxy:
    """The proxy of one setup run on a Unix socket; `async with` starts and stops it."""

    def __init__(
        self, socket_path: Path, allowed: Sequence[Entry], *, resolve: Resolver = system_resolver
    ) -> None:
        self.socket_path = socket_path
        self.allowed = tuple(allowed)
        self.resolve = resolve
        self.refused: list[str] = []
        """Why each refused request was refused, in order (for logs and tests)."""
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> EgressProxy:
        self._server = await asyncio.start_unix_server(self._accept, path=str(self.socket_path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
        if len(head) > HEAD_LIMIT:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = [*lines[0].split(" "), "", ""][:3]
        if method == "CONNECT":
            host, port = _split_host_port(target, default=443)
            rest = b""
        elif target.startswith("http://"):
            authority, _, path = target[len("http://") :].partition("/")
            host, port = _split_host_port(authority, default=80)
            kept = [line for line in lines[1:] if line and not _hop_by_hop(line)]
            rest = "\r\n".join([f"{method} /{path} {version}", *kept, "Connection: close", "", ""]).encode(
                "latin-1"
            )
        else:
            return await _answer(writer, 400, "only CONNECT and absolute http:// requests are proxied")
        address, why = await destination(host, port or 0, self.allowed, resolve=self.resolve)
        if address is None:
            self.refused.append(why)
            log.warning("setup egress refused: %s", why)
            return await _answer(writer, 403, f"Plan Cascade setup egress: {why}")
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT)
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(rest)
            await asyncio.gather(_relay(reader, up_writer), _relay(up_reader, writer))
        finally:
            up_writer.close()


def _hop_by_hop(line: str) -> bool:
    name = line.split(":", 1)[0].strip().lower()
    return name in ("connection", "proxy-connection", "proxy-authorization", "keep-alive")


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden"}[status]
    body = (text + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65_536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()


def proxy_env(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send setup's package managers through the forwarder."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "npm_config_proxy", "npm_config_https_proxy")
    env = {name: url for name in names}
    env.update({name.lower(): url for name in names[:3]})
    env.update(CARGO_HTTP_PROXY=url, NO_PROXY="", no_proxy="")
    return env


FORWARDER = """\
import os, socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(64)
if os.fork():
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    other = threading.Thread(target=pipe, args=(client, upstream), daemon=True)
    other.start()
    pipe(upstream, client)
    other.join()
    client.close()
    upstream.close()


while True:
    client, _ = server.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
"""
"""Runs inside setup's sandbox (python3 from its PATH): listens on the sandbox's 127.0.0.1, relays
each connection to the proxy's socket; it returns once listening and serves in the background."""


def forwarder_command(folder: Path, port: int = PROXY_PORT) -> str:
    """The shell line that starts the forwarder (written into `folder`) before setup's commands."""
    script = folder / "forward.py"
    script.write_text(FORWARDER)
    return (
        f"python3 {script} {folder / 'proxy.sock'} {port} || "
        "{ echo 'Plan Cascade: cannot start the setup egress forwarder (python3 on PATH?)' >&2; exit 97; }\n"
    )


@dataclass
class EgressRoute:
    """What one confined setup run needs to go out through the proxy."""

    folder: Path
    """Holds the proxy's socket and the forwarder: bind it read-only into the sandbox."""
    prelude: str
    """The shell line to run before setup's commands (starts the forwarder)."""
    env: dict[str, str] = field(default_factory=proxy_env)
    proxy: EgressProxy | None = None


@contextlib.asynccontextmanager
async def egress_route(allowed: Sequence[str] | None) -> AsyncIterator[EgressRoute]:
    """A proxy for one setup run, to the hosts `allowed` (None: `DEFAULT_SETUP_EGRESS`)."""
    entries = parse_egress(DEFAULT_SETUP_EGRESS if allowed is None else allowed)
    folder = Path(tempfile.mkdtemp(prefix="plan-cascade-egress-"))
    try:
        async with EgressProxy(folder / "proxy.sock", entries) as proxy:
            yield EgressRoute(folder, forwarder_command(folder), proxy=proxy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
