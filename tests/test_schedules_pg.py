"""Two server processes on one PostgreSQL database: a due schedule fires once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.config.load import load_repo_config
from bot.config.schedules import resolve
from bot.db import schedules as table
from bot.db.engine import Database
from bot.db.models import Job
from bot.schedules.runs import RUN_JOB
from tests.support import postgres_database

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.postgres
async def test_two_worker_processes_on_postgres_fire_a_slot_once(tmp_path: Path) -> None:
    config = load_repo_config(
        "schedules:\n  - {name: deps, cron: daily at 06:00, timezone: Europe/Berlin, title: t, task: t}\n"
    )
    async with postgres_database() as url:
        db = Database(url)
        await db.migrate()
        before = datetime(2027, 3, 27, 4, 0, tzinfo=UTC)
        found = [resolve("o/r", s) for s in config.schedules]
        await table.sync(db, repo="o/r", installation_id=1, schedules=found, now=before)
        out = tmp_path / "seen.txt"
        now = datetime(2027, 3, 27, 5, 30, tzinfo=UTC)  # the 05:00 UTC slot is due
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.schedule_worker_script", url, str(out), now.isoformat()],
                cwd=ROOT,
            )
            for _ in range(2)
        ]
        for proc in procs:
            assert await asyncio.to_thread(proc.wait, 120) == 0
        lines = [line.split() for line in out.read_text().splitlines()]
        runs = [parts for parts in lines if parts[0] == "run"]
        looks = {parts[1] for parts in lines if parts[0] == "look"}
        assert len(looks) == 2, "both processes looked for due schedules"
        assert [parts[2:] for parts in runs] == [["deps", "2027-03-27T05:00:00+00:00"]], "fired once"
        async with db.read() as session:
            queued = await session.scalar(select(func.count()).select_from(Job).where(Job.kind == RUN_JOB))
        assert queued == 1
        [row] = await table.rows(db)
        assert table.aware(row.next_at) == datetime(2027, 3, 28, 4, 0, tzinfo=UTC)
        await db.dispose()
