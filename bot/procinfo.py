"""Who a process is: its start time (from /proc) tells a live process from a reused pid."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None when it is gone or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@functools.cache
def process_identity() -> str:
    """`host:pid:start`: unique to this process, even across pid reuse and container restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{start_time(os.getpid())}"


def dead_holder(identity: str | None) -> str | None:
    """Why the process named by a `process_identity()` prefix is dead (None: alive, or elsewhere)."""
    parts = (identity or "").split(":")
    if len(parts) < 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return None  # another host (or an old-style id): only its lease can tell
    pid, recorded = int(parts[1]), parts[2]
    now = start_time(pid)
    if now is None:
        return f"its process {pid} on this host is gone"
    if str(now) != recorded:
        return f"process {pid} on this host is another process now"
    return None
