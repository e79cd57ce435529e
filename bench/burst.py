"""Twelve issues labelled at once on one installation: when does each plan comment appear?

    .venv/bin/python bench/burst.py [--issues 12] [--delay 0.15] [--fail 0.05] [--baseline main]

Starts the real `plan-cascade serve` (the README's default: SQLite, 2 workers, GitHub's pacing of
writes on, `PLAN_CASCADE_GITHUB_WRITE_INTERVAL=1`) against a fake GitHub on loopback that answers
every request after `--delay` seconds and fails `--fail` of the repository's requests with a 502
(half of the failed comment creations after making the comment, as GitHub sometimes does). After
a warm-up delivery (the installation token, the config), `--issues` issues whose body holds a `prd`
block are labelled at once, and the bench measures, from the first delivery, when GitHub answered
each plan comment's creation. When every plan comment is signed it checks that nothing was lost or
doubled: one plan comment an issue, its state signed for it, at most one 👀.

`--baseline REF` runs the same burst first against the server of git revision REF (exported with
`git archive` to a temporary directory), so each figure has its baseline from the same run.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.plan.state_block import PENDING_BLOCK, PLAN_MARKER, decode_state  # noqa: E402
from bot.testing.deliveries import encode, load_fixture, signed_headers  # noqa: E402
from bot.testing.fake_github import FakeGitHub  # noqa: E402
from bot.testing.fake_github_faults import Faults  # noqa: E402
from bot.testing.fake_github_serve import serve  # noqa: E402
from bot.testing.server_process import running_server  # noqa: E402
from tests.support import rsa_private_key_pem  # noqa: E402

SECRET = "bench-burst-secret"
REPO = "bench-org/burst"
PRD = """```prd
version: 1
title: Bench plan
summary: A two-story plan.
stories:
  - id: STORY-001
    title: One
    acceptance_criteria: ["one.txt holds 1 line"]
  - id: STORY-002
    title: Two
    depends_on: [STORY-001]
    acceptance_criteria: ["two.txt holds 2 lines"]
```
"""


def delivery(number: int) -> tuple[bytes, dict[str, str]]:
    data = copy.deepcopy(load_fixture("issues.labeled.1"))
    data["repository"].update(
        {"full_name": REPO, "default_branch": "main", "clone_url": f"https://github.example/{REPO}.git"}
    )
    data["installation"] = {"id": 1}
    data["issue"]["number"] = number
    data["label"]["name"] = "plan-cascade"
    data["sender"].update({"login": "bench-org", "type": "User"})
    body = encode(data)
    return body, signed_headers(body, secret=SECRET, event="issues")


def plan_made(fake: FakeGitHub, number: int) -> float | None:
    """When GitHub answered the request that made the issue's plan comment (its first made comment)."""
    path = f"/api/v3/repos/{REPO}/issues/{number}/comments"
    made = [
        r
        for r in fake.requests_to("POST", path)
        if r.done
        and (r.status == 201 or r.fault == "after")
        and PLAN_MARKER in str((r.json or {}).get("body"))
    ]
    return min((r.done for r in made), default=None)


def settled(fake: FakeGitHub, numbers: list[int]) -> bool:
    plans = [c for n in numbers for c in fake.comments(REPO, n) if PLAN_MARKER in c.body]
    return len(plans) >= len(numbers) and not any(PENDING_BLOCK in c.body for c in plans)


def problems(fake: FakeGitHub, numbers: list[int]) -> list[str]:
    """Plans lost or doubled, states unsigned or unreadable, 👀 doubled."""
    found = []
    for n in numbers:
        plans = [c for c in fake.comments(REPO, n) if PLAN_MARKER in c.body]
        if len(plans) != 1:
            found.append(f"#{n}: {len(plans)} plan comments")
            continue
        body = plans[0].body
        state = decode_state(body)
        if state is None or PENDING_BLOCK in body or f"c={plans[0].id} " not in body:
            found.append(f"#{n}: the plan comment's state is not signed for it")
        eyes = [r for r in fake.repo(REPO).issue_reactions.get(n, []) if r.content == "eyes"]
        if len(eyes) > 1:
            found.append(f"#{n}: {len(eyes)} 👀")
    return found


def run_burst(root: Path, args: argparse.Namespace) -> tuple[list[float], list[str], int, int]:
    """One server (the code at `root`), one burst; (plan comment times, problems, 👀 sent, failed)."""
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3", latency=args.delay)
    fake.add_repo(REPO)
    numbers = list(range(2, args.issues + 2))
    for number in range(1, args.issues + 2):
        fake.add_issue(REPO, title=f"Burst {number}", body=PRD)
    tmp = Path(tempfile.mkdtemp(prefix="pc-burst-"))
    env = {
        "PLAN_CASCADE_LOG_LEVEL": "WARNING",
        "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "600",
        "PLAN_CASCADE_GITHUB_WRITE_INTERVAL": "1",  # GitHub's pacing, as served by default
    }
    with (
        serve(fake) as api,
        running_server(
            tmp,
            api_url=api,
            webhook_secret=SECRET,
            private_key_pem=rsa_private_key_pem(),
            extra_env=env,
            root=root,
        ) as (url, _),
        httpx.Client() as client,
    ):
        body, headers = delivery(1)  # warm-up: the token, the App, the config
        assert client.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
        deadline = time.monotonic() + 60
        while not settled(fake, [1]):
            if time.monotonic() > deadline:
                raise SystemExit("the warm-up plan never appeared")
            time.sleep(0.02)
        time.sleep(5)  # GitHub's pacing: the write bucket is full again
        fake.faults = Faults(seed=args.seed)
        repos = rf"/api/v3/repos/{REPO}/.*"
        fake.faults.fail("*", repos, when="before", ratio=args.fail, times=None)
        comments = rf"/api/v3/repos/{REPO}/issues/\d+/comments"
        fake.faults.fail("POST", comments, when="after", ratio=args.fail, times=None)
        before = len(fake.requests)
        since = fake.clock()
        for number in numbers:
            body, headers = delivery(number)
            assert client.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
        deadline = time.monotonic() + 180
        while not settled(fake, numbers):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        times = [(plan_made(fake, n) or float("inf")) - since for n in numbers]
        burst = fake.requests[before:]
        eyes = sum(1 for r in burst if r.method == "POST" and r.path.endswith("/reactions"))
        failed = sum(1 for r in burst if r.fault)
        return times, problems(fake, numbers), eyes, failed


def export(ref: str) -> Path:
    """The code at git revision `ref`, in a temporary directory."""
    target = Path(tempfile.mkdtemp(prefix="pc-burst-base-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def report(name: str, times: list[float], found: list[str], eyes: int, failed: int) -> None:
    ordered = sorted(times)
    print(
        f"{name:>10}: last plan comment {ordered[-1]:5.1f} s, median {statistics.median(ordered):5.1f} s "
        f"after the labels; 👀 sent {eyes}; requests failed {failed}; "
        + ("nothing lost or doubled" if not found else "PROBLEMS: " + "; ".join(found))
    )
    print(f"{'':>12}each: " + " ".join(f"{t:.1f}" for t in ordered))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--issues", type=int, default=12, help="issues labelled at once")
    parser.add_argument("--delay", type=float, default=0.15, help="seconds GitHub takes per request")
    parser.add_argument("--fail", type=float, default=0.05, help="share of requests GitHub fails (502)")
    parser.add_argument("--seed", type=int, default=38, help="the fault injection's seed")
    parser.add_argument("--rounds", type=int, default=1, help="bursts per server")
    parser.add_argument("--baseline", help="a git revision to run the same burst against first (e.g. main)")
    args = parser.parse_args()
    print(
        f"{args.issues} issues labelled at once on one installation; the README's `serve` (SQLite, "
        f"2 workers, PLAN_CASCADE_GITHUB_WRITE_INTERVAL=1); fake GitHub on loopback, "
        f"{args.delay * 1000:.0f} ms a request, {args.fail:.0%} of requests failing (502; comment "
        "creations also after the work)"
    )
    servers = ([(args.baseline, export(args.baseline))] if args.baseline else []) + [("this tree", ROOT)]
    for round_ in range(args.rounds):
        for name, root in servers:
            report(name, *run_burst(root, args))
        if round_ + 1 < args.rounds:
            print()
    print("target: last plan comment ≤ 13 s, median ≤ 7 s, nothing lost or doubled")


if __name__ == "__main__":
    main()
