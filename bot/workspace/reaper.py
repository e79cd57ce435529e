"""Processes that must die with the bot: a record of running process groups in the data dir.

Every untrusted process leads its own process group. Its group id and start time (from
`/proc/<pid>/stat`, so a reused pid is never mistaken for it) are recorded while it runs; a
bot killed with SIGKILL leaves the records behind, and the next start kills those groups
before it re-creates any worktree. (Inside bubblewrap they die with the bot anyway.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from pathlib import Path

from bot.procinfo import start_time

log = logging.getLogger(__name__)


class ProcessRegistry:
    """One file per running process group under `root` (`<data dir>/run/processes`)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def record(self, pgid: int) -> None:
        """Remember a group that was just started."""
        started = start_time(pgid)
        if started is None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / f"{pgid}.json").write_text(json.dumps({"pgid": pgid, "start": started}))

    def forget(self, pgid: int) -> None:
        """The group ended (or was killed by us)."""
        with contextlib.suppress(FileNotFoundError):
            (self.root / f"{pgid}.json").unlink()

    def kill_leftovers(self) -> int:
        """Kill every recorded group still alive (a crashed predecessor's); returns how many."""
        killed = 0
        for path in sorted(self.root.glob("*.json")) if self.root.is_dir() else []:
            try:
                entry = json.loads(path.read_text())
                pgid, started = int(entry["pgid"]), int(entry["start"])
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if pgid != os.getpgid(0) and start_time(pgid) == started:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed += 1
                    log.warning("killed process group %s left running by a previous bot process", pgid)
            path.unlink(missing_ok=True)
        return killed
