"""How fast the operator's status page answers with a busy database.

    .venv/bin/python bench/status.py [--plans 1000] [--jobs 20000] [--loads 30]

Starts the real `plan-cascade serve --no-workers` process (SQLite), seeds its database with
`--plans` cached plans (8 stories each, 25 repositories, last active over the past 10 days),
`--jobs` finished jobs and as many deliveries, a few waiting and dead jobs, and times page loads
over loopback with a bearer token: the first `/status` (it parses every plan's state once per
process), one after 1 % of the plans changed (only those are parsed again), then `--loads`
loads of each status URL. The plans are seeded first and the server restarted, as an operator's
server restarts with its plans: it reads them ahead in the background once it is up, so a page
opened a moment after the start does not parse them. Prints p50, p95 and max next to the
target (200 ms), and `/healthz` as a baseline: a request that reads the database once.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.plan import PRD, Story  # noqa: E402
from bot.plan.state import Approval, PlanStatus, StoryStatus, new_plan, update_story  # noqa: E402
from bot.testing.server_process import running_server  # noqa: E402
from tests.status.seed import plan_values  # noqa: E402
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem  # noqa: E402

TOKEN = "bench-status-token-0123456789"
TARGET_MS = 200.0
STATUSES = [PlanStatus.RUNNING, PlanStatus.AWAITING_APPROVAL, PlanStatus.COMPLETED, PlanStatus.FAILED]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def plan_rows(count: int, now: datetime) -> list[dict[str, object]]:
    """`count` plans of 8 stories (a chain of 4 levels), with realistic text and costs."""
    rows = []
    for n in range(count):
        stories = [
            Story(
                id=f"STORY-{i:03d}",
                title=f"Story {i} of issue {n}: change the module and its tests",
                description="What to change and why, in a paragraph or two. " * 6,
                depends_on=[f"STORY-{i - 2:03d}"] if i > 2 else [],
                acceptance_criteria=[f"criterion {k} of story {i} holds" for k in range(3)],
            )
            for i in range(1, 9)
        ]
        prd = PRD(title=f"Plan for issue {n}", summary="What the plan achieves. " * 8, stories=stories)
        at = now - timedelta(minutes=n * 14)
        state = new_plan(repo=f"org-{n % 25}/repo-{n % 25}", issue=n + 1, prd=prd, at=at - timedelta(hours=1))
        state = state.model_copy(
            update={
                "status": STATUSES[n % len(STATUSES)],
                "approvals": [Approval(user="maintainer", at=at, via="reaction", plan_hash=state.plan_hash)],
                "updated_at": at,
                "planning_cost_usd": 0.05,
            }
        )
        for i, story in enumerate(stories[: n % 9]):
            record = {"status": StoryStatus.PASSED, "attempts": 1, "tokens": 20_000, "cost_usd": 0.3,
                      "agent": "builtin", "model": "claude-sonnet-5-5",
                      "gates": {"tests": "success"}}  # fmt: skip
            state = update_story(state, story.id, check_runs={"tests": i}, **record)
        values = plan_values(state, at=at)
        values["state"] = json.dumps(values["state"])
        values["updated_at"] = _iso(at)
        rows.append(values)
    return rows


def seed(db: Path, *, plans: int, jobs: int, now: datetime) -> None:
    """Plans, finished jobs and their deliveries, a few waiting and dead jobs."""
    with sqlite3.connect(db, timeout=30) as conn:
        rows = plan_rows(plans, now)
        columns = ", ".join(rows[0])
        marks = ", ".join(":" + k for k in rows[0])
        conn.executemany(f"INSERT INTO plans ({columns}) VALUES ({marks})", rows)  # noqa: S608
        conn.executemany(
            "INSERT INTO deliveries (id, event, action, target, outcome, received_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(f"d-{i}", "issue_comment", "created", f"org-{i % 25}/repo-{i % 25}#{i % plans + 1}",
              "accepted", _iso(now - timedelta(seconds=i * 20))) for i in range(jobs)],
        )  # fmt: skip
        statuses = ["done"] * (jobs - 60) + ["queued"] * 50 + ["dead"] * 10
        conn.executemany(
            "INSERT INTO jobs (kind, group_key, payload, body, delivery_id, status, attempts, max_attempts,"
            " run_after, locked_by, lease_until, last_error, created_at, updated_at)"
            " VALUES ('webhook', ?, '{}', NULL, ?, ?, 1, 5, ?, NULL, NULL, ?, ?, ?)",
            [(f"org-{i % 25}/repo-{i % 25}#{i}", f"d-{i}", status, _iso(now),
              "boom" if status == "dead" else None, _iso(now - timedelta(seconds=i * 20)), _iso(now))
             for i, status in enumerate(statuses)],
        )  # fmt: skip


def touch(db: Path, *, count: int, now: datetime) -> int:
    """What the workers do between two refreshes: write `count` plans (a new version each)."""
    with sqlite3.connect(db, timeout=30) as conn:
        conn.execute(
            "UPDATE plans SET version = version + 1, updated_at = ? WHERE rowid IN"
            " (SELECT rowid FROM plans ORDER BY issue_number LIMIT ?)",
            (_iso(now), count),
        )
    return count


def probe(url: str, found: list[float], done: threading.Event) -> None:
    """Time requests to `url` one after the other until `done` (the server's other work)."""
    with httpx.Client(timeout=30) as client:
        while not done.is_set():
            start = time.perf_counter()
            client.get(url)
            found.append((time.perf_counter() - start) * 1000)


def timed(client: httpx.Client, url: str, loads: int) -> list[float]:
    """Milliseconds per load, request sent to body read (one kept-alive connection, like a tab)."""
    found = []
    for _ in range(loads):
        start = time.perf_counter()
        resp = client.get(url)
        found.append((time.perf_counter() - start) * 1000)
        assert resp.status_code == 200, (url, resp.status_code, resp.text[:200])
    return found


def line(name: str, ms: list[float], *, target: float | None) -> str:
    ordered = sorted(ms)
    p95 = ordered[max(0, round(len(ordered) * 0.95) - 1)]
    verdict = "" if target is None else ("  met" if p95 <= target else "  MISSED")
    goal = f"target ≤ {target:.0f} ms" if target else "baseline"
    return (
        f"{name:<42} p50 {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms  max {max(ms):7.1f} ms"
        f"   ({goal}){verdict}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--loads", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = {
            "api_url": "http://127.0.0.1:9/api/v3",
            "webhook_secret": WEBHOOK_SECRET,
            "private_key_pem": rsa_private_key_pem(),
            "extra_env": {"PLAN_CASCADE_STATUS_TOKEN": TOKEN},
            "serve_args": ["--no-workers"],
        }
        db = Path(tmp) / "data" / "plan-cascade.db"
        with running_server(Path(tmp), **server):  # type: ignore[arg-type]  # creates the schema
            start = time.perf_counter()
            seed(db, plans=args.plans, jobs=args.jobs, now=datetime.now(UTC))
            size = db.stat().st_size / 1e6
            took = time.perf_counter() - start
            print(f"seeded {args.plans} plans, {args.jobs} jobs and deliveries: {took:.1f} s, {size:.0f} MB")
        # A restart with those plans in the database: the server reads them ahead once it is up.
        with running_server(Path(tmp), **server) as (url, _proc):  # type: ignore[arg-type]
            client = httpx.Client(headers={"authorization": f"Bearer {TOKEN}"}, timeout=60)
            beside: list[float] = []
            done = threading.Event()
            prober = threading.Thread(target=probe, args=(url + "/healthz", beside, done))
            prober.start()
            cold = timed(client, url + "/status", 1)[0]
            done.set()
            prober.join()
            print(f"{'/status, at once after a restart':<42} {cold:7.1f} ms   (waits for the read-ahead)")
            print(line("/healthz meanwhile (the loop stays free)", beside, target=None))
        with running_server(Path(tmp), **server) as (url, _proc):  # type: ignore[arg-type]
            client = httpx.Client(headers={"authorization": f"Bearer {TOKEN}"}, timeout=60)
            time.sleep(2)  # an operator opens the page a moment after the restart
            first = timed(client, url + "/status", 1)
            print(line("/status, first load 2 s after a restart", first, target=TARGET_MS))
            changed = touch(db, count=max(1, args.plans // 100), now=datetime.now(UTC))
            after = timed(client, url + "/status", 1)
            print(line(f"/status after {changed} plans changed", after, target=TARGET_MS))
            timed(client, url + "/status/plans/org-1/repo-1/2", 1)  # compiles the plan page's template
            print(line("/healthz", timed(client, url + "/healthz", args.loads), target=None))
            pages = ("/status", "/status.json", "/status?repo=org-3/repo-3", "/status/plans/org-1/repo-1/2")
            for path in pages:
                print(line(path, timed(client, url + path, args.loads), target=TARGET_MS))
            client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
