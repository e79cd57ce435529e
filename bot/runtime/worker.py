"""Workers: claim jobs, run them, keep their lease alive, record the outcome.

Job kinds are a table too: `webhook` jobs go through the event router, other kinds
(plan execution, approval polls) register a handler in `JobKinds`.

A worker is one of a few (2 by default) shared by every installation, so a job may wait in place
for GitHub's pacing only `patience` seconds: a longer wait (an installation's hour of creations
used up, a rate-limit pause) raises Throttled, and the job goes back to the queue, due when the
wait ends, its attempt not counted, while the worker takes other jobs. Kinds registered with
`holds_worker` (plan execution and the like, which keep their worker for minutes anyway and would
lose work if started over) wait in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
import uuid
from collections.abc import Awaitable, Callable

import orjson

from bot.clock import utcnow
from bot.db.queue import ClaimedJob, JobQueue
from bot.errors import PlanCascadeError, Throttled
from bot.github.throttle import PATIENCE
from bot.log import log_context
from bot.procinfo import process_identity
from bot.redaction import redact
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.webhook import WEBHOOK_JOB, IntakePressure

log = logging.getLogger(__name__)

JobHandler = Callable[[ClaimedJob, Services], Awaitable[None]]
PATIENCE_SECONDS = 5.0
"""How long a job may wait in place for GitHub's pacing before it is put back in the queue."""


class JobKinds:
    """A table from job kind to handler."""

    def __init__(self) -> None:
        self._table: dict[str, JobHandler] = {}
        self._holding: set[str] = set()

    def register(self, kind: str, *, holds_worker: bool = False) -> Callable[[JobHandler], JobHandler]:
        """Decorator: run the handler for jobs of `kind`. `holds_worker`: a long job (agents, gates)
        that keeps its worker anyway; it waits for GitHub's pacing in place rather than start over."""

        def decorate(handler: JobHandler) -> JobHandler:
            self._table[kind] = handler
            if holds_worker:
                self._holding.add(kind)
            return handler

        return decorate

    def get(self, kind: str) -> JobHandler | None:
        """The handler for `kind`, if any."""
        return self._table.get(kind)

    def holds_worker(self, kind: str) -> bool:
        """Whether jobs of `kind` wait for GitHub in place (see `register`)."""
        return kind in self._holding

    def merge(self, other: JobKinds) -> None:
        """Add another table's handlers."""
        self._table.update(other._table)
        self._holding |= other._holding


def worker_identity() -> str:
    """A name unique to this worker: `host:pid:process-start:suffix` (see `bot.procinfo`)."""
    return f"{process_identity()}:{uuid.uuid4().hex[:6]}"


class WorkerPool:
    """`concurrency` loops claiming jobs from the queue until `stop` is set."""

    def __init__(
        self,
        *,
        queue: JobQueue,
        router: Router,
        services: Services,
        kinds: JobKinds | None = None,
        concurrency: int = 2,
        poll_interval: float = 1.0,
        wake: asyncio.Event | None = None,
        intake: IntakePressure | None = None,
        reap: Callable[[], object] | None = None,
        patience: float = PATIENCE_SECONDS,
    ) -> None:
        self.queue = queue
        self.intake = intake
        self.router = router
        self.services = services
        self.kinds = kinds or JobKinds()
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.wake = wake or asyncio.Event()
        self.processed = 0
        self.reclaim_interval = 15.0
        self.reap = reap
        """Kills what dead bot processes of this host left running (`ProcessRegistry.kill_leftovers`)."""
        self.patience = patience

    async def run(self, stop: asyncio.Event) -> None:
        """Run the worker loops until `stop` is set; running jobs finish first.

        First, and then every `reclaim_interval` seconds, jobs whose holder is a dead process of
        this host (a crashed predecessor, or a sibling worker killed meanwhile) are released at
        once instead of after their lease, once what that process left running is killed.
        """
        await self._release_dead()
        loops = [asyncio.create_task(self._loop(worker_identity(), stop)) for _ in range(self.concurrency)]
        loops.append(asyncio.create_task(self._reclaimer(stop)))
        try:
            await asyncio.gather(*loops)
        finally:
            for task in loops:
                task.cancel()

    async def _reclaimer(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.reclaim_interval)
            if not stop.is_set():
                await self._release_dead()

    async def _release_dead(self) -> None:
        if self.reap is not None:  # a dead worker's agents must not outlive it into its resumed job
            try:
                await asyncio.to_thread(self.reap)
            except Exception:
                log.exception("killing what dead bot processes left running failed")
        try:
            released = await self.queue.release_dead_holders()
        except Exception:
            log.exception("looking for jobs of dead workers failed")
            return
        if released:
            self.wake.set()

    async def _loop(self, worker_id: str, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self.intake is not None:  # the webhook intake of this process goes first
                await self.intake.turn()
            try:
                job = await self.queue.claim(worker_id, in_thread=self._intake_busy())
            except Exception:
                log.exception("claiming a job failed; retrying shortly")
                job = None
            if job is None:
                await self._idle(stop)
                continue
            await asyncio.sleep(0)  # a claim, a job and its completion are three steps of the loop, not one
            await self.run_job(job, worker_id)

    def _intake_busy(self) -> bool:
        """Deliveries are coming in: the queue's writes wait for SQLite in a thread, off the loop."""
        return self.intake is not None and not self.intake.calm()

    async def _idle(self, stop: asyncio.Event) -> None:
        self.wake.clear()
        waiters = [asyncio.create_task(self.wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waiters, timeout=self.poll_interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def run_job(self, job: ClaimedJob, worker_id: str) -> str:
        """Run one claimed job to its outcome: `done`, `queued` (retry), `deferred` (put back until
        GitHub lets it write), `dead` or `lost`."""
        metrics = self.services.metrics
        heartbeat = asyncio.create_task(self._heartbeat(job, worker_id))
        patience = PATIENCE.set(None if self.kinds.holds_worker(job.kind) else self.patience)
        with log_context(delivery=job.delivery_id or f"job-{job.id}", plan=job.group_key):
            try:
                await self._dispatch(job)
            except Throttled as exc:
                heartbeat.cancel()
                return await self._deferred(job, worker_id, exc)
            except PlanCascadeError as exc:
                if exc.retryable:
                    heartbeat.cancel()
                    return await self._failed(job, worker_id, exc)
                log.error(
                    "job %s (%s) cannot succeed, not retrying: %s",
                    job.id,
                    job.kind,
                    exc.message,
                    extra={"job_id": job.id, "kind": job.kind, "outcome": "rejected"},
                )
                if metrics:
                    metrics.jobs.labels(job.kind, "rejected").inc()
            except Exception as exc:  # a job failing must never kill the worker
                heartbeat.cancel()
                return await self._failed(job, worker_id, exc)
            finally:
                PATIENCE.reset(patience)
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            await asyncio.sleep(0)
            ours = await self.queue.complete(job.id, worker_id, in_thread=self._intake_busy())
            self.processed += 1
            if metrics:
                metrics.jobs.labels(job.kind, "done").inc()
                metrics.job_latency.labels(job.kind).observe((utcnow() - job.created_at).total_seconds())
            if not ours:
                log.warning("job %s finished after its lease was taken over", job.id)
                return "lost"
            return "done"

    async def _deferred(self, job: ClaimedJob, worker_id: str, exc: Throttled) -> str:
        """Put the job back until GitHub lets its installation write again; the worker moves on."""
        note = f"waiting for GitHub: {exc.message}"
        ours = await self.queue.defer(job.id, worker_id, seconds=exc.seconds, note=note)
        log.info(
            "job %s (%s) put back for %.0f s: %s",
            job.id,
            job.kind,
            exc.seconds,
            exc.message,
            extra={"job_id": job.id, "kind": job.kind, "outcome": "deferred"},
        )
        if self.services.metrics:
            self.services.metrics.jobs.labels(job.kind, "deferred").inc()
        return "deferred" if ours else "lost"

    async def _failed(self, job: ClaimedJob, worker_id: str, exc: Exception) -> str:
        """Record a failure: back to the queue with backoff, or dead after the last attempt.

        Called inside the `except` block, so the traceback is still at hand. What is kept is
        redacted whole (the queue keeps its tail: a secret cut in two would no longer look like one).
        """
        detail = redact(exc.message if isinstance(exc, PlanCascadeError) else traceback.format_exc())
        outcome = await self.queue.fail(job.id, worker_id, detail)
        log.log(
            logging.ERROR if outcome == "dead" else logging.WARNING,
            "job %s (%s) failed on attempt %d/%d -> %s: %s",
            job.id,
            job.kind,
            job.attempts,
            job.max_attempts,
            outcome,
            exc,
            extra={"job_id": job.id, "kind": job.kind, "outcome": outcome},
        )
        if self.services.metrics:
            self.services.metrics.jobs.labels(job.kind, "dead" if outcome == "dead" else "retry").inc()
        return outcome

    async def _dispatch(self, job: ClaimedJob) -> None:
        if job.kind == WEBHOOK_JOB:
            data = job.payload
            payload = (
                data["payload"] if "payload" in data else orjson.loads(job.body or data.get("body") or "{}")
            )
            event = Event.from_delivery(name=data["event"], delivery_id=data["delivery_id"], payload=payload)
            ran = await self.router.dispatch(event, self.services)
            if not ran:
                log.info("no handler for %s.%s: ignored", event.name, event.action)
            return
        handler = self.kinds.get(job.kind)
        if handler is None:
            raise PlanCascadeError(f"no handler registered for job kind {job.kind!r}")
        await handler(job, self.services)

    async def _heartbeat(self, job: ClaimedJob, worker_id: str) -> None:
        interval = max(self.queue.lease.total_seconds() / 3, 0.5)
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self.queue.heartbeat(job.id, worker_id):
                    log.warning("lost the lease of job %s", job.id)
                    return
            except Exception:
                log.exception("heartbeat of job %s failed", job.id)
