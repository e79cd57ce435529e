"""Setup's and agents' only way out: an HTTP proxy run by the bot that reaches the allowed hosts alone.

Setup commands run the repository's code (a build backend, a `setup.py`, an npm `postinstall`)
with network, so they can install. Sharing the host's network would let that code reach the
server's loopback services (`/metrics`, a database, an admin port), the private network and the
cloud's metadata address. Instead setup gets its own network namespace with nothing in it but
loopback, and this proxy, listening on the sandbox's `127.0.0.1:3128` (`bot.network.route`:
a socket made in its namespace, or a forwarder there relaying to a Unix socket bind-mounted into
the sandbox), and `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` point there (uv, pip, npm, yarn, go
and cargo honour them, and so do Claude Code, Codex and aider). External CLI agents go out the
same way, each run through a proxy of its own, to the hosts of `PLAN_CASCADE_AGENT_EGRESS`
(narrowed by the repository's `agent.egress`): their model's API and the package registries.

The proxy answers `CONNECT host:port` (https) and absolute-form `GET`/`HEAD http://host/...`
(plain http, without a body, one request per connection, sent with the checked host as `Host`)
for hosts on the operator's list (`PLAN_CASCADE_SETUP_EGRESS`) only. A name must resolve to
public addresses only (`bot.network.rules`), and the proxy connects to the address it
checked (a second lookup cannot rebind it). An IP address is reached only when the list names
that exact address and port (a private index the operator runs). An agent's proxy also passes
plain http requests with a body (`Content-Length`, never chunked): a model served over http
(Ollama, vLLM on the operator's network) is called with `POST`. Every refusal is counted per
destination (`blocked`) for the story's report.

It runs in the server's process, so it is bounded: at most `MAX_CONNECTIONS` connections per
setup run at once (more wait in the socket's backlog, outside the server), and a tunnel silent
both ways for `IDLE_TIMEOUT` seconds is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from bot.network.proxy_log import BlockedLog
from bot.network.rules import (
    DEFAULT_SETUP_EGRESS,
    Allowlist,
    Entry,
    Resolver,
    decide,
    destination,
    parse_egress,
    public,
    split_host_port,
    system_resolver,
)

__all__ = ["DEFAULT_SETUP_EGRESS", "EgressProxy", "Entry", "destination", "parse_egress", "public"]

log = logging.getLogger(__name__)

HEAD_LIMIT = 16_384
CONNECT_TIMEOUT = 30.0
MAX_CONNECTIONS = 32
"""Connections one setup run's proxy holds at once (uv downloads 50 files at a time by default:
the rest wait their turn, they are not refused)."""
IDLE_TIMEOUT = 60.0
"""Seconds a tunnel may carry nothing either way (like a web server's keep-alive timeout)."""
MAX_BODY = 64 * 1024 * 1024
"""Largest plain http request body an agent's proxy passes (a model call's prompt is far smaller)."""
BACKLOG = 256
"""Connections waiting to be accepted: held by the kernel, not the server's descriptors."""
ACCEPT_BACKOFF = 0.2


class EgressProxy:
    """The proxy of one setup run (or agent run) on a Unix socket, or on a socket listening in the
    sandbox's own network namespace (`adopt`); `async with` starts and stops it.

    It holds at most `max_connections` connections at once (two of the server's file descriptors
    each): further ones wait in the socket's backlog, which costs the server nothing, until one
    ends. A tunnel that carries nothing either way for `idle_timeout` seconds is closed. What it
    refuses is counted in `blocked`, and `on_blocked` hears of each refusal (a metrics counter).
    """

    def __init__(
        self,
        socket_path: Path | None,
        allowed: Sequence[Entry] | Allowlist,
        *,
        resolve: Resolver = system_resolver,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        bodies: bool = False,
        on_blocked: Callable[[], None] | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.rules = allowed if isinstance(allowed, Allowlist) else Allowlist(tuple(allowed))
        self.resolve = resolve
        self.idle_timeout = idle_timeout
        self.bodies = bodies
        """Whether plain http requests may carry a body (an agent's model calls; never setup's)."""
        self.blocked = BlockedLog(on_blocked=on_blocked)
        """What it refused: each destination and how often."""
        self._slots = asyncio.Semaphore(max_connections)
        self._sock: socket.socket | None = None
        self._listener: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> EgressProxy:
        if self.socket_path is None:  # its socket comes later (`adopt`)
            return self
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(self.socket_path))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self.adopt(sock)
        return self

    def adopt(self, sock: socket.socket) -> None:
        """Serve what connects to `sock`, a listening, non-blocking stream socket made elsewhere
        (`bot.network.netns.listen_in`); it is closed with the proxy."""
        if self._sock is not None:
            sock.close()
            raise RuntimeError("the egress proxy listens already")
        self._sock = sock
        self._listener = asyncio.create_task(self._listen(sock))

    async def __aexit__(self, *exc: object) -> None:
        # Our own tasks, cancelled and awaited here: nothing is left to log a traceback later.
        tasks = [t for t in (self._listener, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()  # connections still in the backlog are refused with it
        if self.socket_path is not None:
            with contextlib.suppress(OSError):
                self.socket_path.unlink()

    async def _listen(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._slots.acquire()  # at the cap, nothing is accepted until a connection ends
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors (EMFILE) or a connection already gone
                self._slots.release()
                log.warning("%s egress proxy could not accept a connection: %s", self.rules.who, exc)
                await asyncio.sleep(ACCEPT_BACKOFF)
                continue
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.create_task(self._connection(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connection(self, conn: socket.socket) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn)  # a Unix or a TCP socket
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
            pass
        finally:
            if writer is not None:
                writer.close()
            else:
                conn.close()
            self._slots.release()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
        if len(head) > HEAD_LIMIT:
            return
        lines = head.decode("latin-1").split("\r\n")
        parsed = _REQUEST_LINE.fullmatch(lines[0])
        if parsed is None:  # a bare CR/LF, a tab or a third space would reach the upstream as it is
            return await _answer(writer, 400, "a malformed request line: METHOD target HTTP/1.x only")
        method, target, version = parsed.groups()
        body = 0
        if method == "CONNECT":
            host, port = split_host_port(target, default=443)
            request = b""
        elif target.startswith("http://"):
            authority, _, path = target[len("http://") :].partition("/")
            host, port = split_host_port(authority, default=80)
            why = _plain_refusal(method, version, lines[1:], bodies=self.bodies)
            if why:
                return await _answer(writer, 400, why)
            body = _content_length(lines[1:])
            request = _plain_request(
                method, f"/{path}", version, lines[1:], host=host, port=port or 80, body=body
            )
        else:
            return await _answer(writer, 400, "only CONNECT and absolute http:// requests are proxied")
        address, reason, why = await decide(host, port or 0, self.rules, resolve=self.resolve)
        if address is None:
            self.blocked.record(host, port or 0, reason or "unlisted")
            log.warning("%s egress refused: %s", self.rules.who, why)
            return await _answer(writer, 403, f"Plan Cascade {self.rules.who} egress: {why}")
        up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(address, port), CONNECT_TIMEOUT)
        activity = _Activity()
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                inward = _relay(reader, up_writer, activity)
            else:
                up_writer.write(request)
                inward = _body_then_nothing(reader, up_writer, body, activity)
            outward = _relay(up_reader, writer, activity)
            answer_after_eof = method != "CONNECT"
            await _tunnel(
                inward, outward, activity=activity, idle=self.idle_timeout, answer_after_eof=answer_after_eof
            )
        finally:
            up_writer.close()


_DROPPED = {
    "host",  # the proxy names the host it checked (RFC 9112, 3.2.2), never the client's
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "content-length",
}


def _header_name(line: str) -> str:
    return line.split(":", 1)[0].strip().lower()


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_REQUEST_LINE = re.compile(r"([A-Z]{1,16}) ([\x21-\x7e]{1,8192}) (HTTP/1\.[01])")
"""What a request line may be: one space on each side of a target of visible ASCII (no control
character, no other whitespace), and HTTP/1.0 or HTTP/1.1 (RFC 9112, 3)."""


def _plain_refusal(method: str, version: str, headers: Sequence[str], *, bodies: bool = False) -> str:
    """Why a plain http request is refused ("" when it is not): setup downloads, it never sends;
    an agent's model call sends one body of a stated length.

    A chunked body, two lengths, or a head the upstream could read differently from us (a bare CR
    or LF, a folded line), could carry a second request to the upstream past our checks."""
    if method not in (_METHODS if bodies else ("GET", "HEAD")):
        return f"only {', '.join(_METHODS) if bodies else 'GET and HEAD'} are proxied for plain http"
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        return "only HTTP/1.0 and HTTP/1.1 are proxied"
    lengths = []
    for line in headers:
        if "\r" in line or "\n" in line or line[:1] in (" ", "\t") or (line and ":" not in line):
            return "a malformed request head"
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "transfer-encoding":
            return "a chunked request body is not proxied: send Content-Length"
        if name == "content-length":
            lengths.append(value.strip())
    if not lengths or lengths == ["0"]:
        return ""
    if not bodies:
        return "a plain http request may not have a body"
    if len(lengths) > 1 or not lengths[0].isdigit() or int(lengths[0]) > MAX_BODY:
        return f"a request body needs one Content-Length of at most {MAX_BODY} bytes"
    return ""


def _content_length(headers: Sequence[str]) -> int:
    """The body's length of a request `_plain_refusal` let through (0 without one)."""
    for line in headers:
        if _header_name(line) == "content-length":
            return int(line.split(":", 1)[1].strip())
    return 0


def _plain_request(
    method: str, path: str, version: str, headers: Sequence[str], *, host: str, port: int, body: int = 0
) -> bytes:
    """The request head the upstream gets: the client's headers but for the hop-by-hop ones, the
    checked host as `Host`, the body's length when it has one, one request per connection."""
    authority = f"[{host}]" if ":" in host else host
    if port != 80:
        authority += f":{port}"
    kept = [line for line in headers if line and _header_name(line) not in _DROPPED]
    length = [f"Content-Length: {body}"] if body else []
    lines = [f"{method} {path} {version}", f"Host: {authority}", *kept, *length, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden"}[status]
    body = (text + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


class _Activity:
    """When a tunnel last carried data, either way: only silence both ways is idle."""

    def __init__(self) -> None:
        self.last = time.monotonic()


async def _silence(activity: _Activity, idle: float) -> None:
    """Return once the tunnel has carried nothing for `idle` seconds (one timer per tunnel, not
    one per read: the relays only note the time)."""
    while (left := activity.last + idle - time.monotonic()) > 0:  # noqa: ASYNC110 - a moving deadline
        await asyncio.sleep(left)


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, activity: _Activity) -> None:
    try:
        while data := await reader.read(65_536):
            activity.last = time.monotonic()
            writer.write(data)
            await writer.drain()  # a reader that stops reading makes the tunnel go silent
    finally:
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()


async def _body_then_nothing(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, length: int, activity: _Activity
) -> None:
    """After a plain http request's head, the client's side: exactly `length` bytes of body are
    passed on; then it may close, but whatever else it sends (a second request on the connection,
    for a host the proxy never checked) is never passed on."""
    while length > 0:
        data = await reader.read(min(length, 65_536))
        if not data:
            return
        activity.last = time.monotonic()
        writer.write(data)
        await writer.drain()
        length -= len(data)
    await reader.read(1)


async def _tunnel(
    inward: Awaitable[None],
    outward: Awaitable[None],
    *,
    activity: _Activity,
    idle: float,
    answer_after_eof: bool,
) -> None:
    """Both directions of a connection. It ends when the upstream's side ends (all of it was
    passed on), when it carried nothing either way for `idle` seconds, and when the client's
    side ends, unless the client still waits for the answer to its request (plain http)."""
    up, down = asyncio.ensure_future(inward), asyncio.ensure_future(outward)
    quiet = asyncio.ensure_future(_silence(activity, idle))
    try:
        await asyncio.wait({up, down, quiet}, return_when=asyncio.FIRST_COMPLETED)
        if answer_after_eof and up.done() and not down.done() and not quiet.done() and up.exception() is None:
            await asyncio.wait({down, quiet}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down, quiet):
            task.cancel()
        await asyncio.gather(up, down, quiet, return_exceptions=True)
