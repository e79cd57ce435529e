"""The database stays small: a done job drops its body, old done jobs and delivery records are
pruned in batches (SQLite and PostgreSQL), and what dedupe, redelivery recovery and the status
page need is kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
import pytest
from sqlalchemy import insert, select, text, update

from bot.app.redelivery import look
from bot.app.retention import prune_once, retention_loop
from bot.db.engine import Database
from bot.db.intake import DeliveryRecord, DeliveryWriter
from bot.db.models import Delivery, Job, JobBody
from bot.db.queue import JobQueue, job_row
from bot.db.retention import MIN_DELIVERY_AGE, last_prune, prune
from bot.errors import ConfigurationError, NotInstalled
from bot.metrics import Metrics
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.settings import load_settings
from bot.runtime.worker import WorkerPool
from bot.status.reads import read_intake, read_storage, requeue
from tests.harness import REPO, Harness, labeled
from tests.support import WEBHOOK_SECRET, make_settings, postgres_database

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
BODY = orjson.dumps({"action": "labeled", "issue": {"number": 1}, "filler": "x" * 10_000}).decode()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "sqlite":
        database = Database(f"sqlite+aiosqlite:///{tmp_path / 'r.db'}")
        await database.migrate()
        yield database
        await database.dispose()
        return
    async with postgres_database() as url:
        database = Database(url)
        await database.migrate()
        try:
            yield database
        finally:
            await database.dispose()


async def _add(db: Database, *, guid: str, at: datetime, status: str | None = "done") -> None:
    """A delivery received at `at` and (unless `status` is None: an ignored event) its job, last
    changed then too."""
    async with db.write() as session:
        outcome = "ignored" if status is None else "accepted"
        await session.execute(
            insert(Delivery).values(
                id=guid, event="issues", action="labeled", target=f"{REPO}#1", outcome=outcome, received_at=at
            )
        )
        if status is not None:
            row = job_row(kind="webhook", group_key=guid, payload={}, delivery_id=guid, now=at)
            made = await session.execute(insert(Job).values(**{**row, "status": status}).returning(Job.id))
            if status != "done":
                await session.execute(insert(JobBody).values(job_id=made.scalar_one(), body=BODY))


async def _guids(db: Database) -> set[str]:
    async with db.read() as session:
        return set((await session.execute(select(Delivery.id))).scalars())


async def _body(db: Database, job_id: int) -> str | None:
    async with db.read() as session:
        return (await session.execute(select(JobBody.body).where(JobBody.job_id == job_id))).scalar()


async def _jobs(db: Database) -> dict[str, str]:
    async with db.read() as session:
        return dict((await session.execute(select(Job.delivery_id, Job.status))).all())  # type: ignore[arg-type]


# -- a done job's body ------------------------------------------------------------------------


async def test_a_done_job_drops_its_body_a_failing_or_dead_one_keeps_it_and_a_requeue_runs_it(
    db: Database,
) -> None:
    """The body is the delivery's payload: the next attempt needs it, and so does a dead job the
    operator requeues from the status page."""
    queue = JobQueue(db, lease_seconds=60)
    writer = DeliveryWriter(db)
    for guid in ("ok", "flaky"):
        job = job_row(kind="webhook", group_key=guid, payload={"event": "issues", "delivery_id": guid})
        record = DeliveryRecord(
            guid, "issues", "labeled", None, "accepted", datetime.now(UTC), job | {"delivery_id": guid}, BODY
        )
        assert await writer.submit(record)
    writer.close()
    router, seen, broken = Router(), [], {"flaky"}

    @router.register("issues", "labeled")
    async def _handle(event: Event, services: Services) -> None:
        if event.delivery_id in broken:
            raise RuntimeError("GitHub is down")
        seen.append((event.delivery_id, event.payload["filler"] == "x" * 10_000))

    pool = WorkerPool(queue=queue, router=router, services=Services(settings=make_settings(Path("."))))

    async def run_next() -> tuple[int, str]:
        claimed = await queue.claim("w1")
        assert claimed is not None and claimed.body == BODY
        return claimed.id, await pool.run_job(claimed, "w1")

    async def body(job_id: int) -> str | None:
        return await _body(db, job_id)

    done_id, outcome = await run_next()
    assert outcome == "done" and await body(done_id) is None
    flaky_id, outcome = await run_next()
    assert outcome == "queued" and await body(flaky_id) == BODY  # the retry needs it
    async with db.write() as session:  # its last attempt: straight to dead
        await session.execute(
            update(Job).where(Job.id == flaky_id).values(max_attempts=2, run_after=NOW - DAY)
        )
    assert (await run_next())[1] == "dead" and await body(flaky_id) == BODY

    broken.clear()
    assert await requeue(db, flaky_id, now=datetime.now(UTC))
    assert await run_next() == (flaky_id, "done")
    assert await body(flaky_id) is None
    assert seen == [("ok", True), ("flaky", True)]


async def test_a_job_that_cannot_succeed_is_done_and_drops_its_body_too(db: Database) -> None:
    queue = JobQueue(db)
    async with db.write() as session:
        row = job_row(kind="webhook", group_key="g", payload={"event": "issues", "delivery_id": "x"})
        made = await session.execute(insert(Job).values(**row).returning(Job.id))
        await session.execute(insert(JobBody).values(job_id=made.scalar_one(), body=BODY))
    router = Router()

    @router.register("issues")
    async def _refuse(event: Event, services: Services) -> None:
        raise NotInstalled("the delivery came through no installation")

    pool = WorkerPool(queue=queue, router=router, services=Services(settings=make_settings(Path("."))))
    claimed = await queue.claim("w1")
    assert claimed is not None and await pool.run_job(claimed, "w1") == "done"
    assert claimed.body == BODY and await _body(db, claimed.id) is None


# -- pruning ----------------------------------------------------------------------------------


async def test_old_done_jobs_and_delivery_records_go_in_batches_and_the_rest_stays(db: Database) -> None:
    for n in range(7):
        await _add(db, guid=f"old-{n}", at=NOW - 20 * DAY + n * timedelta(minutes=1))
    await _add(db, guid="old-ignored", at=NOW - 20 * DAY, status=None)
    await _add(db, guid="old-dead", at=NOW - 20 * DAY, status="dead")
    await _add(db, guid="old-queued", at=NOW - 20 * DAY, status="queued")
    await _add(db, guid="recent", at=NOW - 13 * DAY)
    await _add(db, guid="recent-ignored", at=NOW - DAY, status=None)
    pauses: list[int] = []

    async def pause() -> bool:
        pauses.append(1)
        return True

    done = await prune(db, keep=14 * DAY, now=NOW, batch=3, pause=pause)

    assert (done.jobs, done.deliveries) == (7, 8)
    # 7 jobs: 3 + 3 + 1; 8 deliveries: 3 + 3 + 2; a pause between two full batches.
    assert done.batches == 6 and len(pauses) == 4
    jobs = await _jobs(db)
    assert jobs == {"old-dead": "dead", "old-queued": "queued", "recent": "done"}
    # A dead job keeps its body, and its delivery record stays: the status page lists it as failed.
    assert await _guids(db) == {"old-dead", "old-queued", "recent", "recent-ignored"}
    failed = await read_intake(db)
    assert [(d.id, j.status) for d, j in failed.failed] == [("old-dead", "dead")]
    async with db.read() as session:
        dead = (await session.execute(select(Job.id).where(Job.delivery_id == "old-dead"))).scalar_one()
    assert await _body(db, dead) == BODY


async def test_a_prune_stops_between_batches_when_asked(db: Database) -> None:
    for n in range(5):
        await _add(db, guid=f"old-{n}", at=NOW - 20 * DAY)

    async def stop() -> bool:
        return False

    done = await prune(db, keep=14 * DAY, now=NOW, batch=2, pause=stop)
    assert (done.jobs, done.deliveries, done.batches) == (2, 0, 1)
    assert len(await _jobs(db)) == 3


async def test_delivery_records_stay_three_days_whatever_the_jobs_keep(db: Database) -> None:
    """GitHub can redeliver for 3 days: a record younger than that (and an hour for clocks) stays
    even when a shorter keep removes its done job."""
    await _add(db, guid="two-days", at=NOW - 2 * DAY)
    await _add(db, guid="edge", at=NOW - MIN_DELIVERY_AGE + timedelta(minutes=1))
    await _add(db, guid="four-days", at=NOW - 4 * DAY)
    done = await prune(db, keep=DAY, now=NOW)
    assert (done.jobs, done.deliveries) == (3, 1)
    assert await _guids(db) == {"two-days", "edge"}


async def test_after_a_prune_a_recent_delivery_is_still_a_duplicate(db: Database) -> None:
    await _add(db, guid="recent", at=NOW - 2 * DAY)
    await _add(db, guid="ancient", at=NOW - 30 * DAY)
    await prune(db, keep=DAY, now=NOW)
    writer = DeliveryWriter(db)
    try:

        def record(guid: str) -> DeliveryRecord:
            return DeliveryRecord(guid, "issues", "labeled", None, "ignored", NOW, None)

        assert await writer.submit(record("recent")) is False  # seen before: not processed again
        assert await writer.submit(record("fresh")) is True
        assert await writer.submit(record("fresh")) is False
    finally:
        writer.close()


async def test_one_process_prunes_at_a_time_and_records_when(db: Database) -> None:
    await _add(db, guid="old", at=NOW - 20 * DAY)
    metrics = Metrics()
    first = await prune_once(db, days=14, holder="a", now=NOW, metrics=metrics)
    assert first is not None and (first.jobs, first.deliveries) == (1, 1)
    assert await prune_once(db, days=14, holder="b", now=NOW + timedelta(minutes=5)) is None
    assert await last_prune(db) == NOW
    assert metrics.registry.get_sample_value("plan_cascade_pruned_rows_total", {"table": "deliveries"}) == 1


async def test_the_status_page_reads_the_database_size(db: Database) -> None:
    storage = await read_storage(db, retention_days=14)
    assert storage.size_bytes > 0 and storage.retention_days == 14 and storage.last_prune is None
    assert storage.engine == ("SQLite" if db.is_sqlite else "PostgreSQL")
    assert (storage.free_bytes is not None) == db.is_sqlite


async def test_pruning_frees_space_that_new_rows_reuse(tmp_path: Path) -> None:
    """SQLite: the pages old rows held go back to the file's free list and new rows fill them, so
    the file stops growing."""
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'grow.db'}")
    await database.migrate()
    try:
        for n in range(1000):
            await _add(database, guid=f"old-{n}", at=NOW - 20 * DAY)
        before = await read_storage(database, retention_days=14)
        await prune(database, keep=14 * DAY, now=NOW)
        after = await read_storage(database, retention_days=14)
        assert after.size_bytes == before.size_bytes and after.free_bytes is not None
        assert after.free_bytes > (before.size_bytes - (before.free_bytes or 0)) / 2, (before, after)
        for n in range(1000):
            await _add(database, guid=f"new-{n}", at=NOW)
        again = await read_storage(database, retention_days=14)
        assert again.size_bytes < before.size_bytes * 1.1, (before, again)
    finally:
        await database.dispose()


# -- the setting and the loop -----------------------------------------------------------------


def test_the_setting_refuses_less_than_githubs_three_days() -> None:
    assert load_settings(env_file=None).retention_days == 14
    assert load_settings(env_file=None, PLAN_CASCADE_RETENTION_DAYS="0").retention_days == 0
    assert load_settings(env_file=None, PLAN_CASCADE_RETENTION_DAYS="3").retention_days == 3
    for short in ("1", "2"):
        with pytest.raises(ConfigurationError, match=r"RETENTION_DAYS=\d is shorter than the 3 days"):
            load_settings(env_file=None, PLAN_CASCADE_RETENTION_DAYS=short)


async def test_the_loop_prunes_at_start_up_and_not_at_all_with_zero(tmp_path: Path) -> None:
    for days, left in (("0", 1), ("14", 0)):
        settings = make_settings(tmp_path / days, PLAN_CASCADE_RETENTION_DAYS=days)
        database = Database(settings.resolved_database_url)
        await database.migrate()
        try:
            await _add(database, guid="old", at=datetime.now(UTC) - 20 * DAY)
            stop = asyncio.Event()
            loop = asyncio.create_task(retention_loop(Services(settings=settings, db=database), stop))
            for _ in range(500):
                if loop.done() or len(await _guids(database)) == left:
                    break
                await asyncio.sleep(0.01)
            stop.set()
            await asyncio.wait_for(loop, 5)
            assert len(await _guids(database)) == left, days
        finally:
            await database.dispose()


# -- redelivery recovery ----------------------------------------------------------------------


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path) as harness:
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.hooks.secret = WEBHOOK_SECRET
        yield harness


async def test_redelivery_never_asks_again_for_a_handled_delivery_whose_job_was_pruned(h: Harness) -> None:
    """GitHub timed out on a delivery the server recorded and handled. Two days later its done
    job is pruned (even with a keep shorter than GitHub's 3 days), and the record stays: the look
    for missed deliveries does not ask for it, and were it sent again it would be a duplicate."""
    h.fake.hooks.target = httpx.ASGITransport(app=h.app)
    slow = await h.fake.hooks.deliver("issues", labeled(number=1, label="bug", sender="maint"))
    slow.status, slow.status_code = "timed out", 0
    await h.drain()
    now = datetime.now(UTC)
    two_days_ago = now - 2 * DAY
    slow.delivered_at = two_days_ago
    db = h.runtime.db
    async with db.write() as session:
        await session.execute(update(Delivery).values(received_at=two_days_ago))
        await session.execute(update(Job).values(run_after=two_days_ago, updated_at=two_days_ago))
    assert set((await _jobs(db)).values()) == {"done"}

    done = await prune(db, keep=DAY, now=now)
    assert done.jobs >= 1 and done.deliveries == 0 and await _jobs(db) == {}
    asked = await look(db, h.services.extras["app_port"](), holder="me", now=now, ttl=timedelta(minutes=10))
    assert asked is not None and asked.asked == []
    assert not h.fake.requests_to("POST", r"/app/hook/deliveries/\d+/attempts")


async def test_the_upgrade_moves_waiting_bodies_beside_their_jobs_and_drops_done_ones(tmp_path: Path) -> None:
    from alembic import command

    from bot.db.engine import alembic_config

    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        async with database.engine.begin() as conn:
            await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "0006"))  # type: ignore[arg-type]
            for n, status in enumerate(("done", "queued", "dead")):
                row = job_row(kind="webhook", group_key=status, payload={}, delivery_id=status, now=NOW)
                await conn.execute(insert(Job).values(**{**row, "id": n + 1, "status": status}))
            await conn.execute(text("UPDATE jobs SET body = :body"), {"body": BODY})  # where 0002 put it
        await database.migrate()
        async with database.read() as session:
            moved = dict((await session.execute(select(JobBody.job_id, JobBody.body))).all())
            left = (await session.execute(text("SELECT COUNT(*) FROM jobs WHERE body IS NOT NULL"))).scalar()
        assert moved == {2: BODY, 3: BODY} and left == 0
        claimed = await JobQueue(database).claim("w1")
        assert claimed is not None and claimed.id == 2 and claimed.body == BODY
    finally:
        await database.dispose()
