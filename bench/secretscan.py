"""What the secret scan before a push costs, on a 2,000-line change (issue #39's figure).

    .venv/bin/python bench/secretscan.py [--lines 2000] [--commits 3] [--runs 7]

A repository on a local bare remote; a story's worktree adds `--lines` lines of this
repository's own Python (real code: assignments, strings, long lines) over 20 files in
`--commits` commits, as the production code does (`stage_all`, then `commit_staged`). Timed,
median of `--runs`: the production scan (`outgoing_secrets`: `git log -p` of each commit, then
every rule and ten known server secrets), its two halves (reading the diff; scanning the
lines), and, as the baseline, the push of the same commits to the bare remote that the scan
precedes. The change holds no credential: the scan must find nothing (checked). Target: the
scan ≤ 250 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.network.secretscan import scan  # noqa: E402
from bot.workspace.mirror import Mirror  # noqa: E402
from bot.workspace.outgoing import commits_diff, outgoing_secrets, read_log  # noqa: E402
from bot.workspace.worktree import add_worktree, commit_staged, head_sha, stage_all  # noqa: E402
from tests.execution_support import git, make_remote  # noqa: E402


def source_lines(count: int) -> list[str]:
    """`count` lines of this repository's own code, in file order."""
    lines: list[str] = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        lines += path.read_text().splitlines()
        if len(lines) >= count:
            break
    return lines[:count]


async def timed(runs: int, action: Callable[[], Awaitable[object]]) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = await action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


async def main(lines: int, commits: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        remote = make_remote(tmp)
        mirror = Mirror(root=tmp / "data", clone_url=f"file://{remote}")
        await mirror.fetch()
        base = await mirror.resolve("refs/remotes/origin/main")
        wt = await add_worktree(
            mirror, branch="plan-cascade/1/story-001", base_ref=base, path=tmp / "wt", reset=True
        )
        code = source_lines(lines)
        per = len(code) // commits
        for n in range(commits):
            chunk = code[n * per : (n + 1) * per if n < commits - 1 else len(code)]
            for f in range(20 // commits + 1):
                part = chunk[f :: 20 // commits + 1]
                (wt.path / "src").mkdir(exist_ok=True)
                (wt.path / "src" / f"module_{n}_{f}.py").write_text("\n".join(part) + "\n")
            await stage_all(wt)
            await commit_staged(wt, message=f"part {n}", author_name="b", author_email="b@x", trailers={})
        head = await head_sha(wt)
        known = [secrets.token_urlsafe(32) for _ in range(10)]

        scan_s, found = await timed(
            runs, lambda: outgoing_secrets(wt, since=base, head=head, known=known, ignore=[])
        )
        read_s, diff = await timed(runs, lambda: commits_diff(wt, since=base, head=head))
        assert isinstance(diff, str)
        added, _ = read_log(diff)

        async def rules_only() -> object:
            return scan(added, known=known)

        rules_s, _ = await timed(runs, rules_only)

        pushes = []
        for _ in range(runs):
            start = time.perf_counter()
            await mirror.push("plan-cascade/1/story-001", expected_remote_sha=None, force=True)
            pushes.append(time.perf_counter() - start)
            git("update-ref", "-d", "refs/heads/plan-cascade/1/story-001", cwd=remote)
            subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=remote, check=True)
        push_s = statistics.median(pushes)

    assert found == [], f"the scan found credentials in plain code: {found}"
    print(f"change: {len(added):,} added lines in {commits} commits, {len(diff):,} bytes of diff")
    print(f"scan before the push (outgoing_secrets): {scan_s * 1000:.0f} ms  (target <= 250 ms)")
    print(f"  reading the diff (git log -p):          {read_s * 1000:.0f} ms")
    print(f"  the rules over the lines:               {rules_s * 1000:.0f} ms")
    print(f"baseline, the push to a local bare remote: {push_s * 1000:.0f} ms")
    print(f"scan / push = {scan_s / push_s:.2f}")


if __name__ == "__main__":
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.lines, args.commits, args.runs))
