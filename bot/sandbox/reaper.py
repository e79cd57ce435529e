"""Processes that must die with the bot: a record of running process groups in the data dir.

Every untrusted process leads its own process group. Its group id and start time (from
`/proc/<pid>/stat`, so a reused pid is never mistaken for it) are recorded while it runs,
with the identity of the bot process that started it (`bot.procinfo.process_identity`). A bot
killed with SIGKILL leaves its records behind; the next bot process to start (and every worker
that takes over a dead worker's jobs) kills those groups before it re-creates any worktree.
(Inside bubblewrap they die with the bot anyway.)

Several bot processes may share one data dir on one host (a `serve` and `worker`s): a group
whose recording process is alive is that process's business, and stays untouched.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path

from bot.procinfo import dead_holder, on_this_host, process_identity, start_time

log = logging.getLogger(__name__)
KILL_WAIT = 5.0
"""Seconds `kill_leftovers` waits for what it killed to die."""


class ProcessRegistry:
    """One file per running process group under `root` (`<data dir>/run/processes`).

    `owner` is the identity written into this registry's records (default: this process's).
    """

    def __init__(self, root: Path, *, owner: str | None = None) -> None:
        self.root = root
        self._owner = owner

    @property
    def owner(self) -> str:
        """Who the records written here say started the group."""
        return self._owner or process_identity()

    def record(self, pgid: int) -> None:
        """Remember a group that was just started."""
        started = start_time(pgid)
        if started is None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        entry = {"pgid": pgid, "start": started, "owner": self.owner}
        # Written aside, then renamed: another process's sweep never reads half a record.
        partial = self.root / f".{pgid}.json.partial"
        partial.write_text(json.dumps(entry))
        partial.replace(self.root / f"{pgid}.json")

    def forget(self, pgid: int) -> None:
        """The group ended (or was killed by us)."""
        with contextlib.suppress(FileNotFoundError):
            (self.root / f"{pgid}.json").unlink()

    def kill_leftovers(self) -> int:
        """Kill every recorded group still alive whose recording process is dead; returns how many.

        A group recorded by a live process (this one, or another bot process on this host) is
        left running and keeps its record. A record without an owner was written before owners
        were recorded, when one process used a data dir: it counts as a dead process's.
        """
        killed: list[tuple[int, int]] = []
        for path in sorted(self.root.glob("*.json")) if self.root.is_dir() else []:
            try:
                entry = json.loads(path.read_text())
                pgid, started = int(entry["pgid"]), int(entry["start"])
                owner = entry.get("owner")
                if owner is not None and not isinstance(owner, str):
                    raise TypeError(owner)
            except FileNotFoundError:
                continue  # its process forgot it meanwhile
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            running = pgid != os.getpgid(0) and start_time(pgid) == started
            verdict = self._verdict(owner)
            if verdict == "alive":
                continue
            if verdict == "elsewhere":
                if not running:  # gone, or in another pid namespace: nothing here to kill or keep
                    path.unlink(missing_ok=True)
                continue
            if running:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed.append((pgid, started))
                    log.warning(
                        "killed process group %s left running by a bot process that died (%s)",
                        pgid,
                        verdict,
                    )
            path.unlink(missing_ok=True)
        _wait_gone(killed)
        return len(killed)

    def _verdict(self, owner: str | None) -> str:
        """`alive`, `elsewhere` (another host's: not ours to judge) or why the owner is dead."""
        if owner is None:
            return "a process from before owners were recorded"
        if owner == self.owner:
            return "alive"
        if not on_this_host(owner):
            return "elsewhere"
        return dead_holder(owner) or "alive"


def _wait_gone(groups: list[tuple[int, int]], *, timeout: float = KILL_WAIT) -> None:
    """Return once each killed group's leader is gone (dead or a zombie), at most `timeout` s:
    a SIGKILL is delivered at once but the process takes a moment to die, and the job it held
    must not run again while it still touches the worktree."""
    deadline = time.monotonic() + timeout
    waiting = list(groups)
    while waiting and time.monotonic() < deadline:
        waiting = [(pgid, started) for pgid, started in waiting if start_time(pgid) == started]
        if waiting:
            time.sleep(0.01)
    for pgid, _ in waiting:
        log.warning("process group %s was killed but has not died within %.0f s", pgid, timeout)
