"""Webhook intake benchmark: bursts of signed deliveries at the real server on loopback.

    .venv/bin/python bench/ingest.py [--seconds 5] [--rounds 5] [--concurrency 50] [--json PATH]

The load comes from `wrk` (Debian package `wrk`), a process of its own. Three servers run, each
under uvicorn in its own process: the README's `plan-cascade serve` (in-process workers on,
SQLite), `plan-cascade serve --no-workers`, and a bare FastAPI endpoint that only reads the body.
Every delivery is an `issues.labeled` event the server handles, so each becomes a job; with
workers on, the jobs run during the burst (against a fake GitHub on loopback: open a session,
check the label against the repository's config, which is cached after the first). The issue
number varies over 50 issues, so the workers run jobs of different issues at once.

With `--baseline DIR` (a checkout of other code, e.g. `git worktree add --detach ../base main`), a
fourth server runs that checkout's default `serve` with this interpreter, in the same rounds:
a change and its baseline measured on the same machine in the same minutes.

After a 2 s burst at each (not counted: a server's first jobs load what it loads once), bursts go
to each endpoint in turn, round after round (the order turns one step each round); before each
burst the queues of the servers with workers are let drain, and the time the default server's
takes after its own burst is printed. Prints p50/p99 answer
latency and throughput, then "lost" and "duplicated" computed from each database (every delivery
id answered 202 must have exactly one delivery row and one job; with workers, every job must end
`done` after one attempt). One delivery in 21 is sent twice, as a GitHub redelivery would be.
Target: the default `serve`'s p99 ≤ 2× that round's bare endpoint's in 4 of 5 rounds. With
`--json PATH` the figures are written there too (`bench/report.py` makes the table's row of them).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
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
from bot.testing.fake_github import FakeGitHub  # noqa: E402
from bot.testing.fake_github_serve import serve  # noqa: E402
from bot.testing.server_process import free_port, running_server  # noqa: E402
from tests.support import rsa_private_key_pem  # noqa: E402

SECRET = "bench-webhook-secret"
ISSUES = 50
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

WRK_SCRIPT = r"""
local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end
function init(args)
  counter, accepted, repeated, other = 0, 0, 0, 0
  bodies, signatures = {}, {}
  for line in io.lines(os.getenv("BENCH_BODIES")) do
    local tab = line:find("\t")
    table.insert(signatures, line:sub(1, tab - 1))
    table.insert(bodies, line:sub(tab + 1))
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-GitHub-Event"] = "issues"
end
function request()
  counter = counter + 1
  local n = counter
  if n % 21 == 0 then n = n - 1 end  -- one in 21 is a redelivery of the one before
  local k = (n + tid * 7) % #bodies + 1
  wrk.headers["X-Hub-Signature-256"] = signatures[k]
  wrk.headers["X-GitHub-Delivery"] = string.format("bench-%s-%d-%d", os.getenv("BENCH_ROUND"), tid, n)
  return wrk.format(nil, nil, nil, bodies[k])
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
Burst = tuple[float, float, float, int, int]


def write_bodies(tmp: Path, repo: str) -> Path:
    """One line per issue: the signature, a tab, the body (single-line JSON)."""
    lines = []
    for number in range(1, ISSUES + 1):
        data = copy.deepcopy(load_fixture("issues.labeled.1"))
        data["repository"].update({"full_name": repo, "default_branch": "main"})
        data["installation"] = {"id": 1}
        data["issue"]["number"] = number
        body = encode(data)
        assert b"\n" not in body and b"\t" not in body
        lines.append(
            signed_headers(body, secret=SECRET, event="issues")["X-Hub-Signature-256"] + "\t" + body.decode()
        )
    path = tmp / "bodies.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def wrk_burst(url: str, seconds: int, concurrency: int, tmp: Path, bodies: Path) -> Burst:
    """(p50 ms, p99 ms, requests/s, answered 202, answered 200) of a burst of `seconds`."""
    script = tmp / "burst.lua"
    script.write_text(WRK_SCRIPT)
    env = {**os.environ, "BENCH_BODIES": str(bodies), "BENCH_ROUND": str(next(_rounds))}
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


def query(db: Path, sql: str) -> int:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return int(conn.execute(sql).fetchone()[0] or 0)
    finally:
        conn.close()


def waiting(db: Path) -> int:
    return query(db, "SELECT COUNT(*) FROM jobs WHERE status IN ('queued', 'running')")


def drain(db: Path, timeout: float = 600) -> float:
    """Seconds until no job is queued or running."""
    start = time.perf_counter()
    while waiting(db):
        if time.perf_counter() - start > timeout:
            raise SystemExit("the queue did not drain")
        time.sleep(0.05)
    return time.perf_counter() - start


def audit(db: Path, accepted: int, *, ran: bool) -> dict[str, int]:
    """lost = answered 202 but not in the database; duplicated = a delivery with two jobs, or a job
    run twice; unobserved = recorded, but answered after wrk stopped listening (in flight at the end)."""
    rows = query(db, "SELECT COUNT(*) FROM deliveries WHERE id LIKE 'bench-%'")
    jobs = query(db, "SELECT COUNT(*) FROM jobs WHERE delivery_id LIKE 'bench-%'")
    dup = query(
        db,
        "SELECT SUM(c - 1) FROM (SELECT COUNT(*) c FROM jobs "
        "WHERE delivery_id LIKE 'bench-%' GROUP BY delivery_id)",
    )
    if ran:
        dup += query(db, "SELECT COUNT(*) FROM jobs WHERE delivery_id LIKE 'bench-%' AND attempts > 1")
        undone = query(db, "SELECT COUNT(*) FROM jobs WHERE delivery_id LIKE 'bench-%' AND status != 'done'")
    else:
        undone = 0
    return {
        "lost": max(accepted - rows, 0) + max(rows - jobs, 0),
        "duplicated": dup,
        "not done": undone,
        "in flight": max(rows - accepted, 0),
    }


def start_bare(tmp: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    (tmp / "bare_app.py").write_text(BARE_APP)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp)}
    cmd = [sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning", "--no-access-log"], cwd=tmp, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return url, proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the bare endpoint did not start")


def show(name: str, runs: list[Burst], bare: list[float] | None = None) -> list[float]:
    """Print the medians of `runs` (and their ratio to `bare`'s); return the medians."""
    med = [statistics.median(r[i] for r in runs) for i in range(3)]
    lo_hi = f"{min(r[2] for r in runs):.0f}–{max(r[2] for r in runs):.0f}/s"
    line = f"{name:>24}  {med[0]:6.1f} ms  {med[1]:6.1f} ms  {med[2]:8.0f}/s ({lo_hi})"
    if bare is not None:
        ratio, tail = med[2] / bare[2], med[1] / bare[1]
        line += f"  {ratio:4.0%} of bare, p99 {tail:.1f}×"
    print(line)
    return med


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=5, help="length of each wrk burst")
    parser.add_argument("--rounds", type=int, default=5, help="bursts at each endpoint, in turn")
    parser.add_argument(
        "--baseline", type=Path, help="a checkout whose default serve runs in the same rounds"
    )
    parser.add_argument("--json", type=Path, help="also write the figures there (for bench/report.py)")
    args = parser.parse_args()
    started = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "command": " ".join(["bench/ingest.py", *sys.argv[1:]]),
    }
    if shutil.which("wrk") is None:
        raise SystemExit("this bench needs wrk (Debian/Ubuntu: apt-get install wrk)")

    tmp = Path(tempfile.mkdtemp(prefix="pc-bench-"))
    repo = "bench-org/app"
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo(repo)
    bodies = write_bodies(tmp, repo)
    env = {"PLAN_CASCADE_LOG_LEVEL": "WARNING", "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "60"}
    common = {"webhook_secret": SECRET, "private_key_pem": rsa_private_key_pem(), "extra_env": env}
    names = ["default", "intake"] + (["baseline"] if args.baseline else [])
    for name in names:
        (tmp / name).mkdir()
    bare_url, bare = start_bare(tmp)
    runs: dict[str, list[Burst]] = {"bare": [], **{name: [] for name in names}}
    drains: list[float] = []
    dbs = {name: tmp / name / "data" / "plan-cascade.db" for name in names}
    try:
        with contextlib.ExitStack() as stack:
            api = stack.enter_context(serve(fake))
            urls = {"bare": bare_url}
            for name in names:
                extra = {"serve_args": ["--no-workers"]} if name == "intake" else {}
                root = {"root": args.baseline.resolve()} if name == "baseline" else {}
                server = running_server(tmp / name, api_url=api, **common, **extra, **root)  # type: ignore[arg-type]
                urls[name] = stack.enter_context(server)[0]
            order = list(urls)
            warm = {name: wrk_burst(urls[name], 2, args.concurrency, tmp, bodies)[3] for name in order}
            # ^ not counted in the figures (a server's first jobs load what it loads once), but audited
            for turn in range(args.rounds):  # in turn, so all see the same machine
                for name in order[turn % len(order) :] + order[: turn % len(order)]:
                    for db in (dbs["default"], *([dbs["baseline"]] if args.baseline else [])):
                        drain(db)
                    runs[name].append(wrk_burst(urls[name], args.seconds, args.concurrency, tmp, bodies))
                    if name == "default":
                        drains.append(drain(dbs["default"]))
            for db in (dbs["default"], *([dbs["baseline"]] if args.baseline else [])):
                drain(db)
            audits = {
                name: audit(dbs[name], warm[name] + sum(r[3] for r in runs[name]), ran=name != "intake")
                for name in names
            }
    finally:
        bare.terminate()
        bare.wait(timeout=30)
    print(
        f"{args.rounds} × {args.seconds} s of issues.labeled deliveries from wrk at each endpoint in turn "
        f"(1 in 21 a redelivery, {ISSUES} issues), concurrency {args.concurrency}, SQLite; "
        "medians of the rounds"
    )
    print(f"{'':>24}  {'p50':>9}  {'p99':>9}  {'deliveries/s':>11}")
    bare_m = show("bare FastAPI", runs["bare"])
    ours = show("serve (workers on)", runs["default"], bare_m)
    show("serve --no-workers", runs["intake"], bare_m)
    if args.baseline:
        show(f"baseline serve ({args.baseline.name})", runs["baseline"], bare_m)
    ratio = ours[2] / bare_m[2]
    tails = [o[1] / b[1] for o, b in zip(runs["default"], runs["bare"], strict=True)]
    within = sum(t <= 2 for t in tails)
    print(
        f"default serve: throughput {ratio:.0%} of bare "
        f"(target ≥ 60%: {'met' if ratio >= 0.6 else 'missed'}), "
        f"p99 within 2× that round's bare in {within} of {len(tails)} rounds, at most {max(tails):.1f}× "
        f"(target: 4 of 5: {'met' if within >= min(4, len(tails)) else 'missed'})"
    )
    for name in names:
        per_round = [
            f"{o[1] / b[1]:.1f}× ({o[2] / b[2]:.0%})" for o, b in zip(runs[name], runs["bare"], strict=True)
        ]
        print(f"{name}: p99 (and rate) each round against that round's bare: {', '.join(per_round)}")
    done = [r[3] for r in runs["default"]]
    print(
        "queue drained "
        + ", ".join(f"{d:.1f} s after a burst of {n} jobs" for d, n in zip(drains, done, strict=True))
        + " (the workers ran jobs during the burst too)"
    )
    for name, found in audits.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in found.items()))
    if args.json:
        labels = {"default": "serve", "intake": "serve --no-workers", "baseline": "baseline serve"}
        servers: dict[str, dict[str, object]] = {"bare": figures(runs["bare"])}
        for name in names:
            servers[labels[name]] = {
                **figures(runs[name]),
                "p99_ratios": [round(o[1] / b[1], 2) for o, b in zip(runs[name], runs["bare"], strict=True)],
                "lost": audits[name]["lost"],
                "duplicated": audits[name]["duplicated"],
            }
        out = {
            **started,
            "bench": "ingest",
            "rounds": args.rounds,
            "seconds": args.seconds,
            "servers": servers,
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")


def figures(runs: list[Burst]) -> dict[str, float]:
    """The medians of a server's rounds: p50 and p99 (ms), deliveries a second."""
    return {
        key: round(statistics.median(r[i] for r in runs), 2)
        for i, key in enumerate(("p50_ms", "p99_ms", "rate"))
    }


def machine() -> str:
    """Cores, memory, kernel, Python and the load when the bench started."""
    import platform

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores, {memory:.0f} GB, Linux {platform.release()}, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f} at the start"
    )


if __name__ == "__main__":
    main()
