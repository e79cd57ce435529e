"""One installation's write queue: GitHub's pacing of content-creating requests, in the order
people wait for the writes.

GitHub allows at most 80 content-creating requests a minute and 500 an hour per installation,
and asks for about one a second sustained. :class:`Throttle` is a token bucket: a short burst
(`burst` calls, 3 by default) goes at once, then one call per `min_interval`; never more than
`per_minute` in any 60 s; and never more than `per_hour` creations (POSTs: comments, reactions,
check runs, pull requests…) in any hour, edits of what exists not counted there.

Writes that wait are served by :class:`Priority`, not by arrival: an answer a person waits for
(a plan comment, a reply) before a 👀, a 👀 before other work, edits nobody waits for (a plan
comment's signature, progress) last; and a 👀 or such an edit never takes the bucket's last
write. A 👀 still queued when the answer on its issue is let through is dropped (the answer
says more); an edit still queued when a newer edit of the same comment arrives is dropped (the
newer one carries it); two writes of one comment never overlap.

A task may wait in place only as long as :data:`PATIENCE` says (a job holds one of the server's
few workers): a longer wait raises :class:`Throttled` with the moment the write could go, and the
worker puts the job back until then. Writes nobody awaits (:meth:`Throttle.submit`) run in tasks
of their own. Pure logic over an injected clock and sleep, so tests run it on a fake clock.
:class:`ThrottleRegistry` keeps one throttle per installation.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from bot.errors import Throttled

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)
WINDOW_SECONDS = 60.0
HOUR_SECONDS = 3600.0

PATIENCE: ContextVar[float | None] = ContextVar("github_patience", default=None)
"""Seconds the current task may wait in place for GitHub's pacing or rate limits; None: as long
as it takes. Workers set it for the jobs that must not hold a worker while GitHub makes them wait."""


class Priority(IntEnum):
    """Which waiting write goes first (lower first)."""

    ANSWER = 0
    """A comment a person is waiting for: a plan, a reply, a refusal."""
    ACK = 1
    """A 👀 saying a request was seen; dropped when its answer goes first."""
    WORK = 2
    """Check runs, pull requests, labels, issues."""
    EDIT = 3
    """An edit nobody waits for: a new plan comment's signature, progress."""


@dataclass(eq=False)
class _Ticket:
    priority: int
    seq: int
    creates: bool
    future: asyncio.Future[bool]
    answers: Hashable | None = None
    acks: Hashable | None = None
    key: Hashable | None = None
    replaceable: bool = False


@dataclass
class _Counts:
    """What the queue did besides letting writes through (the status page and tests read it)."""

    dropped_acks: int = 0
    superseded_edits: int = 0
    deferred: int = 0
    detached_failed: int = 0


class Throttle:
    """Admit at most `per_minute` calls in any 60 s window and `per_hour` creations in any hour;
    after a burst of `burst`, one per `min_interval` seconds (a token bucket of `burst` tokens,
    one back every `min_interval`); waiting calls go by priority."""

    def __init__(
        self,
        *,
        per_minute: int = 80,
        per_hour: int = 500,
        min_interval: float = 1.0,
        burst: int = 3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        if per_hour < 1:
            raise ValueError("per_hour must be at least 1")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.per_minute = per_minute
        self.per_hour = per_hour
        self.min_interval = min_interval
        self.burst = min(burst, per_minute)
        self._clock = clock
        self._sleep = sleep
        self._admitted: deque[float] = deque()
        self._created: deque[float] = deque()
        self._tokens = float(self.burst)
        self._filled_at = float("-inf")
        self._queue: list[_Ticket] = []
        self._busy: set[Hashable] = set()
        self._seq = itertools.count()
        self._pump: asyncio.Task[None] | None = None
        self._kick: asyncio.Event | None = None
        self._detached: set[asyncio.Task[None]] = set()
        self.counts = _Counts()
        self.metrics: Metrics | None = None

    # -- the bucket's arithmetic ---------------------------------------------------------
    def _tokens_at(self, now: float) -> float:
        if self.min_interval <= 0 or self._filled_at == float("-inf"):
            return float(self.burst)
        return min(float(self.burst), self._tokens + (now - self._filled_at) / self.min_interval)

    def delay(self, now: float, *, creates: bool = True, reserve: int = 0) -> float:
        """Seconds to wait at `now` before the next call may go (0 when it may go now); `reserve`:
        that many calls' worth of the bucket must be left after it (kept for answers)."""
        while self._admitted and self._admitted[0] <= now - WINDOW_SECONDS:
            self._admitted.popleft()
        tokens, needed = self._tokens_at(now), 1 + min(reserve, self.burst - 1)
        wait = 0.0 if tokens >= needed else (needed - tokens) * self.min_interval
        if len(self._admitted) >= self.per_minute:
            wait = max(wait, self._admitted[0] + WINDOW_SECONDS - now)
        return max(wait, self._hour_wait(now) if creates else 0.0, 0.0)

    def _hour_wait(self, now: float) -> float:
        while self._created and self._created[0] <= now - HOUR_SECONDS:
            self._created.popleft()
        return self._created[0] + HOUR_SECONDS - now if len(self._created) >= self.per_hour else 0.0

    def created_last_hour(self) -> int:
        """Creations admitted in the last hour (what the hourly limit counts)."""
        self._hour_wait(self._clock())
        return len(self._created)

    def estimate(self, *, priority: int = Priority.WORK, creates: bool = True) -> float:
        """Seconds a call of `priority` asked for now would wait: behind the calls queued before it,
        for the bucket, the minute's and (for a creation) the hour's limit."""
        now = self._clock()
        self.delay(now, creates=creates)  # forgets what left the windows
        ahead = [t for t in self._queue if t.priority <= priority]
        calls = len(ahead) + 1
        wait = 0.0
        if self.min_interval > 0:
            wait = max(calls - self._tokens_at(now), 0.0) * self.min_interval
        over = len(self._admitted) + calls - self.per_minute
        if over > 0:
            wait = max(wait, _nth(self._admitted, over - 1, now, WINDOW_SECONDS) - now)
        if creates:
            over = len(self._created) + sum(1 for t in ahead if t.creates) + 1 - self.per_hour
            if over > 0:
                wait = max(wait, _nth(self._created, over - 1, now, HOUR_SECONDS) - now)
        return max(wait, 0.0)

    # -- waiting for a turn --------------------------------------------------------------
    async def wait(
        self, *, creates: bool = True, priority: int = Priority.WORK, answers: Hashable | None = None
    ) -> None:
        """Wait until a content-creating call may go, and count it as gone. `creates`: it makes
        something new (a POST), which GitHub also counts against the hourly limit. `answers`: the
        issue it answers on (its queued 👀 are dropped). Raises Throttled past the task's PATIENCE."""
        async with self.turn(creates=creates, priority=priority, answers=answers):
            return

    @contextlib.asynccontextmanager
    async def turn(
        self,
        *,
        creates: bool = True,
        priority: int = Priority.WORK,
        answers: Hashable | None = None,
        acks: Hashable | None = None,
        key: Hashable | None = None,
        replaceable: bool = False,
        patience: float | None = None,
        waits: bool = True,
    ) -> AsyncIterator[bool]:
        """Hold a turn for one write: yields True to send it, False when it was dropped (a 👀 whose
        answer went first, `acks`) or superseded (a `replaceable` edit of `key` that a newer edit of
        `key` replaced). No other write of `key` is let through until the block ends. `patience`
        (default: the task's PATIENCE, when `waits`) bounds the wait: beyond it, Throttled."""
        bound = PATIENCE.get() if waits and patience is None else patience
        if bound is not None:
            due = self.estimate(priority=priority, creates=creates)
            if due > bound:
                self.counts.deferred += 1
                raise Throttled(
                    f"GitHub's pacing of this installation's writes would hold this job {due:.0f} s",
                    seconds=due,
                )
        ticket = _Ticket(priority, next(self._seq), creates, asyncio.get_running_loop().create_future())
        ticket.answers, ticket.acks, ticket.key, ticket.replaceable = answers, acks, key, replaceable
        if key is not None:
            for old in [t for t in self._queue if t.key == key and t.replaceable]:
                self._resolve(old, False)
                self.counts.superseded_edits += 1
                self._skipped("edit")
        self._queue.append(ticket)
        self._wake()
        try:
            go = await ticket.future
        except BaseException:  # cancelled while waiting, or just as its turn came
            if ticket in self._queue:
                self._queue.remove(ticket)
            elif key is not None and ticket.future.done() and not ticket.future.cancelled():
                self._busy.discard(key)
            self._wake()
            raise
        try:
            yield go
        finally:
            if go and key is not None:
                self._busy.discard(key)
                self._wake()

    def submit(
        self,
        send: Callable[[], Awaitable[object]],
        *,
        what: str,
        creates: bool,
        priority: int,
        acks: Hashable | None = None,
        key: Hashable | None = None,
        patience: float | None = None,
    ) -> None:
        """Send a write nobody awaits (`send`, when its turn comes) from a task of its own: a 👀
        (`acks`: dropped when the answer on that issue goes first), an edit (`key`: replaced by a
        newer edit of the same comment). One that could not go within `patience` seconds is not
        sent. A failure is logged; :meth:`settle` waits for them all."""

        async def run() -> None:
            PATIENCE.set(None)  # this task holds no worker: GitHub's pauses are waited out here
            replaceable = key is not None
            try:
                async with self.turn(
                    creates=creates,
                    priority=priority,
                    acks=acks,
                    key=key,
                    replaceable=replaceable,
                    patience=patience,
                    waits=False,
                ) as go:
                    if go:
                        await send()
            except Throttled as exc:
                self.counts.dropped_acks += acks is not None
                self._skipped("ack" if acks is not None else "edit")
                log.info("did not %s: %s", what, exc.message)
            except Exception as exc:
                self.counts.detached_failed += 1
                log.warning("could not %s: %s", what, getattr(exc, "message", None) or repr(exc))

        task = asyncio.ensure_future(run())
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)

    async def settle(self, within: float | None = None) -> int:
        """Wait for the writes nobody awaits (at most `within` seconds; those left then are
        cancelled); how many were cancelled."""
        pending = set(self._detached)
        if not pending:
            return 0
        _, left = await asyncio.wait(pending, timeout=within)
        for task in left:
            task.cancel()
        return len(left)

    # -- the queue's pump ----------------------------------------------------------------
    def _wake(self) -> None:
        if self._kick is not None:
            self._kick.set()
        if self._queue and (self._pump is None or self._pump.done()):
            self._pump = asyncio.ensure_future(self._run())

    def _resolve(self, ticket: _Ticket, go: bool) -> None:
        if ticket in self._queue:
            self._queue.remove(ticket)
        if not ticket.future.done():
            ticket.future.set_result(go)

    def _pick(self, now: float) -> tuple[_Ticket | None, float]:
        """The waiting call to let through now, or None and how long until one may go.

        By priority: a call behind one that waits for the bucket or the minute waits too; it may
        pass one that only the hour holds (an edit behind a creation) or whose comment is busy."""
        soonest = float("inf")
        for ticket in sorted(self._queue, key=lambda t: (t.priority, t.seq)):
            if ticket.key is not None and ticket.key in self._busy:
                continue
            reserve = 1 if ticket.priority in (Priority.ACK, Priority.EDIT) else 0  # kept for answers, work
            pause = self.delay(now, creates=ticket.creates, reserve=reserve)
            if pause <= 0:
                return ticket, 0.0
            soonest = min(soonest, pause)
            if self.delay(now, creates=False, reserve=reserve) > 0:
                break
        return None, soonest

    async def _run(self) -> None:
        while self._queue:
            now = self._clock()
            ticket, pause = self._pick(now)
            if ticket is not None:
                self._admit(ticket, now)
                continue
            if any(t.creates for t in self._queue) and (hourly := self._hour_wait(now)) > 0:
                log.warning(
                    "%d content-creating GitHub requests in the last hour (GitHub's limit for an "
                    "installation): the next one waits %.0f s",
                    self.per_hour,
                    hourly,
                )
            await self._nap(pause)

    async def _nap(self, seconds: float) -> None:
        """Sleep until a call may go, or until the queue changes (a new call, a write finished)."""
        self._kick = kick = asyncio.Event()
        waiters: list[asyncio.Future[object]] = [asyncio.ensure_future(kick.wait())]
        if seconds != float("inf"):
            waiters.append(asyncio.ensure_future(self._sleep(seconds)))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            self._kick = None

    def _admit(self, ticket: _Ticket, now: float) -> None:
        self._tokens, self._filled_at = self._tokens_at(now) - 1, now
        self._admitted.append(now)
        if ticket.creates:
            self._created.append(now)
        if ticket.key is not None:
            self._busy.add(ticket.key)
        self._resolve(ticket, True)
        if ticket.answers is not None:
            for ack in [t for t in self._queue if t.acks == ticket.answers]:
                self._resolve(ack, False)
                self.counts.dropped_acks += 1
                self._skipped("ack")

    def _skipped(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.github_writes_skipped.labels(kind).inc()


def _nth(times: deque[float], index: int, now: float, window: float) -> float:
    """When the `index`-th oldest call of `times` leaves its window (a call not yet made: now + window)."""
    return times[index] + window if index < len(times) else now + window


class ThrottleRegistry:
    """One :class:`Throttle` per key (an installation id), created on first use."""

    def __init__(self, factory: Callable[[], Throttle] = Throttle, *, metrics: Metrics | None = None) -> None:
        self._factory = factory
        self._throttles: dict[Hashable, Throttle] = {}
        self.metrics = metrics

    def get(self, key: Hashable) -> Throttle:
        """The throttle for `key`, the same object every time."""
        if key not in self._throttles:
            throttle = self._throttles[key] = self._factory()
            throttle.metrics = throttle.metrics or self.metrics
        return self._throttles[key]

    def known(self) -> dict[Hashable, Throttle]:
        """Every throttle made so far (one per installation this process wrote for)."""
        return dict(self._throttles)

    async def settle(self, within: float | None = None) -> int:
        """Wait for every installation's writes nobody awaits (see :meth:`Throttle.settle`)."""
        left = 0
        for throttle in list(self._throttles.values()):
            left += await throttle.settle(within)
        return left
