"""The intake's group commit. On SQLite: a batch per turn of the loop, written on the loop only
when the database is free; a busy database never blocks the loop; checkpoints happen in a thread
of their own. On PostgreSQL: the same answers for a burst with redeliveries."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from bot.app.server import build_runtime, create_app
from bot.db.checkpoint import Checkpointer
from bot.db.models import Delivery, Job
from bot.db.sqlite import sqlite_path, sqlite_pragmas
from bot.runtime.services import Services
from bot.runtime.webhook import IntakePressure
from bot.testing.deliveries import encode, load_fixture, signed_headers
from tests.support import WEBHOOK_SECRET, asgi_client, make_settings, postgres_database, wait_for


@pytest.fixture
async def server(tmp_path: Path):
    settings = make_settings(tmp_path, GITHUB_API_URL="http://github.test")
    runtime = build_runtime(settings, services=Services(settings=settings))
    await runtime.db.migrate()
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    async with asgi_client(app) as client:
        yield client, runtime, app
    app.intake.writer.close()
    await runtime.db.dispose()


def delivery(
    n: int | str, fixture: str = "ping.event.1", event: str = "ping"
) -> tuple[bytes, dict[str, str]]:
    body = encode(load_fixture(fixture))
    return body, signed_headers(body, secret=WEBHOOK_SECRET, event=event, delivery_id=f"intake-{n}")


async def counts(runtime) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    async with runtime.db.read() as session:
        deliveries = (await session.execute(select(func.count()).select_from(Delivery))).scalar_one()
        jobs = (await session.execute(select(func.count()).select_from(Job))).scalar_one()
    return deliveries, jobs


async def test_other_methods_get_405(server) -> None:  # type: ignore[no-untyped-def]
    client, _, _ = server
    resp = await client.get("/webhook")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "POST"


async def test_a_burst_is_written_in_batches_with_one_job_per_new_delivery(server) -> None:  # type: ignore[no-untyped-def]
    client, runtime, _ = server
    posts = [delivery(i) for i in range(40)] + [delivery(i) for i in range(0, 40, 4)]  # 10 redeliveries
    answers = await asyncio.gather(*(client.post("/webhook", content=b, headers=h) for b, h in posts))
    assert sorted(a.status_code for a in answers) == [200] * 10 + [202] * 40
    assert await counts(runtime) == (40, 40)


async def test_another_process_holding_the_database_delays_deliveries_but_never_the_loop(server) -> None:  # type: ignore[no-untyped-def]
    client, runtime, _ = server
    other = sqlite3.connect(sqlite_path(runtime.db.url), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # what a worker process's transaction does to us
    try:
        body, headers = delivery("busy", "issues.labeled.1", "issues")
        pending = asyncio.ensure_future(client.post("/webhook", content=body, headers=headers))
        await asyncio.sleep(0.3)
        assert not pending.done()  # not answered: nothing is recorded yet
        health = await asyncio.wait_for(client.get("/healthz"), timeout=2)  # the loop still serves
        assert health.status_code == 200
    finally:
        other.execute("COMMIT")
        other.close()
    answer = await asyncio.wait_for(pending, timeout=10)
    assert answer.status_code == 202
    assert await counts(runtime) == (1, 1)


async def test_a_writer_of_this_process_holding_the_lock_delays_deliveries_until_it_commits(server) -> None:  # type: ignore[no-untyped-def]
    client, runtime, _ = server
    body, headers = delivery("locked")
    async with runtime.db.write() as session:
        await session.execute(text("SELECT 1"))
        pending = asyncio.ensure_future(client.post("/webhook", content=body, headers=headers))
        await asyncio.sleep(0.2)
        assert not pending.done()
    assert (await asyncio.wait_for(pending, timeout=10)).status_code == 202
    # and the next delivery, with the database free again, is written on the loop at once
    body, headers = delivery("after")
    assert (await client.post("/webhook", content=body, headers=headers)).status_code == 202
    assert await counts(runtime) == (2, 2)


async def test_a_failing_write_answers_500_and_keeps_neither_row(server) -> None:  # type: ignore[no-untyped-def]
    client, runtime, _ = server
    async with runtime.db.write() as session:  # a job insert that fails after the delivery's
        await session.execute(
            text("CREATE TRIGGER no_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'I/O error'); END")
        )
    body, headers = delivery("broken", "issues.labeled.1", "issues")
    answer = await client.post("/webhook", content=body, headers=headers)
    assert answer.status_code == 500
    assert "could not be recorded" in answer.json()["message"]
    assert await counts(runtime) == (0, 0)
    async with runtime.db.write() as session:
        await session.execute(text("DROP TRIGGER no_jobs"))
    assert (await client.post("/webhook", content=body, headers=headers)).status_code == 202  # redelivery
    assert await counts(runtime) == (1, 1)


async def test_the_intake_never_checkpoints_in_a_delivery_write_the_checkpointer_does(
    server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    client, runtime, app = server
    body, headers = delivery("first")
    assert (await client.post("/webhook", content=body, headers=headers)).status_code == 202
    intake = app.intake.writer._sqlite
    assert intake.batches.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert rows_in_file_alone(Path(sqlite_path(runtime.db.url)), "deliveries", tmp_path) == 0
    intake.checkpointer.threshold = 20_000  # a few deliveries' bodies
    for i in range(12):
        body, headers = delivery(i, "issues.labeled.1", "issues")
        assert (await client.post("/webhook", content=body, headers=headers)).status_code == 202
    await wait_for(lambda: intake.checkpointer.checkpoints >= 1)
    # the checkpoint copied the log into the database file: the file alone holds the rows
    assert rows_in_file_alone(Path(sqlite_path(runtime.db.url)), "deliveries", tmp_path) >= 1


def rows_in_file_alone(db: Path, table: str, tmp: Path) -> int:
    """Rows of `table` in the database file without its write-ahead log (what was checkpointed)."""
    copy = tmp / f"file-alone-{db.name}"
    copy.write_bytes(db.read_bytes())
    conn = sqlite3.connect(copy)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608 - test
    except sqlite3.OperationalError:  # the table itself is still only in the log
        return 0
    finally:
        conn.close()


def test_checkpointer_runs_only_past_its_threshold_and_stops(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 200)
    checkpointer = Checkpointer(f"sqlite+aiosqlite:///{path}", threshold=100_000)
    checkpointer.written(99_999)
    assert checkpointer._thread is None  # below the threshold: no thread, no checkpoint
    assert rows_in_file_alone(path, "t", tmp_path) == 0
    checkpointer.written(1)
    for _ in range(250):
        if checkpointer.checkpoints:
            break
        time.sleep(0.02)
    assert checkpointer.checkpoints == 1
    assert rows_in_file_alone(path, "t", tmp_path) == 200
    checkpointer.close()
    assert checkpointer._thread is None
    checkpointer.written(10**9)  # after close: nothing starts again
    assert checkpointer._thread is None
    conn.close()


def test_once_writes_stop_the_rest_of_the_log_is_copied_and_the_log_starts_over(tmp_path: Path) -> None:
    """The frames written after the last threshold's checkpoint are copied a moment after the
    writes stop (else the next burst appends to the log and it only grows), and the next write
    starts the log over."""
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_pragmas(conn)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 200)
    checkpointer = Checkpointer(f"sqlite+aiosqlite:///{path}", threshold=100_000)
    checkpointer.written(100_000)
    for _ in range(250):
        if checkpointer.checkpoints:
            break
        time.sleep(0.02)
    assert rows_in_file_alone(path, "t", tmp_path) == 200
    conn.executemany("INSERT INTO t VALUES (?)", [("y" * 1000,)] * 100)
    checkpointer.written(10)  # far below the threshold: the burst's last writes
    for _ in range(250):
        if rows_in_file_alone(path, "t", tmp_path) == 300:
            break
        time.sleep(0.02)
    assert rows_in_file_alone(path, "t", tmp_path) == 300
    conn.execute("INSERT INTO t VALUES ('next')")
    _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert frames < 10  # the log started over instead of growing past its 300 rows' frames
    checkpointer.close()
    conn.close()


def test_under_writes_that_never_stop_the_log_is_started_over_past_restart_bytes(tmp_path: Path) -> None:
    """Writes back to back (each a commit, as a burst's deliveries and jobs): no PASSIVE
    checkpoint ends with every frame copied, so without a RESTART the log never starts over
    (the same writes grew it to 33-50 MB here); with one past `restart_bytes` it stays small."""
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_pragmas(conn)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x TEXT)")
    url = f"sqlite+aiosqlite:///{path}"
    checkpointer = Checkpointer(url, threshold=256 * 1024, restart_bytes=1024 * 1024)
    largest = 0
    for _ in range(3000):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 2000,)] * 4)
        conn.execute("COMMIT")
        checkpointer.written(4 * 2100)
        time.sleep(0)  # the GIL changes hands, as at every await of the server's loop
        largest = max(largest, (tmp_path / "db.sqlite-wal").stat().st_size)
    checkpointer.close()
    conn.close()
    assert checkpointer.restarts >= 1
    assert largest < 10 * 1024 * 1024, f"the log grew to {largest:,} bytes"


@pytest.mark.postgres
async def test_postgres_intake_writes_a_burst_once_per_delivery(tmp_path: Path) -> None:
    async with postgres_database() as url:
        settings = make_settings(tmp_path, GITHUB_API_URL="http://github.test", PLAN_CASCADE_DATABASE_URL=url)
        runtime = build_runtime(settings, services=Services(settings=settings))
        await runtime.db.migrate()
        app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
        try:
            async with asgi_client(app) as client:
                posts = [delivery(i) for i in range(30)] + [delivery(i) for i in range(0, 30, 3)]
                answers = await asyncio.gather(
                    *(client.post("/webhook", content=b, headers=h) for b, h in posts)
                )
            assert sorted(a.status_code for a in answers) == [200] * 10 + [202] * 30
            assert await counts(runtime) == (30, 30)
        finally:
            await runtime.db.dispose()


def test_no_thread_for_checkpoints_never_fails_a_delivery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    checkpointer = Checkpointer(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", threshold=10)

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", refused)
        checkpointer.written(100)  # logged, not raised: the delivery it follows is already recorded
    assert checkpointer._thread is None
    checkpointer.written(100)  # the next threshold tries again
    assert checkpointer._thread is not None
    checkpointer.close()


class StillClock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # a turn of the loop; the time stands still


async def test_deliveries_are_answered_first_while_workers_drain_a_long_queue(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, GITHUB_API_URL="http://github.test")
    runtime = build_runtime(settings, services=Services(settings=settings))
    clock = StillClock()
    runtime.pressure = IntakePressure(clock=clock, sleep=clock.sleep)
    ran: list[int] = []

    @runtime.kinds.register("busy")
    async def busy(job, services) -> None:  # type: ignore[no-untyped-def]
        for _ in range(5):  # a job that takes a few turns of the loop
            await asyncio.sleep(0)
        ran.append(job.id)

    await runtime.db.migrate()
    ids = [await runtime.queue.enqueue(kind="busy", group_key=f"g{n}", payload={}) for n in range(60)]
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    stop = asyncio.Event()
    workers = asyncio.create_task(runtime.worker_pool().run(stop))
    try:
        async with asgi_client(app) as client:
            await wait_for(lambda: len(ran) >= 3)  # the workers are busy with the queue
            before = len(ran)
            for n in range(20):  # one delivery after another, each waiting for its answer
                body, headers = delivery(f"first-{n}")
                assert (await client.post("/webhook", content=body, headers=headers)).status_code == 202
            # Two jobs in hand and one claim let through under pressure, nothing more: the time
            # stood still, so the intake never went quiet and no second turn came.
            assert len(ran) - before <= 3
            clock.now += 1.0  # the burst is over
            await wait_for(lambda: len(ran) == len(ids), timeout=30)

            async def drained() -> bool:
                return await runtime.queue.counts() == {"done": 80}

            await wait_for(drained, timeout=30)
    finally:
        stop.set()
        runtime.wake.set()
        await workers
        app.intake.writer.close()
    assert sorted(ran) == sorted(ids), "every job ran exactly once"
    await runtime.db.dispose()


def test_a_worker_gets_one_turn_per_max_wait_while_the_intake_is_busy() -> None:
    clock = StillClock()
    pressure = IntakePressure(quiet=0.005, max_wait=0.25, clock=clock, sleep=clock.sleep)
    assert pressure.calm()
    pressure.arrived()

    async def turns_within(seconds: float) -> int:
        count, end = 0, clock.now + seconds
        while clock.now < end:
            turn = asyncio.ensure_future(pressure.turn())
            for _ in range(3):
                await asyncio.sleep(0)
            if turn.done():
                count += 1
            else:
                turn.cancel()
                clock.now += 0.05
        return count

    assert asyncio.run(turns_within(1.0)) == 4  # 1 s of a delivery in progress: 4 claims
    pressure.answered()
    pressure.arrived()  # another delivery, answered at once
    pressure.answered()
    assert not pressure.calm(), "quiet only 5 ms after the last arrival"
    clock.now += 0.01
    assert pressure.calm()


def test_after_a_long_step_a_worker_waits_for_the_deliveries_the_loop_has_not_read_yet() -> None:
    """A job's long step keeps the loop from reading new deliveries; right after it the intake
    only looks quiet. The worker lets the loop turn before it believes that."""
    clock = StillClock()
    pressure = IntakePressure(quiet=0.005, max_wait=0.25, clock=clock, sleep=clock.sleep)

    async def scenario() -> bool:
        pressure.arrived()
        await pressure.turn()  # the one claim let through under pressure
        pressure.answered()
        clock.now += 0.01  # a long step: nothing was read meanwhile, the intake looks quiet
        assert pressure.calm()
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, pressure.arrived)  # read at the next turns of the loop
        turn = asyncio.ensure_future(pressure.turn())
        for _ in range(10):
            await asyncio.sleep(0)
        waiting = not turn.done()
        turn.cancel()
        return waiting

    assert asyncio.run(scenario()), "the claim must wait for the delivery that was about to be read"
