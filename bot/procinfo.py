"""Who a process is: its start time (from /proc) tells a live process from a reused pid.

Several bot processes may share a host (and a data dir): whatever one records (a job's lease,
a running process group) carries its `process_identity()`, and another process acts on the
record only when `dead_holder` says that process is gone.
"""

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


def on_this_host(identity: str | None) -> bool:
    """Whether a `process_identity()` (or an id that starts with one) names a process of this host."""
    parts = (identity or "").split(":")
    return len(parts) >= 3 and parts[0] == socket.gethostname() and parts[1].isdigit()


def alive_here(identity: str | None) -> bool:
    """Whether the process named by a `process_identity()` prefix runs on this host right now."""
    return on_this_host(identity) and dead_holder(identity) is None


def dead_holder(identity: str | None) -> str | None:
    """Why the process named by a `process_identity()` prefix is dead (None: alive, or elsewhere)."""
    if not on_this_host(identity):
        return None  # another host (or an old-style id): only its lease can tell
    parts = (identity or "").split(":")
    pid, recorded = int(parts[1]), parts[2]
    now = start_time(pid)
    if now is None:
        return f"its process {pid} on this host is gone"
    if str(now) != recorded:
        return f"process {pid} on this host is another process now"
    return None
