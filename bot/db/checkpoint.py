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
and the next burst appended to the log.

Under writes that never stop, no PASSIVE checkpoint ends with every frame copied (the writers
append while it copies), so SQLite never starts the log over and its file grew to gigabytes
under a long burst. Once the log passes `restart_bytes`, a RESTART checkpoint follows the
PASSIVE one: it holds writers back while it copies the frames written since (a few megabytes
at most) and waits, at most `RESTART_WAIT_MS`, for readers of older snapshots; the next write
then starts the log from its beginning. The file keeps its largest size (cutting it back with
`journal_size_limit` made the first write after each burst truncate it on the intake's path: a
400 ms stall), which is now about `restart_bytes`.
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
RESTART_BYTES = 1024 * 1024 * 1024
"""A log this long is started over: about 10,000 deliveries of ~12 KB with their jobs, written back
to back (at a realistic rate the log starts over in the gaps between writes, long before)."""
RESTART_WAIT_MS = 50
"""How long a RESTART checkpoint may wait for the writer lock or for readers (writers wait with it)."""


class Checkpointer:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` in its own thread, every `threshold` bytes written."""

    def __init__(
        self,
        url: str,
        *,
        threshold: int = THRESHOLD_BYTES,
        idle: float = IDLE_SECONDS,
        restart_bytes: int = RESTART_BYTES,
    ) -> None:
        self.path = sqlite_path(url)
        self.threshold = threshold
        self.idle = idle
        self.restart_bytes = restart_bytes
        self.checkpoints = 0
        self.restarts = 0
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
            frame_bytes = conn.execute("PRAGMA page_size").fetchone()[0] + 24  # a frame's header
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
                if frames * frame_bytes >= self.restart_bytes:
                    settled = self._restart(conn) and settled
        finally:
            conn.close()

    def _restart(self, conn: sqlite3.Connection) -> bool:
        """Copy the rest of the log, writers held back, so that the next write starts it over;
        whether it did (it gives up after `RESTART_WAIT_MS` of waiting: the next one tries again)."""
        conn.execute(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        except sqlite3.Error as exc:
            log.warning("WAL restart checkpoint failed: %s", exc)
            return False
        finally:
            conn.execute("PRAGMA busy_timeout=30000")
        if busy:
            return False
        self.restarts += 1
        log.debug("WAL restarted after copying %s of %s frames", copied, frames)
        return True

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running)."""
        self._stopping = True
        if self._thread is not None:
            self._due.set()
            self._thread.join(timeout=30)
            self._thread = None
