"""Finding a test's own processes on the host (sandboxed ones included: their host pids show in /proc)."""

from __future__ import annotations

import os
import random
import socket
import subprocess
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
