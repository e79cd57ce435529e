"""Retention benchmark: how big the database gets after many handled deliveries, how much pruning
gives back, and what the intake answers while it prunes.

    .venv/bin/python bench/retention.py [--deliveries 100000] [--baseline DIR]

The README's `plan-cascade serve` (workers on, SQLite, the default PLAN_CASCADE_RETENTION_DAYS=14)
gets `--deliveries` handled `issues.labeled` deliveries from `wrk` (concurrency 50, bursts of
10 s until that many were accepted; `bench/ingest.py`'s bodies, ~12 KB each, over 50 issues),
and its queue drains. With `--baseline DIR` (a checkout of other code, e.g. a worktree at `main`)
that checkout's `serve` gets the same, in the same minutes: the size a database reaches without
this change.

Then every row is made 20 days older (the server stopped), and the server started again: its
retention task prunes at start-up. After a 1 s burst (not counted: a server's first jobs load
what it loads once), bursts of 5 s go to it while it prunes, and to a bare FastAPI
endpoint in between; once the prune is over, bursts again (the same server, not pruning). Sizes
are measured with the server stopped, after a checkpoint (`PRAGMA wal_checkpoint(TRUNCATE)`): the
file and the space its free pages take (pruned rows leave
free pages that new rows reuse; the file itself does not shrink); the write-ahead log's file is
read while the server runs, its queue drained.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest

from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_serve import serve
from bot.testing.server_process import running_server
from tests.support import rsa_private_key_pem

AGE_DAYS = 20
MB = 1_000_000


def wal_size(db: Path) -> float:
    """The write-ahead log's file (MB), read while the server runs (a clean stop deletes it)."""
    wal = Path(f"{db}-wal")
    return wal.stat().st_size / MB if wal.exists() else 0.0


def size(db: Path, wal: float) -> dict[str, float]:
    """The file (MB) after a checkpoint, its free pages (MB), and its row counts; `wal` as read."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
        jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        deliveries = conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0]
    finally:
        conn.close()
    return {
        "wal": wal,
        "file": db.stat().st_size / MB,
        "free": free / MB,
        "jobs": jobs,
        "deliveries": deliveries,
    }


def shown(found: dict[str, float], handled: int | None = None) -> str:
    used = found["file"] - found["free"]
    each = f" = {used * MB / handled / 1000:.1f} KB in use a delivery" if handled else ""
    return (
        f"file {found['file']:.1f} MB, in use {used:.1f} MB{each} (free pages {found['free']:.1f} MB); "
        f"{found['jobs']:,} jobs, {found['deliveries']:,} delivery records; "
        f"the write-ahead log {found['wal']:.1f} MB while the server ran, its queue drained"
    )


def age(db: Path, days: int) -> None:
    """Every row `days` older; the retention lease forgotten (as if no prune had run since)."""
    shift = f"-{days} days"
    conn = sqlite3.connect(db, timeout=30)
    try:
        with conn:
            later = "strftime('%Y-%m-%d %H:%M:%f000', {0}, ?)"
            columns = ", ".join(f"{c} = {later.format(c)}" for c in ("run_after", "updated_at", "created_at"))
            conn.execute(f"UPDATE jobs SET {columns}", (shift,) * 3)  # noqa: S608 - fixed column names
            conn.execute(
                "UPDATE deliveries SET received_at = strftime('%Y-%m-%d %H:%M:%f000', received_at, ?)",
                (shift,),
            )
            conn.execute("DELETE FROM leases WHERE name = 'retention'")
    finally:
        conn.close()


def old_rows(db: Path, days: int) -> int:
    since = f"-{int(days) - 1} days"
    conn = sqlite3.connect(db, timeout=30)
    try:
        found = conn.execute(
            "SELECT COUNT(*) FROM deliveries WHERE received_at < datetime('now', ?)", (since,)
        )
        return int(found.fetchone()[0])
    finally:
        conn.close()


def fill(url: str, db: Path, count: int, tmp: Path, bodies: Path) -> int:
    """Bursts (10 s, shorter near the end) until `count` deliveries were recorded, each drained
    before the next; how many were recorded."""
    rate, recorded = 2000.0, 0
    while (recorded := ingest.query(db, "SELECT COUNT(*) FROM deliveries")) < count:
        seconds = min(10, max(1, math.ceil((count - recorded) / rate)))
        rate = ingest.wrk_burst(url, seconds, 50, tmp, bodies)[2]
        ingest.drain(db)
    return recorded


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deliveries", type=int, default=100_000)
    parser.add_argument("--baseline", type=Path, help="a checkout whose serve gets the same deliveries")
    parser.add_argument("--rounds", type=int, default=3, help="bursts during the prune, and after it")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("this bench needs wrk (Debian/Ubuntu: apt-get install wrk)")
    tmp = Path(tempfile.mkdtemp(prefix="pc-retention-"))
    repo = "bench-org/app"
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo(repo)
    bodies = ingest.write_bodies(tmp, repo)
    env = {"PLAN_CASCADE_LOG_LEVEL": "WARNING", "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "60"}
    common = {"webhook_secret": ingest.SECRET, "private_key_pem": rsa_private_key_pem(), "extra_env": env}
    names = ["serve"] + (["baseline"] if args.baseline else [])
    dbs = {name: tmp / name / "data" / "plan-cascade.db" for name in names}
    for name in names:
        (tmp / name).mkdir()
    bare_url, bare = ingest.start_bare(tmp)
    sizes: dict[str, dict[str, float]] = {}
    handled: dict[str, int] = {}
    wal: dict[str, float] = {}
    during: list[ingest.Burst] = []
    after: list[ingest.Burst] = []
    bare_runs: list[ingest.Burst] = []
    try:
        with serve(fake) as api:
            for name in names:
                root = {"root": args.baseline.resolve()} if name == "baseline" else {}
                with running_server(tmp / name, api_url=api, **common, **root) as (url, _):  # type: ignore[arg-type]
                    started = time.perf_counter()
                    handled[name] = fill(url, dbs[name], args.deliveries, tmp, bodies)
                    time.sleep(3)  # the checkpointer's moment after writes stop
                    wal[name] = wal_size(dbs[name])
                    took = time.perf_counter() - started
                    print(f"{name}: {handled[name]:,} deliveries handled in {took:.0f} s", flush=True)
                sizes[name] = size(dbs[name], wal[name])
            age(dbs["serve"], AGE_DAYS)
            with running_server(tmp / "serve", api_url=api, **common) as (url, _):  # type: ignore[arg-type]
                started = time.perf_counter()
                ingest.wrk_burst(
                    url, 1, 50, tmp, bodies
                )  # not counted: its first jobs load what it loads once
                while old_rows(dbs["serve"], AGE_DAYS) and len(during) < args.rounds:
                    during.append(ingest.wrk_burst(url, 5, 50, tmp, bodies))
                    bare_runs.append(ingest.wrk_burst(bare_url, 5, 50, tmp, bodies))
                left_after_bursts = old_rows(dbs["serve"], AGE_DAYS)
                while old_rows(dbs["serve"], AGE_DAYS):
                    time.sleep(0.2)
                pruned_in = time.perf_counter() - started
                ingest.drain(dbs["serve"])
                for _ in range(len(during)):
                    after.append(ingest.wrk_burst(url, 5, 50, tmp, bodies))
                    bare_runs.append(ingest.wrk_burst(bare_url, 5, 50, tmp, bodies))
                ingest.drain(dbs["serve"])
                time.sleep(3)
                wal["pruned"] = wal_size(dbs["serve"])
            sizes["pruned"] = size(dbs["serve"], wal["pruned"])
    finally:
        bare.terminate()
        bare.wait(timeout=30)

    print(f"\nafter about {args.deliveries:,} handled deliveries (~12 KB each), SQLite, checkpointed:")
    for name in names:
        print(f"  {name:>9}: {shown(sizes[name], handled[name])}")
    print(
        f"  after the prune ({AGE_DAYS} days later, PLAN_CASCADE_RETENTION_DAYS=14): {shown(sizes['pruned'])}"
    )
    print(
        f"the prune took {pruned_in:.0f} s from the server's start "
        f"({left_after_bursts:,} old delivery records were left when the bursts during it ended)"
    )

    def med(runs: list[ingest.Burst]) -> str:
        rate = statistics.median(r[2] for r in runs)
        p99 = statistics.median(r[1] for r in runs)
        p50 = statistics.median(r[0] for r in runs)
        return f"{rate:,.0f}/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms"

    base = statistics.median(r[2] for r in bare_runs)
    print(f"intake during the prune ({len(during)} × 5 s): {med(during)}")
    print(f"intake after it, same server ({len(after)} × 5 s): {med(after)}")
    print(f"bare endpoint, in between: {med(bare_runs)}")
    if during and after:
        rate = statistics.median(r[2] for r in during)
        ratio = rate / statistics.median(r[2] for r in after)
        print(f"during / after: {ratio:.0%} of the rate; during / bare: {rate / base:.0%}")


if __name__ == "__main__":
    main()
