"""Where schedules are seen: the status page and its JSON, `plan-cascade schedules`, `/metrics`."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from bot.config.load import load_repo_config
from bot.config.schedules import resolve
from bot.db import schedules as table
from bot.db.engine import Database
from tests.harness import Harness
from tests.test_schedules import Clock, config, entry, start, tick, utc

TOKEN = "s3cret-status-token-0123456789"


async def test_the_status_page_and_metrics_show_each_schedule_its_last_run_and_next(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path, PLAN_CASCADE_STATUS_TOKEN=TOKEN) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC"), entry(name="off", enabled=False)))
        [number] = await tick(h, clock, utc("2027-01-04 06:00"))
        assert await tick(h, clock, utc("2027-01-05 06:00")) == []  # skipped: the issue still waits
        bearer = {"authorization": f"Bearer {TOKEN}"}
        page = await h.client.get("/status", headers=bearer)
        assert page.status_code == 200
        row = page.text[page.text.index('data-schedule="octo-org/hello-world/deps"') :]
        row = row[: row.index("</tr>")]
        assert "<code>0 6 * * *</code> UTC" in row and f">#{number}</a>" in row and "skipped" in row
        assert "2027-01-06 06:00 UTC" in row and "1 / 1" in row
        assert f'href="http://github.test/octo-org/hello-world/issues/{number}"' in row
        off = page.text[page.text.index('data-schedule="octo-org/hello-world/off"') :]
        assert "disabled" in off[: off.index("</tr>")]
        data = (await h.client.get("/status.json", headers=bearer)).json()
        deps = next(s for s in data["schedules"] if s["name"] == "deps")
        assert deps["last_issue"] == number and deps["next_at"].startswith("2027-01-06T06:00")
        assert (deps["runs"], deps["skips"], deps["last_outcome"]) == (1, 1, "skipped")
        metrics = (await h.client.get("/metrics")).text
        assert 'plan_cascade_schedule_runs_total{outcome="opened"} 1.0' in metrics
        assert 'plan_cascade_schedule_runs_total{outcome="skipped"} 1.0' in metrics


def test_the_cli_prints_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    env = tmp_path / "server.env"
    env.write_text(f"PLAN_CASCADE_DATA_DIR={data}\nGITHUB_API_URL=https://api.github.com\n")
    assert main(["--env-file", str(env), "schedules"]) == 0
    assert "No schedules" in capsys.readouterr().out

    async def seed() -> None:
        db = Database(f"sqlite+aiosqlite:///{data}/plan-cascade.db")
        await db.migrate()
        parsed = load_repo_config(config(entry(when="0 6 * * *", zone="Europe/Berlin"))).schedules
        now = datetime(2027, 1, 4, 12, tzinfo=UTC)
        await table.sync(
            db, repo="octo-org/shop", installation_id=1, schedules=[resolve("o", s) for s in parsed], now=now
        )
        slot = datetime(2027, 1, 4, 5, tzinfo=UTC)
        await table.record(
            db, repo="octo-org/shop", name="deps", slot=slot, outcome="opened", issue=7, now=now
        )
        await db.dispose()

    asyncio.run(seed())
    assert main(["--env-file", str(env), "schedules"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["SCHEDULE", "WHEN", "LAST", "RUN", "NEXT", "RUN", "RUNS/SKIPS"]
    assert out[1].split() == [
        "octo-org/shop", "deps", "0", "6", "*", "*", "*", "(Europe/Berlin)",
        "2027-01-04", "05:00", "UTC", "opened", "#7", "2027-01-05", "05:00", "UTC", "1/0",
    ]  # fmt: skip
    assert main(["--env-file", str(env), "schedules", "--json"]) == 0
    [line] = json.loads(capsys.readouterr().out)
    assert line["last_issue_url"] == "https://github.com/octo-org/shop/issues/7"


def test_the_cli_shows_what_a_config_file_s_schedules_become(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plan-cascade.yml"
    path.write_text(config(entry(when="weekly on monday at 06:00"), entry(name="spread", when="daily")))
    assert main(["schedules", "--config", str(path), "--repo", "octo-org/shop"]) == 0
    deps, spread = capsys.readouterr().out.splitlines()
    assert deps.startswith("deps: 0 6 * * 1 (Europe/Berlin); next ")
    minute, hour, *rest = spread.removeprefix("spread: ").split()
    assert rest[:3] == ["*", "*", "*"] and 0 <= int(minute) < 60 and 0 <= int(hour) < 24
    assert main(["schedules", "--config", str(path)]) == 2
    assert "--config needs --repo OWNER/NAME" in capsys.readouterr().err
