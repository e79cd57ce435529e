"""How fast a maintainer sees Plan Cascade react, in server mode.

    .venv/bin/python bench/latency.py [--n 20]

Starts the real `plan-cascade serve` process against a fake GitHub served over HTTP on
loopback, labels N issues whose body holds a `prd` block (one delivery each, one after
the other), and measures, from the moment the signed delivery is posted:
- until GitHub receives the 👀 reaction (target: under 1 s), and
- until the plan comment exists (target: under 2 s).
Prints p50, p95 and max of both.
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
    data["repository"].update({"full_name": REPO, "default_branch": "main", "clone_url": ""})
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
    args = parser.parse_args()
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo(REPO)
    for number in range(1, args.n + 1):
        fake.add_issue(REPO, title=f"Bench {number}", body=PRD)
    tmp = Path(tempfile.mkdtemp(prefix="pc-latency-"))
    reactions, comments = [], []
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
            time.sleep(1.0)
            for number in range(1, args.n + 1):
                body, headers = delivery(number)
                path = f"/api/v3/repos/{REPO}/issues/{number}/reactions"
                start = time.perf_counter()
                assert client.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
                reactions.append(wait_until(lambda p=path: fake.requests_to("POST", p), start))
                comments.append(
                    wait_until(
                        lambda n=number: any("plan-cascade:plan" in c.body for c in fake.comments(REPO, n)),
                        start,
                    )
                )
    print(
        f"{args.n} labelled issues with a prd block, server mode (SQLite, 2 workers), fake GitHub on loopback"
    )
    print(describe("delivery → 👀 reaction", reactions))
    print(describe("delivery → plan comment", comments))


if __name__ == "__main__":
    main()
