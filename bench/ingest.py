"""Webhook intake benchmark: a burst of signed deliveries at the real server on loopback.

    .venv/bin/python bench/ingest.py [--n 2000] [--concurrency 50] [--database-url URL]

Starts `plan-cascade serve --no-workers` (SQLite in a temporary data dir unless
--database-url is given) and, for comparison, a bare FastAPI endpoint that only
reads the body, both under uvicorn in their own processes. Prints p50/p99 answer
latency and throughput for both, then "lost" and "duplicated" computed from the
database (every delivery id must have exactly one delivery row and one job). One
delivery in 20 is sent twice, as a GitHub redelivery would be.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pc-bench-"))
    from tests.support import rsa_private_key_pem

    key = tmp / "key.pem"
    key.write_text(rsa_private_key_pem())
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "PLAN_CASCADE_APP_ID": "1",
        "PLAN_CASCADE_PRIVATE_KEY_PATH": str(key),
        "PLAN_CASCADE_WEBHOOK_SECRET": SECRET,
        "PLAN_CASCADE_DATA_DIR": str(tmp / "data"),
        "PLAN_CASCADE_LOG_LEVEL": "WARNING",
    }
    bodies = make_bodies(args.n)
    results = {}
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "--env-file",
            str(tmp / "none"),
            "serve",
            "--no-workers",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        env=env,
    )
    bare_port = free_port()
    (tmp / "bare_app.py").write_text(BARE_APP)
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
    try:
        await wait_ready(f"http://127.0.0.1:{port}", server)
        await wait_ready(f"http://127.0.0.1:{bare_port}", bare)
        await burst(f"http://127.0.0.1:{bare_port}", bodies[:100], args.concurrency)  # warm-up
        results["bare FastAPI"] = await burst(f"http://127.0.0.1:{bare_port}", bodies, args.concurrency)
        results["plan-cascade"] = await burst(f"http://127.0.0.1:{port}", bodies, args.concurrency)
    finally:
        for proc in (server, bare):
            proc.terminate()
            proc.wait(timeout=30)
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
