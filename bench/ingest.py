"""Webhook intake benchmark: a burst of signed deliveries at the real server on loopback.

    .venv/bin/python bench/ingest.py [--seconds 5] [--rounds 3] [--concurrency 50] [--n 2000]

The load comes from `wrk` (Debian package `wrk`) when it is installed, else from an httpx
client in this process (which then limits what can be measured). Starts
`plan-cascade serve --no-workers` (SQLite in a temporary data dir) and, for comparison, a
bare FastAPI endpoint that only reads the body, both under uvicorn in their own processes.
Prints p50/p99 answer latency and throughput for both, then "lost" and "duplicated"
computed from the database (every delivery id must have exactly one delivery row and one
job). One delivery in 20 is sent twice, as a GitHub redelivery would be.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.testing.deliveries import encode, load_fixture, signed_headers  # noqa: E402
from bot.testing.server_process import free_port, running_server  # noqa: E402
from tests.support import rsa_private_key_pem  # noqa: E402

SECRET = "bench-webhook-secret"
BARE_APP = """
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
app = FastAPI()
@app.post("/webhook")
async def hook(request: Request):
    await request.body()
    return JSONResponse({"message": "accepted"}, status_code=202)
@app.get("/healthz")
async def health():
    return {"status": "ok"}
"""


async def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}")
            try:
                if (await client.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("server did not start")


async def burst(
    url: str, bodies: list[tuple[bytes, dict[str, str]]], concurrency: int
) -> tuple[list[float], float]:
    latencies: list[float] = []
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def one(body: bytes, headers: dict[str, str]) -> None:
            async with sem:
                start = time.perf_counter()
                resp = await client.post(url + "/webhook", content=body, headers=headers)
                latencies.append((time.perf_counter() - start) * 1000)
                if resp.status_code not in (200, 202):
                    raise SystemExit(f"unexpected answer {resp.status_code}: {resp.text}")

        start = time.perf_counter()
        await asyncio.gather(*(one(b, h) for b, h in bodies))
        elapsed = time.perf_counter() - start
    return latencies, len(bodies) / elapsed


WRK_SCRIPT = r"""
local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end
function init(args)
  counter, accepted, repeated, other = 0, 0, 0, 0
  wrk.method, wrk.body = "POST", os.getenv("BENCH_BODY")
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-GitHub-Event"] = "issues"
  wrk.headers["X-Hub-Signature-256"] = os.getenv("BENCH_SIGNATURE")
end
function request()
  counter = counter + 1
  local n = counter
  if n % 21 == 0 then n = n - 1 end  -- one in 21 is a redelivery of the one before
  wrk.headers["X-GitHub-Delivery"] = string.format("bench-%s-%d-%d", os.getenv("BENCH_ROUND"), tid, n)
  return wrk.format()
end
function response(status, headers, body)
  if status == 202 then accepted = accepted + 1
  elseif status == 200 then repeated = repeated + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local a, r, o = 0, 0, 0
  for _, t in ipairs(threads) do
    a, r, o = a + t:get("accepted"), r + t:get("repeated"), o + t:get("other")
  end
  io.write(string.format("RESULT %d %.3f %.3f %.3f %d %d %d\n", summary.requests,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.duration / 1e6, a, r, o))
end
"""


_rounds = iter(range(1, 1_000_000))


def wrk_burst(url: str, seconds: int, concurrency: int, tmp: Path) -> tuple[float, float, float, int, int]:
    """(p50 ms, p99 ms, requests/s, answered 202, answered 200) of a burst of `seconds`."""
    script = tmp / "burst.lua"
    script.write_text(WRK_SCRIPT)
    body = encode(load_fixture("issues.labeled.1"))
    env = {
        **os.environ,
        "BENCH_BODY": body.decode(),
        "BENCH_SIGNATURE": signed_headers(body, secret=SECRET, event="issues")["X-Hub-Signature-256"],
        "BENCH_ROUND": str(next(_rounds)),  # new delivery ids in every burst
    }
    out = subprocess.run(
        ["wrk", "-t2", f"-c{concurrency}", f"-d{seconds}s", "-s", str(script), url + "/webhook"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT"))
    _, count, p50, p99, secs, accepted, repeated, other = line.split()
    if int(other):
        raise SystemExit(f"{other} requests got an unexpected status")
    return float(p50), float(p99), int(count) / float(secs), int(accepted), int(repeated)


def count_wrk(db_path: Path, accepted: int) -> tuple[int, int, int]:
    """lost = answered 202 but not in the database; duplicated = a delivery with two jobs;
    unobserved = recorded, but answered after wrk stopped listening (in flight at the end)."""
    conn = sqlite3.connect(db_path)
    try:
        rows = conn.execute("SELECT COUNT(*) FROM deliveries WHERE id LIKE 'bench-%'").fetchone()[0]
        jobs = conn.execute("SELECT COUNT(*) FROM jobs WHERE delivery_id LIKE 'bench-%'").fetchone()[0]
        dup = conn.execute(
            "SELECT COALESCE(SUM(c - 1), 0) FROM (SELECT COUNT(*) c FROM jobs "
            "WHERE delivery_id LIKE 'bench-%' GROUP BY delivery_id)"
        ).fetchone()[0]
    finally:
        conn.close()
    return max(accepted - rows, 0) + max(rows - jobs, 0), dup, max(rows - accepted, 0)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def make_bodies(n: int) -> list[tuple[bytes, dict[str, str]]]:
    payload = load_fixture("issues.labeled.1")
    body = encode(payload)
    items = []
    for i in range(n):
        headers = signed_headers(body, secret=SECRET, event="issues", delivery_id=f"bench-{i}")
        items.append((body, headers))
        if i % 20 == 0:
            items.append((body, dict(headers)))  # a redelivery: same id
    return items


def count_sqlite(db_path: Path, n: int) -> tuple[int, int]:
    conn = sqlite3.connect(db_path)
    try:
        ids = {row[0] for row in conn.execute("SELECT id FROM deliveries WHERE id LIKE 'bench-%'")}
        jobs = conn.execute(
            "SELECT delivery_id, COUNT(*) FROM jobs WHERE delivery_id LIKE 'bench-%' GROUP BY delivery_id"
        ).fetchall()
    finally:
        conn.close()
    lost = sum(1 for i in range(n) if f"bench-{i}" not in ids)
    duplicated = sum(count - 1 for _, count in jobs if count > 1)
    return lost, duplicated


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=5, help="length of each wrk burst")
    parser.add_argument("--rounds", type=int, default=3, help="bursts at each endpoint, alternating")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pc-bench-"))

    bodies = make_bodies(args.n)
    results = {}
    server = running_server(
        tmp,
        api_url="https://api.github.com",
        webhook_secret=SECRET,
        private_key_pem=rsa_private_key_pem(),
        extra_env={"PLAN_CASCADE_LOG_LEVEL": "WARNING", "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "60"},
        serve_args=["--no-workers"],
    )
    bare_port = free_port()
    (tmp / "bare_app.py").write_text(BARE_APP)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp)}
    bare = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bare_app:app",
            "--port",
            str(bare_port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=tmp,
        env=env,
    )
    use_wrk = shutil.which("wrk") is not None
    try:
        with server as (url, _proc):
            await wait_ready(f"http://127.0.0.1:{bare_port}", bare)
            if use_wrk:
                bare_runs, our_runs = [], []
                for _ in range(args.rounds):  # alternating, so both see the same machine
                    bare_runs.append(
                        wrk_burst(f"http://127.0.0.1:{bare_port}", args.seconds, args.concurrency, tmp)
                    )
                    our_runs.append(wrk_burst(url, args.seconds, args.concurrency, tmp))
            else:
                await burst(f"http://127.0.0.1:{bare_port}", bodies[:100], args.concurrency)  # warm-up
                results["bare FastAPI"] = await burst(
                    f"http://127.0.0.1:{bare_port}", bodies, args.concurrency
                )
                results["plan-cascade"] = await burst(url, bodies, args.concurrency)
    finally:
        bare.terminate()
        bare.wait(timeout=30)
    if use_wrk:
        accepted, repeated = sum(r[3] for r in our_runs), sum(r[4] for r in our_runs)
        print(
            f"{args.rounds} × {args.seconds} s of deliveries from wrk at each endpoint, alternating "
            f"(1 in 21 a redelivery), concurrency {args.concurrency}, SQLite; medians of the rounds"
        )
        bare_m = [statistics.median(r[i] for r in bare_runs) for i in range(3)]
        ours_m = [statistics.median(r[i] for r in our_runs) for i in range(3)]
        print(f"{'':>14}  {'p50':>8}  {'p99':>8}  {'deliveries/s':>12}")
        for name, (p50, p99, rps) in (("bare FastAPI", bare_m), ("plan-cascade", ours_m)):
            print(f"{name:>14}  {p50:6.1f} ms  {p99:6.1f} ms  {rps:12.0f}")
        ratio = ours_m[2] / bare_m[2]
        print(f"throughput vs bare: {ratio:.0%} (target ≥ 50%: {'met' if ratio >= 0.5 else 'missed'})")
        tail = ours_m[1] / bare_m[1]
        print(f"p99 vs bare: {tail:.1f}× (target ≤ 2×: {'met' if tail <= 2 else 'missed'})")
        lost, duplicated, in_flight = count_wrk(tmp / "data" / "plan-cascade.db", accepted)
        print(
            f"answered {accepted} new and {repeated} redelivered; lost: {lost}, duplicated: {duplicated} "
            f"({in_flight} in flight when wrk stopped, all recorded once)"
        )
        return
    print(f"{len(bodies)} deliveries ({args.n} unique), concurrency {args.concurrency}, SQLite")
    for name, (lat, rps) in results.items():
        print(
            f"{name:>14}: p50 {percentile(lat, 50):6.1f} ms  p99 {percentile(lat, 99):6.1f} ms  "
            f"{rps:7.0f} deliveries/s"
        )
    ratio = results["plan-cascade"][1] / results["bare FastAPI"][1]
    print(f"throughput vs bare endpoint: {ratio:.0%}")
    lost, duplicated = count_sqlite(tmp / "data" / "plan-cascade.db", args.n)
    print(f"lost: {lost}, duplicated: {duplicated}")


if __name__ == "__main__":
    asyncio.run(main())
