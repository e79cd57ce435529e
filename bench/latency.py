"""How fast a maintainer sees Plan Cascade react, in server mode.

    .venv/bin/python bench/latency.py [--n 20]

Starts the real `plan-cascade serve` process against a fake GitHub served over HTTP on
loopback that answers every request after `--delay` seconds (default 0.15: GitHub's REST
calls take 100–300 ms), labels N issues whose body holds a `prd` block (one delivery each,
one after the other), and measures, from the moment the signed delivery is posted:
- until GitHub has answered the 👀 reaction, and
- until it has answered the plan comment's creation,
each as a time (p50, p95, max) and as GitHub round trips made one after the other (requests
that overlap count once): targets 1 before the 👀 and at most 3 before the plan comment once
the installation token and the repository's config are cached (a warm-up delivery first).
`--show` prints the requests of the first delivery, in order, with their start and end.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.testing.deliveries import encode, load_fixture, signed_headers  # noqa: E402
from bot.testing.fake_github import FakeGitHub, serve  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.15, help="seconds GitHub takes per request")
    parser.add_argument("--show", action="store_true", help="print the first delivery's requests")
    args = parser.parse_args()
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3", latency=args.delay)
    fake.add_repo(REPO)
    for number in range(1, args.n + 1):
        fake.add_issue(REPO, title=f"Bench {number}", body=PRD)
    tmp = Path(tempfile.mkdtemp(prefix="pc-latency-"))
    reactions, comments, eye_trips, comment_trips = [], [], [], []
    with (
        serve(fake) as api,
        running_server(
            tmp,
            api_url=api,
            webhook_secret=SECRET,
            private_key_pem=rsa_private_key_pem(),
            extra_env={"PLAN_CASCADE_LOG_LEVEL": "WARNING", "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "60"},
        ) as (url, _),
    ):
        with httpx.Client() as client:
            warm_body, warm_headers = delivery(args.n + 1)
            fake.add_issue(REPO, title="warm-up", body=PRD)
            client.post(f"{url}/webhook", content=warm_body, headers=warm_headers)
            warm = f"/api/v3/repos/{REPO}/issues/{args.n + 1}/comments"
            wait_until(lambda: answered(fake, "POST", warm), time.perf_counter())
            time.sleep(0.5)
            for number in range(1, args.n + 1):
                body, headers = delivery(number)
                react = f"/api/v3/repos/{REPO}/issues/{number}/reactions"
                create = f"/api/v3/repos/{REPO}/issues/{number}/comments"
                since = fake.clock()
                start = time.perf_counter()
                assert client.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
                reactions.append(wait_until(lambda p=react: answered(fake, "POST", p), start))
                comments.append(wait_until(lambda p=create: answered(fake, "POST", p), start))
                eye = answered(fake, "POST", react)
                made = answered(fake, "POST", create)
                assert eye is not None and made is not None
                eye_trips.append(fake.round_trips(eye, since=since))
                comment_trips.append(fake.round_trips(made, since=since))
                if args.show and number == 1:
                    for r in fake.requests:
                        if r.at >= since and r.at <= made.at:
                            span = f"{(r.at - since) * 1000:6.0f} → {(r.done - since) * 1000:6.0f} ms"
                            print(f"  {span}  {r.method} {r.path}")
                time.sleep(0.2)  # let the job finish its last writes before the next delivery
    print(
        f"{args.n} labelled issues with a prd block, server mode (SQLite, 2 workers), fake GitHub on loopback"
    )
    print(
        f"GitHub answers every request after {args.delay * 1000:.0f} ms; the floor is that delay per "
        f"round trip: {args.delay * 1000:.0f} ms before the 👀, {3 * args.delay * 1000:.0f} ms before the "
        "comment (3 round trips)"
    )
    print(describe("delivery → 👀 reaction", reactions), f"  round trips {trips(eye_trips)}  (target 1)")
    print(
        describe("delivery → plan comment", comments), f"  round trips {trips(comment_trips)}  (target ≤ 3)"
    )


if __name__ == "__main__":
    main()
