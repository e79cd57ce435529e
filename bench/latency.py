"""How fast a maintainer sees Plan Cascade react, in server mode.

    .venv/bin/python bench/latency.py [--n 10] [--delay 0.15] [--gap 3] [--show]

Starts the real `plan-cascade serve` process (workers on, GitHub's pacing of writes on:
`PLAN_CASCADE_GITHUB_WRITE_INTERVAL=1`) against a fake GitHub served over HTTP on loopback that
answers every request after `--delay` seconds (default 0.15: GitHub's REST calls take
100–300 ms), labels issues whose body holds a `prd` block (one delivery at a time, `--gap`
seconds apart), and measures, from the moment the signed delivery is posted:
- until GitHub has answered the 👀 reaction, and
- until it has answered the plan comment's creation,
each as a time (p50, p95, max) and as GitHub round trips made one after the other (requests
that overlap count once), plus how long the comment's request was held after the last answer
it waited for (a throttle wait shows there). Two cases, alternating: a repository without
manifests whose config is cached (targets: 1 round trip before the 👀, ≤ 3 before the
comment), and a repository with a `pyproject.toml` and a `requirements/dev.txt` seen for the
first time, its config cold (targets 2 and 3). The installation token is cached by a warm-up delivery first.
`--show` prints the requests of the first delivery of each case, in order.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.testing.deliveries import encode, load_fixture, signed_headers  # noqa: E402
from bot.testing.fake_github import FakeGitHub  # noqa: E402
from bot.testing.fake_github_serve import serve  # noqa: E402
from bot.testing.server_process import running_server  # noqa: E402
from tests.support import rsa_private_key_pem  # noqa: E402

SECRET = "bench-latency-secret"
REPO = "bench-org/app"
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
PYPROJECT = '[project]\nname = "app"\nversion = "1.0"\nrequires-python = ">=3.11"\n'


def delivery(repo: str, number: int) -> tuple[bytes, dict[str, str]]:
    data = copy.deepcopy(load_fixture("issues.labeled.1"))
    data["repository"].update(
        {"full_name": repo, "default_branch": "main", "clone_url": f"https://github.example/{repo}.git"}
    )
    data["installation"] = {"id": 1}
    data["issue"]["number"] = number
    data["label"]["name"] = "plan-cascade"
    data["sender"].update({"login": "bench-org", "type": "User"})
    body = encode(data)
    return body, signed_headers(body, secret=SECRET, event="issues")


def wait_until(predicate, start: float, timeout: float = 60.0) -> float:  # type: ignore[no-untyped-def]
    while not predicate():
        if time.perf_counter() - start > timeout:
            raise SystemExit("timed out waiting for GitHub to be called")
        time.sleep(0.002)
    return time.perf_counter() - start


def answered(fake: FakeGitHub, method: str, path: str):  # type: ignore[no-untyped-def]
    """The first answered request to `path`, or None."""
    return next((r for r in fake.requests_to(method, path) if r.done), None)


def trips(values: list[int]) -> str:
    return f"median {statistics.median(values):g}, max {max(values)}"


def describe(name: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=20, method="inclusive")
    return (
        f"{name:>28}: p50 {statistics.median(values) * 1000:6.0f} ms   p95 {q[18] * 1000:6.0f} ms   "
        f"max {max(values) * 1000:6.0f} ms"
    )


@dataclass
class Case:
    name: str
    targets: tuple[int, int]  # round trips before the 👀, before the plan comment
    reactions: list[float] = field(default_factory=list)
    comments: list[float] = field(default_factory=list)
    eye_trips: list[int] = field(default_factory=list)
    comment_trips: list[int] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)


def label(
    client: httpx.Client, url: str, fake: FakeGitHub, repo: str, number: int, case: Case, show: bool
) -> None:
    """Label one issue and record when GitHub answered the 👀 and the plan comment."""
    body, headers = delivery(repo, number)
    react = f"/api/v3/repos/{repo}/issues/{number}/reactions"
    create = f"/api/v3/repos/{repo}/issues/{number}/comments"
    since = fake.clock()
    start = time.perf_counter()
    assert client.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
    case.reactions.append(wait_until(lambda: answered(fake, "POST", react), start))
    case.comments.append(wait_until(lambda: answered(fake, "POST", create), start))
    eye, made = answered(fake, "POST", react), answered(fake, "POST", create)
    assert eye is not None and made is not None
    case.eye_trips.append(fake.round_trips(eye, since=since))
    case.comment_trips.append(fake.round_trips(made, since=since))
    before = [r for r in fake.requests if since <= r.at <= made.at]
    # Time the comment's request was held back: from the last answer it waited for to its start.
    case.waits.append(
        max(made.at - max((r.done for r in before if r.done and r.done <= made.at), default=since), 0)
    )
    if show:
        print(f"  {case.name}:")
        for r in before:
            print(f"  {(r.at - since) * 1000:6.0f} → {(r.done - since) * 1000:6.0f} ms  {r.method} {r.path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10, help="labelled issues per case")
    parser.add_argument("--delay", type=float, default=0.15, help="seconds GitHub takes per request")
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between deliveries")
    parser.add_argument("--show", action="store_true", help="print the first delivery's requests")
    args = parser.parse_args()
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3", latency=args.delay)
    fake.add_repo(REPO)
    for number in range(1, args.n + 2):
        fake.add_issue(REPO, title=f"Bench {number}", body=PRD)
    for n in range(1, args.n + 1):  # a repository each, so each is seen for the first time
        fake.add_repo(f"{REPO}-py{n}")
        fake.add_issue(f"{REPO}-py{n}", title="Bench", body=PRD)
        fake.set_file(f"{REPO}-py{n}", "pyproject.toml", PYPROJECT)
        fake.set_file(f"{REPO}-py{n}", "requirements/dev.txt", "pytest\n")  # found only in the tree
    tmp = Path(tempfile.mkdtemp(prefix="pc-latency-"))
    warm = Case("no manifests, config cached", (1, 3))
    cold = Case("pyproject.toml + requirements/dev.txt, config cold", (2, 3))
    env = {
        "PLAN_CASCADE_LOG_LEVEL": "WARNING",
        "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "60",
        "PLAN_CASCADE_GITHUB_WRITE_INTERVAL": "1",  # GitHub's pacing, as served by default
    }
    with (
        serve(fake) as api,
        running_server(
            tmp, api_url=api, webhook_secret=SECRET, private_key_pem=rsa_private_key_pem(), extra_env=env
        ) as (url, _),
        httpx.Client() as client,
    ):
        label(client, url, fake, REPO, args.n + 1, Case("warm-up", (0, 0)), False)  # token, config
        for number in range(1, args.n + 1):
            time.sleep(args.gap)  # GitHub's pacing: a plan writes three times, one a second sustained
            label(client, url, fake, REPO, number, warm, args.show and number == 1)
            time.sleep(args.gap)
            label(client, url, fake, f"{REPO}-py{number}", 1, cold, args.show and number == 1)
    print(f"{args.n} labelled issues with a prd block per case, server mode (SQLite, 2 workers), fake GitHub")
    print(
        f"on loopback answering every request after {args.delay * 1000:.0f} ms (the floor: that per round "
        f"trip); deliveries {args.gap:g} s apart; GitHub's pacing on (PLAN_CASCADE_GITHUB_WRITE_INTERVAL=1)"
    )
    for case in (warm, cold):
        eye, comment = case.targets
        print(f"{case.name}:")
        print(
            describe("delivery → 👀 reaction", case.reactions),
            f"  round trips {trips(case.eye_trips)}  (target ≤ {eye})",
        )
        print(
            describe("delivery → plan comment", case.comments),
            f"  round trips {trips(case.comment_trips)}  (target ≤ {comment})",
        )
        print(
            f"{'':>30}longest hold before the comment's request: {max(case.waits) * 1000:.0f} ms "
            "(target: no throttle wait)"
        )


if __name__ == "__main__":
    main()
