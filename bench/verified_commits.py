"""What verified commits cost: GitHub making a 10-file story commit through its API, beside `git push`.

    .venv/bin/python bench/verified_commits.py [--files 10] [--binary 0] [--latency 0.15] [--runs 5]

A repository on a local bare remote and a fake GitHub over real HTTP on loopback whose Git
database writes into that remote, answering every request after `--latency` seconds (GitHub
answers in 100–300 ms). A story commit changes `--files` files (`--binary` of them binary, which
go as blobs; text goes inside the tree request), on a new branch. Timed, median of `--runs`:
the production API path (`CommitPublisher` in `api` mode: the commit made by GitHub, the
branch moved by one compare-and-swap, GitHub's commit fetched back into the mirror), paced
like the server paces an installation's writes (`Throttle`: a burst of 3, then one a second),
beside `git push` of the same commit to the bare remote. Counted: the requests of one push
(reads, writes) and the writes the throttle admitted. Every commit GitHub made must be verified
and hold the local tree (checked).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.github import token_port  # noqa: E402
from bot.github.throttle import Throttle  # noqa: E402
from bot.publishing.commit_mode import CommitPublisher  # noqa: E402
from bot.testing.fake_github import FakeGitHub  # noqa: E402
from bot.testing.fake_github_serve import serve  # noqa: E402
from bot.workspace.mirror import Mirror  # noqa: E402
from tests.execution_support import git, make_remote  # noqa: E402

REPO = "octo/bench"


def story_commit(mirror: Mirror, tmp: Path, n: int, *, files: int, binary: int) -> str:
    """A story's commit on `main` writing `files` files (the last `binary` of them binary)."""
    work = tmp / f"work-{n}"
    git("worktree", "add", "-q", "--detach", str(work), "refs/remotes/origin/main", cwd=mirror.path)
    for i in range(files):
        path = work / "src" / f"module_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        if i >= files - binary:
            path.with_suffix(".bin").write_bytes(bytes(range(256)) * 40 + n.to_bytes(4, "big"))
        else:
            body = "".join(f"def f{j}_{n}(x):\n    return x * {j} + {n}\n\n" for j in range(40))
            path.write_text(f'"""Module {i} of run {n}."""\n\n' + body)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", f"STORY-{n:03d}: ten files\n\nPlan-Cascade-Story: STORY-{n:03d}", cwd=work)
    sha = git("rev-parse", "HEAD", cwd=work)
    git("worktree", "remove", "--force", str(work), cwd=mirror.path)
    return sha


async def main(files: int, binary: int, latency: float, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        remote = make_remote(tmp)
        fake = FakeGitHub(api_url="http://127.0.0.1", latency=latency)
        fake.add_repo(REPO, clone_url=f"file://{remote}")
        with serve(fake) as api:
            throttle = Throttle(per_minute=80, per_hour=500, min_interval=1.0)
            port = token_port("ghs_bench", base_url=api, throttle=throttle, auto_retry=False)
            publisher = CommitPublisher(port, REPO, mode="api", default_branch="main")
            via_api = Mirror(root=tmp / "api", clone_url=f"file://{remote}", pusher=publisher)
            via_git = Mirror(root=tmp / "git", clone_url=f"file://{remote}")
            await via_api.fetch()
            await via_git.fetch()
            api_times, git_times, requests, writes = [], [], [], []
            for n in range(1, runs + 1):
                await asyncio.sleep(3)  # the throttle's burst refills between stories, as between agents
                branch = f"plan-cascade/{n}/story-001"
                local = story_commit(via_api, tmp, n, files=files, binary=binary)
                git("update-ref", f"refs/heads/{branch}", local, cwd=via_api.path)
                before, admitted = len(fake.requests), throttle.created_last_hour()
                start = time.perf_counter()
                head = await via_api.push(branch, expected_remote_sha=None)
                api_times.append(time.perf_counter() - start)
                sent = fake.requests[before:]
                requests.append((len(sent), sum(r.method != "GET" for r in sent)))
                writes.append(throttle.created_last_hour() - admitted)
                assert fake.verified(REPO, head) and head != local
                made_tree = git("rev-parse", f"{head}^{{tree}}", cwd=remote)
                assert made_tree == git("rev-parse", f"{local}^{{tree}}", cwd=via_api.path)
                other = f"plain/{n}"
                git("fetch", "-q", str(via_api.path), f"{local}:refs/heads/{other}", cwd=via_git.path)
                start = time.perf_counter()
                await via_git.push(other, expected_remote_sha=None)
                git_times.append(time.perf_counter() - start)
            delay = f"{latency * 1000:.0f} ms"
            print(f"{files} files ({binary} binary), GitHub answering after {delay}, {runs} runs")
            print(f"  API commit: median {statistics.median(api_times):.2f} s "
                  f"(min {min(api_times):.2f}, max {max(api_times):.2f})")  # fmt: skip
            print(f"    requests per push: {sorted(set(requests))} (all, of which writes); "
                  f"creations the throttle counted: {sorted(set(writes))}")  # fmt: skip
            print(f"  git push:   median {statistics.median(git_times):.2f} s (to a local bare remote)")
            print(f"  ratio: {statistics.median(api_times) / statistics.median(git_times):.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--binary", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.15)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.files, args.binary, args.latency, args.runs))
