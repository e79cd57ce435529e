"""How fast a maintainer sees Plan Cascade react, in server mode.

    .venv/bin/python bench/latency.py [--n 10] [--delay 0.15] [--gap 3] [--show] [--baseline main]

Starts the real `plan-cascade serve` process (workers on, GitHub's pacing of writes on:
`PLAN_CASCADE_GITHUB_WRITE_INTERVAL=1`) against a fake GitHub served over HTTP on loopback that
answers every request after `--delay` seconds (default 0.15: GitHub's REST calls take
100–300 ms), labels issues whose body holds a `prd` block (one delivery at a time, `--gap`
seconds apart), and measures, from the moment the signed delivery is posted:
- until GitHub has answered the 👀 reaction (when one is sent: a 👀 still queued when the plan
  comment goes is dropped), and
- until it has answered the plan comment's creation,
each as a time (p50, p95, max) and as GitHub round trips made one after the other for that
repository (requests that overlap count once; the approval poller's, for other plans, not at all),
plus how long the comment's request was held after the last answer
it waited for (a throttle wait shows there). Three cases, in turn:
- a repository without manifests whose config is cached (targets: 1 round trip before the 👀,
  ≤ 3 before the comment);
- a repository seen for the first time, its config cold, with a `pyproject.toml` and a
  `requirements/dev.txt` (found only in the file tree) (targets 2 and 3);
- the same on an installation never seen (no installation token cached either): round trips are
  counted after the installation's token, which nothing can be read without (targets 2 and 3;
  the total, one more, is shown too).
The first installation's token is cached by a warm-up delivery first. `--show` prints the requests
of the first delivery of each case, in order. `--baseline REF` runs the same deliveries first
against the server of git revision REF (exported with `git archive`), in the same run.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
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
from bot.testing.fake_github_model import RecordedRequest  # noqa: E402
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


def delivery(repo: str, number: int, installation: int = 1) -> tuple[bytes, dict[str, str]]:
    data = copy.deepcopy(load_fixture("issues.labeled.1"))
    data["repository"].update(
        {"full_name": repo, "default_branch": "main", "clone_url": f"https://github.example/{repo}.git"}
    )
    data["installation"] = {"id": installation}
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


def answered(fake: FakeGitHub, method: str, path: str) -> RecordedRequest | None:
    """The first answered request to `path`, or None."""
    return next((r for r in fake.requests_to(method, path) if r.done), None)


def round_trips(
    fake: FakeGitHub, target: RecordedRequest, *, since: float, repo: str, installation: int | None
) -> int:
    """GitHub round trips one after the other up to `target` (see `FakeGitHub.round_trips`), among
    the requests for `repo` and the token of `installation` (None: the token not counted); the
    approval poller's requests for other plans, sent meanwhile, are not this delivery's."""
    token = f"/app/installations/{installation}/access_tokens"
    window = [r for r in fake.requests if since <= r.at <= target.at and r.done]
    chain = sorted(
        (r for r in window if f"/repos/{repo}/" in r.path or (installation and r.path.endswith(token))),
        key=lambda r: r.at,
    )
    depth: dict[int, int] = {}
    for i, r in enumerate(chain):
        depth[i] = 1 + max((depth[j] for j in range(i) if chain[j].done <= r.at), default=0)
    return next((depth[i] for i, r in enumerate(chain) if r is target), 0)


def trips(values: list[int]) -> str:
    return f"median {statistics.median(values):g}, max {max(values)}" if values else "none"


def describe(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:>28}: none sent"
    q = statistics.quantiles(values, n=20, method="inclusive") if len(values) > 1 else values * 19
    return (
        f"{name:>28}: p50 {statistics.median(values) * 1000:6.0f} ms   p95 {q[18] * 1000:6.0f} ms   "
        f"max {max(values) * 1000:6.0f} ms"
    )


@dataclass
class Case:
    name: str
    targets: tuple[int, int]  # round trips before the 👀, before the plan comment
    app: bool = True  # the installation's token counted as a round trip
    reactions: list[float] = field(default_factory=list)
    comments: list[float] = field(default_factory=list)
    eye_trips: list[int] = field(default_factory=list)
    comment_trips: list[int] = field(default_factory=list)
    totals: list[tuple[int, int]] = field(default_factory=list)  # with the token counted
    waits: list[float] = field(default_factory=list)
    dropped: int = 0


def label(
    client: httpx.Client,
    url: str,
    fake: FakeGitHub,
    repo: str,
    number: int,
    case: Case,
    show: bool,
    installation: int = 1,
) -> None:
    """Label one issue and record when GitHub answered the 👀 and the plan comment."""
    body, headers = delivery(repo, number, installation)
    react = f"/api/v3/repos/{repo}/issues/{number}/reactions"
    create = f"/api/v3/repos/{repo}/issues/{number}/comments"
    since = fake.clock()
    start = time.perf_counter()
    assert client.post(f"{url}/webhook", content=body, headers=headers).status_code == 202
    case.comments.append(wait_until(lambda: answered(fake, "POST", create), start))
    time.sleep(0.5)  # a 👀 still queued may go after the comment (or was dropped)
    eye, made = answered(fake, "POST", react), answered(fake, "POST", create)
    assert made is not None
    counted = installation if case.app else None
    case.comment_trips.append(round_trips(fake, made, since=since, repo=repo, installation=counted))
    total_eye = 0
    if eye is not None and eye.at <= made.at:
        case.reactions.append(eye.done - since)
        case.eye_trips.append(round_trips(fake, eye, since=since, repo=repo, installation=counted))
        total_eye = round_trips(fake, eye, since=since, repo=repo, installation=installation)
    else:
        case.dropped += 1
    total_made = round_trips(fake, made, since=since, repo=repo, installation=installation)
    case.totals.append((total_eye, total_made))
    before = [r for r in fake.requests if since <= r.at <= made.at]
    # Time the comment's request was held back: from the last answer it waited for to its start.
    case.waits.append(
        max(made.at - max((r.done for r in before if r.done and r.done <= made.at), default=since), 0)
    )
    if show:
        print(f"  {case.name}:")
        for r in before:
            print(f"  {(r.at - since) * 1000:6.0f} → {(r.done - since) * 1000:6.0f} ms  {r.method} {r.path}")


def run(root: Path, args: argparse.Namespace) -> list[Case]:
    """The three cases against the server of the code at `root`."""
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3", latency=args.delay)
    fake.add_repo(REPO)
    for number in range(1, args.n + 2):
        fake.add_issue(REPO, title=f"Bench {number}", body=PRD)
    for n in range(1, args.n + 1):  # repositories seen for the first time, of known and new installations
        for repo in (f"{REPO}-py{n}", f"{REPO}-new{n}"):
            fake.add_repo(repo)
            fake.add_issue(repo, title="Bench", body=PRD)
            fake.set_file(repo, "pyproject.toml", PYPROJECT)
            fake.set_file(repo, "requirements/dev.txt", "pytest\n")  # found only in the tree
    tmp = Path(tempfile.mkdtemp(prefix="pc-latency-"))
    warm = Case("no manifests, config cached", (1, 3))
    cold = Case("pyproject.toml + requirements/dev.txt, config cold", (2, 3))
    new = Case("the same, on an installation never seen (after its token)", (2, 3), app=False)
    env = {
        "PLAN_CASCADE_LOG_LEVEL": "WARNING",
        "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "60",
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
        label(client, url, fake, REPO, args.n + 1, Case("warm-up", (0, 0)), False)  # token, config
        for number in range(1, args.n + 1):
            show = args.show and number == 1
            time.sleep(args.gap)  # GitHub's pacing: a plan writes three times, one a second sustained
            label(client, url, fake, REPO, number, warm, show)
            time.sleep(args.gap)
            label(client, url, fake, f"{REPO}-py{number}", 1, cold, show)
            time.sleep(args.gap)
            label(client, url, fake, f"{REPO}-new{number}", 1, new, show, installation=100 + number)
    return [warm, cold, new]


def export(ref: str) -> Path:
    """The code at git revision `ref`, in a temporary directory."""
    target = Path(tempfile.mkdtemp(prefix="pc-latency-base-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def report(name: str, cases: list[Case]) -> None:
    print(f"== {name}")
    for case in cases:
        eye, comment = case.targets
        print(f"{case.name}:")
        print(
            describe("delivery → 👀 reaction", case.reactions),
            f"  round trips {trips(case.eye_trips)} (target ≤ {eye});",
            f"none before the comment: {case.dropped}",
        )
        print(
            describe("delivery → plan comment", case.comments),
            f"  round trips {trips(case.comment_trips)}  (target ≤ {comment})",
        )
        if not case.app:
            eyes = [e for e, _ in case.totals if e]
            made = [c for _, c in case.totals]
            print(f"{'':>30}with the token counted: 👀 {trips(eyes)}, plan comment {trips(made)}")
        print(
            f"{'':>30}longest hold before the comment's request: {max(case.waits) * 1000:.0f} ms "
            "(target: no throttle wait)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10, help="labelled issues per case")
    parser.add_argument("--delay", type=float, default=0.15, help="seconds GitHub takes per request")
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between deliveries")
    parser.add_argument("--show", action="store_true", help="print the first delivery's requests")
    parser.add_argument("--baseline", help="a git revision to run the same deliveries against first")
    args = parser.parse_args()
    servers = ([(args.baseline, export(args.baseline))] if args.baseline else []) + [("this tree", ROOT)]
    results = [(name, run(root, args)) for name, root in servers]
    print(f"{args.n} labelled issues with a prd block per case, server mode (SQLite, 2 workers), fake GitHub")
    print(
        f"on loopback answering every request after {args.delay * 1000:.0f} ms (the floor: that per round "
        f"trip); deliveries {args.gap:g} s apart; GitHub's pacing on (PLAN_CASCADE_GITHUB_WRITE_INTERVAL=1)"
    )
    for name, cases in results:
        report(name, cases)


if __name__ == "__main__":
    main()
