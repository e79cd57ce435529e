"""Finding a test's own processes on the host (sandboxed ones included: their host pids show in /proc),
and the stand-in servers on threads of this process that tests talk to."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import threading
from pathlib import Path


def live_with_arg(arg: str) -> list[int]:
    """Pids of live processes whose command line contains ``arg`` as a whole argument."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if arg.encode() in argv and state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def unique_sleep() -> str:
    """A sleep duration nobody else uses, so the test can find its own sleepers."""
    return f"{random.randint(300, 900)}.{random.randint(1000, 9999)}"


def identity_of(pid: int) -> str:
    """The `bot.procinfo.process_identity()` the process `pid` of this host would have."""
    from bot.procinfo import start_time

    return f"{socket.gethostname()}:{pid}:{start_time(pid)}"


def dead_identity() -> str:
    """The identity of a process of this host that has exited (a bot process that died)."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        identity = identity_of(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    return identity


class Server:
    """A stand-in server on threads of this process: a Unix socket at ``address`` when it is a
    path, TCP when it is ``(host, port)`` (port 0: a free one, read back from `port`). Every
    connection is answered on a thread of its own by `answer`, which a subclass gives (its own
    attributes set before it calls this `__init__`: the first connection may come at once)."""

    def __init__(self, address: Path | tuple[str, int], *, backlog: int = 128) -> None:
        unix = isinstance(address, Path)
        self.sock = socket.socket(socket.AF_UNIX if unix else socket.AF_INET)
        self.sock.bind(str(address) if isinstance(address, Path) else address)
        self.sock.listen(backlog)  # 128: what listen() picks when it is given none
        self.port: int = 0 if unix else self.sock.getsockname()[1]
        self.accepted = 0
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def answer(self, conn: socket.socket) -> None:
        """Talk to one client (on its own thread); closing `conn` is up to it, or to `close`."""
        raise NotImplementedError

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                self.conns.append(conn)
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def close(self) -> None:
        """Stop listening and end every connection still open; the accepting thread has stopped."""
        # close() alone leaves the thread blocked in accept(): after the next signal it accepts
        # again on the same fd number, by then another test's server (it answered a package
        # index's requests with a 401, and hung that index's shutdown). shutdown() wakes it, and
        # the same for an answering thread blocked in recv().
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with self.lock:
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the server's accepting thread did not stop"
