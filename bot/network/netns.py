"""A socket listening inside a sandbox's own network namespace, made by the bot itself.

A confined process has a network namespace of its own with nothing in it but loopback
(bubblewrap's `--unshare-net`). The bot's egress proxy can listen there directly: while the
sandbox's first process is held at its gate (`bot.sandbox.limits.LimitGate`), the bot's thread
enters that namespace (`setns`, which moves that thread alone), makes a socket listening on
`127.0.0.1:<port>` and leaves; the socket stays in the namespace it was made in, so what the
sandbox sends to that address reaches the bot, and nothing else can. No process of ours runs in
the sandbox for it (`bot.network.forwarder`, which it replaces where it can, starts one per run).

Entering another network namespace takes `CAP_SYS_ADMIN`, in the user namespace that owns it and
in our own: a server running as root has it, one that is not (or a container that dropped it)
does not, and keeps the forwarder. `available` finds out once, by entering its own namespace.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import socket
import sys
from collections.abc import Callable

CLONE_NEWNET = 0x40000000
IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)
"""Bind an address no interface has yet: bubblewrap brings the sandbox's loopback up after its gate."""
BACKLOG = 256
EXIT_STUCK = 70
"""The exit status of a server stopped because it could not leave a sandbox's network namespace."""

log = logging.getLogger(__name__)


@functools.cache
def _setns() -> Callable[[int, int], int]:
    call = ctypes.CDLL(None, use_errno=True).setns
    call.argtypes = [ctypes.c_int, ctypes.c_int]
    call.restype = ctypes.c_int
    return call  # type: ignore[no-any-return]


def _enter(fd: int) -> None:
    """Move the calling thread (only it) into the network namespace `fd` refers to."""
    if _setns()(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def _own() -> int:
    return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


@functools.cache
def available() -> bool:
    """Whether this server may enter its sandboxes' network namespaces (found out once)."""
    if not sys.platform.startswith("linux"):
        return False

    try:
        own = _own()
        try:
            _enter(own)  # our own namespace: the same checks as another's, and nothing changes
        finally:
            os.close(own)
    except (OSError, AttributeError):  # not permitted, or a libc without setns
        return False
    return True


def listen_in(pid: int, port: int) -> socket.socket:
    """A socket listening on `127.0.0.1:port` in the network namespace of process `pid` (a
    sandbox's first process, held before it runs anything), non-blocking. Raises OSError.

    The calling thread (the event loop's) enters that namespace for the few system calls that make
    the socket, with no await in between (no other coroutine runs meanwhile), and goes back: a
    hand-off to a thread and back cost ~4 ms under load, at every agent's start. Going back can
    only fail if the server lost `CAP_SYS_ADMIN` in those microseconds; if it ever does, the
    process stops at once (`os._exit`): nothing of the server may go on in a sandbox's network."""
    own = _own()
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(target).st_ino == os.fstat(own).st_ino:
                # A sandbox always has a namespace of its own: this is not one (its process is gone).
                raise OSError(f"process {pid} shares the server's network namespace")
            _enter(target)
        finally:
            os.close(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen(BACKLOG)
                sock.setblocking(False)
            except BaseException:
                sock.close()
                raise
        finally:
            _leave(own)
    finally:
        os.close(own)
    return sock


def _leave(own: int) -> None:
    try:
        _enter(own)
    except OSError as exc:
        log.critical("could not leave a sandbox's network namespace (%s): stopping now", exc)
        os._exit(EXIT_STUCK)
