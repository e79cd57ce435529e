"""Checkpoints of SQLite's write-ahead log, off the path of any request.

In WAL mode a commit appends pages to `<db>-wal`; a checkpoint copies them into the
database file and syncs it. SQLite's default does that inside whichever commit crosses
1,000 pages, which under a burst of deliveries makes one delivery's write in every few
take 10–20 ms instead of 2. The intake's connection and the job queue's turn that off and
report what they wrote here instead (one `Checkpointer` a `Database`); past `threshold`
bytes a thread of this class's own runs a PASSIVE checkpoint (which never blocks writers or
readers) on a connection of its own.

Once the writes stop, it checkpoints what came after its last checkpoint too (`idle` seconds
later), and again until a checkpoint copied every frame: SQLite starts the log over only after
that, at the next write. Without it the frames of a burst's last few megabytes stayed uncopied
and the next burst appended to the log. The log's file still keeps the size of the longest busy
stretch (gigabytes under a long burst); cutting it back (`journal_size_limit`) made the first
write after each burst truncate that file on the intake's path: a 400 ms stall.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from bot.db.sqlite import sqlite_path, sqlite_pragmas

log = logging.getLogger(__name__)

THRESHOLD_BYTES = 4 * 1024 * 1024
"""SQLite's own default: 1,000 pages of 4 KiB."""
IDLE_SECONDS = 1.0
"""Past this without reaching the threshold, what was written since the last checkpoint is copied."""


class Checkpointer:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` in its own thread, every `threshold` bytes written."""

    def __init__(self, url: str, *, threshold: int = THRESHOLD_BYTES, idle: float = IDLE_SECONDS) -> None:
        self.path = sqlite_path(url)
        self.threshold = threshold
        self.idle = idle
        self.checkpoints = 0
        self._unchecked = 0
        self._due = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def written(self, nbytes: int) -> None:
        """Count bytes just committed; past the threshold, wake the checkpoint thread.

        Called from the loop and from the threads the intake's and the queue's writes wait in.
        """
        with self._lock:
            self._unchecked += nbytes
            if self._unchecked < self.threshold or self._stopping:
                return
            self._unchecked = 0
            self._start()
        self._due.set()

    def _start(self) -> None:
        if self._thread is None:
            thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to be had: the other connections' autocheckpoint remains
                log.warning("no WAL checkpoint thread: %s", exc)
                return
            self._thread = thread

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            sqlite_pragmas(conn)
            settled = True  # the last checkpoint copied every frame of the log
            while True:
                due = self._due.wait(timeout=self.idle)
                self._due.clear()
                if self._stopping:
                    return
                if not due:
                    with self._lock:
                        pending, self._unchecked = self._unchecked, 0
                    if settled and not pending:
                        continue
                try:
                    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:  # logged, and tried again when idle or past the threshold
                    log.warning("WAL checkpoint failed: %s", exc)
                    settled = False
                    continue
                settled = copied >= frames
                self.checkpoints += 1
                log.debug("WAL checkpoint: %s of %s frames copied (busy=%s)", copied, frames, busy)
        finally:
            conn.close()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running)."""
        self._stopping = True
        if self._thread is not None:
            self._due.set()
            self._thread.join(timeout=30)
            self._thread = None
