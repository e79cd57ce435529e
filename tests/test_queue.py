"""The durable job queue: restarts, leases, per-issue exclusivity, retries, PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.clock import utcnow
from bot.db.engine import QUEUE_ROW_BYTES, Database
from bot.db.queue import JobQueue, backoff_seconds
from bot.db.sqlite import sqlite_path
from bot.errors import Throttled
from bot.runtime.routing import Router
from bot.runtime.services import Services
from bot.runtime.settings import Settings
from bot.runtime.webhook import IntakePressure
from bot.runtime.worker import JobKinds, WorkerPool
from bot.sandbox.reaper import ProcessRegistry
from tests.processes import dead_identity, unique_sleep
from tests.support import postgres_database, wait_for

ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
async def sqlite_db(tmp_path: Path):
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'q.db'}")
    await db.migrate()
    yield db
    await db.dispose()


def _pool(queue: JobQueue, kinds: JobKinds, concurrency: int = 2) -> WorkerPool:
    return WorkerPool(
        queue=queue,
        router=Router(),
        services=Services(settings=Settings()),
        kinds=kinds,
        concurrency=concurrency,
        poll_interval=0.05,
    )


async def test_a_job_enqueued_before_a_restart_runs_after_it(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}"
    first = Database(url)
    await first.migrate()
    job_id = await JobQueue(first).enqueue(kind="note", group_key="o/r#1", payload={"n": 7})
    await first.dispose()  # the process goes away

    second = Database(url)
    ran: list[int] = []
    kinds = JobKinds()

    @kinds.register("note")
    async def _note(job, services) -> None:
        ran.append(job.payload["n"])

    queue = JobQueue(second)
    pool = _pool(queue, kinds)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))
    await wait_for(lambda: ran == [7])
    stop.set()
    await task
    assert (await queue.get(job_id)).status == "done"
    await second.dispose()


async def test_expired_lease_is_reclaimed_by_another_worker(sqlite_db: Database) -> None:
    clock = Clock()
    queue = JobQueue(sqlite_db, lease_seconds=60, clock=clock)
    job_id = await queue.enqueue(kind="k", group_key="g", payload={})
    first = await queue.claim("worker-a")
    assert first is not None and first.id == job_id
    assert await queue.claim("worker-b") is None  # leased
    clock.advance(61)
    again = await queue.claim("worker-b")
    assert again is not None and again.id == job_id and again.attempts == 2
    # The dead worker's late completion does not count; the new owner's does.
    assert not await queue.complete(job_id, "worker-a")
    assert await queue.complete(job_id, "worker-b")


async def test_heartbeat_keeps_the_lease(sqlite_db: Database) -> None:
    clock = Clock()
    queue = JobQueue(sqlite_db, lease_seconds=60, clock=clock)
    await queue.enqueue(kind="k", group_key="g", payload={})
    job = await queue.claim("a")
    clock.advance(50)
    assert await queue.heartbeat(job.id, "a")
    clock.advance(50)
    assert await queue.claim("b") is None


async def test_worker_killed_mid_job_has_its_job_reclaimed(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'kill.db'}"
    db = Database(url)
    await db.migrate()
    queue = JobQueue(db, lease_seconds=1)
    job_id = await queue.enqueue(kind="work", group_key="o/r#5", payload={})
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.queue_worker_script", "hang", url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == f"claimed {job_id}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (await queue.get(job_id)).status == "running"
    ran: list[int] = []
    kinds = JobKinds()

    @kinds.register("work")
    async def _work(job, services) -> None:
        ran.append(job.id)

    pool = _pool(queue, kinds)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))
    await wait_for(lambda: ran == [job_id], timeout=15)
    stop.set()
    await task
    job = await queue.get(job_id)
    assert job.status == "done" and job.attempts == 2
    await db.dispose()


async def test_a_dead_workers_job_is_reclaimed_at_once_not_when_its_lease_ends(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}"
    db = Database(url)
    await db.migrate()
    queue = JobQueue(db, lease_seconds=3600)
    job_id = await queue.enqueue(kind="work", group_key="o/r#6", payload={})
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.queue_worker_script", "hang-long", url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == f"claimed {job_id}"
        os.kill(proc.pid, signal.SIGKILL)  # the server dies mid-job
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    held = await queue.get(job_id)
    assert held.status == "running" and held.locked_by.split(":")[1] == str(proc.pid)
    assert held.lease_until.replace(tzinfo=UTC) > utcnow() + timedelta(minutes=50)  # far from expiring
    ran: list[int] = []
    kinds = JobKinds()

    @kinds.register("work")
    async def _work(job, services) -> None:
        ran.append(job.id)

    pool = _pool(queue, kinds)  # the restarted server's workers, same lease
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))
    await wait_for(lambda: ran == [job_id], timeout=15)
    stop.set()
    await task
    job = await queue.get(job_id)
    assert job.status == "done" and job.attempts == 2
    assert (
        "reclaimed at once" in job.last_error
        and f":{proc.pid}:" in job.last_error
        and "died" in job.last_error
    )
    await db.dispose()


async def test_a_live_workers_job_is_not_reclaimed(sqlite_db: Database) -> None:
    from bot.runtime.worker import worker_identity

    queue = JobQueue(sqlite_db, lease_seconds=3600)
    job_id = await queue.enqueue(kind="work", group_key="o/r#7", payload={})
    assert (await queue.claim(worker_identity())).id == job_id
    assert await queue.release_dead_holders() == []
    assert await queue.claim("another") is None


async def test_a_dead_workers_agents_are_killed_before_its_job_runs_again(
    sqlite_db: Database, tmp_path: Path
) -> None:
    """A live worker taking over a dead sibling's job (same host, same data dir) first kills what
    that sibling left running: two runs of one story never share its worktree."""
    holder = dead_identity()
    root = tmp_path / "processes"
    agent = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)  # unconfined, it outlived
    ProcessRegistry(root, owner=holder).record(agent.pid)
    queue = JobQueue(sqlite_db, lease_seconds=3600)
    job_id = await queue.enqueue(kind="work", group_key="o/r#8", payload={})
    assert (await queue.claim(f"{holder}:abcdef")).id == job_id
    agent_exit: list[int | None] = []
    kinds = JobKinds()

    @kinds.register("work")
    async def _work(job, services) -> None:  # type: ignore[no-untyped-def]
        agent_exit.append(agent.poll())

    pool = WorkerPool(
        queue=queue,
        router=Router(),
        services=Services(settings=Settings()),
        kinds=kinds,
        poll_interval=0.05,
        reap=ProcessRegistry(root).kill_leftovers,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))
    try:
        await wait_for(lambda: agent_exit, timeout=15)
    finally:
        stop.set()
        await task
        if agent.poll() is None:
            agent.kill()
        agent.wait()
    assert agent_exit == [-signal.SIGKILL], "the job ran again while the dead worker's agent still ran"


async def test_jobs_of_one_issue_never_run_at_once(sqlite_db: Database) -> None:
    queue = JobQueue(sqlite_db)
    a = await queue.enqueue(kind="k", group_key="o/r#1", payload={})
    b = await queue.enqueue(kind="k", group_key="o/r#1", payload={})
    c = await queue.enqueue(kind="k", group_key="o/r#2", payload={})
    first = await queue.claim("w1")
    second = await queue.claim("w2")
    assert (first.id, second.id) == (a, c)  # b waits for a: same issue
    assert await queue.claim("w3") is None
    await queue.complete(a, "w1")
    third = await queue.claim("w3")
    assert third.id == b


async def test_failed_jobs_retry_with_backoff_then_die_visibly(sqlite_db: Database, caplog) -> None:
    clock = Clock()
    queue = JobQueue(sqlite_db, clock=clock)
    job_id = await queue.enqueue(kind="boom", group_key="g", payload={}, max_attempts=3)
    kinds = JobKinds()

    @kinds.register("boom")
    async def _boom(job, services) -> None:
        raise RuntimeError("the handler broke")

    from bot.metrics import Metrics

    metrics = Metrics()
    pool = WorkerPool(
        queue=queue, router=Router(), kinds=kinds, services=Services(settings=Settings(), metrics=metrics)
    )
    outcomes = []
    for _ in range(3):
        job = await queue.claim("w")
        assert job is not None
        outcomes.append(await pool.run_job(job, "w"))
        assert await queue.claim("w") is None  # backing off
        clock.advance(backoff_seconds(job.attempts) + 1)
    assert outcomes == ["queued", "queued", "dead"]
    row = await queue.get(job_id)
    assert row.status == "dead" and "the handler broke" in row.last_error
    assert (await queue.counts()) == {"dead": 1}
    assert metrics.jobs.labels("boom", "dead")._value.get() == 1
    assert any("dead" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


async def test_a_job_waiting_for_github_is_put_back_until_due_and_keeps_its_attempts(
    sqlite_db: Database,
) -> None:
    clock = Clock()
    queue = JobQueue(sqlite_db, clock=clock)
    job_id = await queue.enqueue(kind="write", group_key="o/r#1", payload={}, max_attempts=1)
    later = await queue.enqueue(kind="write", group_key="o/r#1", payload={})
    other = await queue.enqueue(kind="write", group_key="x/y#1", payload={})
    kinds = JobKinds()

    @kinds.register("write")
    async def _write(job, services) -> None:
        if job.id == job_id:
            raise Throttled("the installation's hour of creations is used up", seconds=600)

    pool = WorkerPool(queue=queue, router=Router(), kinds=kinds, services=Services(settings=Settings()))
    job = await queue.claim("w")
    assert await pool.run_job(job, "w") == "deferred"
    taken = await queue.claim("w")
    assert taken.id == other, "the worker takes other jobs; the issue's next one waits its turn"
    assert await pool.run_job(taken, "w") == "done"
    assert await queue.claim("w2") is None
    clock.advance(601)
    again = await queue.claim("w")
    assert again.id == job_id and again.attempts == 1, "waiting was not an attempt (it has only one)"
    assert await pool.run_job(again, "w") == "deferred", "not dead: it never failed"
    clock.advance(601)
    assert (await queue.claim("w")).id == job_id
    assert (await queue.get(later)).status == "queued"


def test_backoff_grows_and_is_capped() -> None:
    delays = [backoff_seconds(n) for n in range(1, 8)]
    assert delays[:3] == [5, 20, 80] and delays[-1] == 900
    assert delays == sorted(delays)


@pytest.mark.postgres
async def test_two_worker_processes_on_postgres_never_run_one_job_twice(tmp_path: Path) -> None:
    async with postgres_database() as url:
        db = Database(url)
        await db.migrate()
        queue = JobQueue(db)
        ids = [await queue.enqueue(kind="record", group_key=f"o/r#{n % 25}", payload={}) for n in range(300)]
        out = tmp_path / "seen.txt"
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.queue_worker_script", "record", url, str(out)], cwd=ROOT
            )
            for _ in range(2)
        ]
        for proc in procs:
            assert await asyncio.to_thread(proc.wait, 120) == 0
        lines = [line.split() for line in out.read_text().splitlines()]
        seen = [int(parts[0]) for parts in lines]
        assert sorted(seen) == sorted(ids), "every job ran exactly once"
        assert len({parts[4] for parts in lines}) == 2, "both processes took work"
        spans = defaultdict(list)
        for _, group, start, end, _pid in lines:
            spans[group].append((float(start), float(end)))
        for group, runs in spans.items():
            runs.sort()
            for (_s1, e1), (s2, _e2) in itertools.pairwise(runs):
                assert s2 >= e1, f"two jobs of {group} overlapped"
        assert (await queue.counts()) == {"done": 300}
        await db.dispose()


async def test_unique_jobs_do_not_pile_up(sqlite_db: Database) -> None:
    queue = JobQueue(sqlite_db)
    first = await queue.enqueue(kind="poll", group_key="o/r#1", payload={}, unique=True)
    again = await queue.enqueue(kind="poll", group_key="o/r#1", payload={}, unique=True)
    other = await queue.enqueue(kind="poll", group_key="o/r#2", payload={}, unique=True)
    assert first == again and other != first
    job = await queue.claim("w")
    await queue.complete(job.id, "w")
    after = await queue.enqueue(kind="poll", group_key="o/r#1", payload={}, unique=True)
    assert after != first, "a finished poll does not block the next one"


async def test_a_job_out_of_attempts_is_marked_dead_and_the_claim_takes_the_next(sqlite_db: Database) -> None:
    clock = Clock()
    queue = JobQueue(sqlite_db, lease_seconds=60, clock=clock)
    spent = await queue.enqueue(kind="k", group_key="o/r#1", payload={}, max_attempts=1)
    assert (await queue.claim("crashed")).id == spent  # its worker dies holding it
    clock.advance(61)
    waiting = await queue.enqueue(kind="k", group_key="o/r#2", payload={})
    claimed = await queue.claim("w")
    assert claimed is not None and claimed.id == waiting, "no idle poll interval after retiring a job"
    row = await queue.get(spent)
    assert row.status == "dead" and "lease expired after the last attempt" in row.last_error


async def test_on_sqlite_claims_and_their_outcomes_take_no_turn_of_the_loop(sqlite_db: Database) -> None:
    """The webhook intake shares the loop and SQLite's write lock with in-process workers: a claim
    that held the lock across turns of a busy loop made every delivery of a burst wait for it."""
    queue = JobQueue(sqlite_db)
    for n in range(3):
        await queue.enqueue(kind="k", group_key=f"g{n}", payload={"n": n})
    turns: list[str] = []
    loop = asyncio.get_running_loop()

    async def without_a_turn(name: str, step):  # type: ignore[no-untyped-def]
        loop.call_soon(turns.append, name)
        result = await step
        assert turns == [], f"{name} let the loop turn"
        await asyncio.sleep(0)
        turns.clear()
        return result

    first = await without_a_turn("claim", queue.claim("w"))
    assert first.payload == {"n": 0} and first.attempts == 1
    assert await without_a_turn("heartbeat", queue.heartbeat(first.id, "w"))
    assert await without_a_turn("complete", queue.complete(first.id, "w"))
    second = await without_a_turn("claim", queue.claim("w"))
    assert await without_a_turn("fail", queue.fail(second.id, "w", "broke")) == "queued"
    assert await queue.counts() == {"done": 1, "queued": 2}


async def test_a_claim_waits_for_another_process_in_a_thread_while_the_loop_turns(
    sqlite_db: Database,
) -> None:
    queue = JobQueue(sqlite_db)
    job_id = await queue.enqueue(kind="k", group_key="g", payload={})
    other = sqlite3.connect(sqlite_path(sqlite_db.url), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a worker of another process, mid-transaction
    try:
        claim = asyncio.ensure_future(queue.claim("w"))
        turns = 0
        for _ in range(20):
            await asyncio.sleep(0.01)
            turns += 1
        assert turns == 20 and not claim.done()
    finally:
        other.execute("COMMIT")
        other.close()
    claimed = await asyncio.wait_for(claim, timeout=10)
    assert claimed is not None and claimed.id == job_id


async def test_while_deliveries_come_in_the_workers_writes_wait_in_a_thread(sqlite_db: Database) -> None:
    """Under a burst, SQLite's commits (and the disk under them) stay off the loop that answers
    the deliveries: the worker's claim and completion go to a thread."""
    queue = JobQueue(sqlite_db)
    await queue.enqueue(kind="k", group_key="g", payload={})
    threads: set[int] = set()
    real = sqlite_db.transaction

    async def spy(work, *, in_thread: bool = False):  # type: ignore[no-untyped-def]
        def recorded(conn):  # type: ignore[no-untyped-def]
            threads.add(threading.get_ident())
            return work(conn)

        return await real(recorded, in_thread=in_thread)

    sqlite_db.transaction = spy  # type: ignore[method-assign]
    now = [0.0]  # the intake's clock, moved by the test alone: never still "busy" on a fast machine
    pressure = IntakePressure(clock=lambda: now[0])
    kinds = JobKinds()

    @kinds.register("k")
    async def _ran(job, services) -> None:  # type: ignore[no-untyped-def]
        return None

    pool = WorkerPool(queue=queue, router=Router(), services=Services(settings=Settings()), kinds=kinds)
    pool.intake = pressure
    pressure.arrived()  # a delivery is being received
    try:
        job = await queue.claim("w", in_thread=pool._intake_busy())
        assert job is not None
        assert await pool.run_job(job, "w") == "done"
    finally:
        pressure.answered()
    assert threads and threading.get_ident() not in threads
    threads.clear()
    now[0] += pressure.quiet  # no delivery for the quiet time
    await queue.enqueue(kind="k", group_key="g", payload={})
    assert await queue.claim("w", in_thread=pool._intake_busy()) is not None  # quiet again: on the loop
    assert threads == {threading.get_ident()}


async def test_the_queues_commits_never_checkpoint_the_checkpointer_does(sqlite_db: Database) -> None:
    """SQLite's own checkpoint ran inside whichever commit crossed 1,000 pages of log: under a
    burst, nearly every claim and completion (10-20 ms, with disk syncs). The queue's connection
    turns it off and counts its writes towards the database's checkpoint thread instead."""
    queue = JobQueue(sqlite_db)
    assert (
        await sqlite_db.transaction(lambda conn: conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar())
        == 0
    )
    checkpointer = sqlite_db.checkpointer
    assert checkpointer is not None
    checkpointer.threshold = QUEUE_ROW_BYTES * 6
    for n in range(3):
        await queue.enqueue(kind="k", group_key=f"g{n}", payload={"n": n})
    assert checkpointer.checkpoints == 0
    for _ in range(3):
        job = await queue.claim("w")
        assert job is not None
        assert await queue.complete(job.id, "w")
    await wait_for(lambda: checkpointer.checkpoints >= 1)
    await sqlite_db.dispose()
    assert checkpointer._thread is None  # disposing of the database stops its checkpoint thread
