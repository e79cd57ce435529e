"""Repository content cannot exhaust the server's memory: a push of about a megabyte that
prints hundreds of MB (a 200 MB blob of one repeated line, a tree listing 65,536 paths) is read
by the acceptance review's diff, by exploration's (and `ask`'s) read-only tools, and (checked out,
as a sparse file) by the built-in agent's read, each in a process of its own, and that process's
memory high-water mark stays within `BOUND_KB` of idle. What was cut is said in what the model
reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitbomb import Bomb, build

ROOT = Path(__file__).resolve().parents[1]
BOUND_KB = 100 * 1024
"""The most a step may raise the process's memory high-water mark (VmHWM) above idle."""


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Bomb:
    made = build(tmp_path_factory.mktemp("bomb") / "repo.git", big_bytes=200 * 2**20, levels=16)
    packed = sum(f.stat().st_size for f in made.path.rglob("*") if f.is_file())
    assert packed < 2 * 2**20, "the bomb should cost little on disk"
    return made


def measure(step: str, bomb: Bomb) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        [sys.executable, "-m", "tests.repo_memory_script", step, str(bomb.path), bomb.base, bomb.head],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_the_acceptance_reviews_diff_stays_within_the_bound(bomb: Bomb) -> None:
    found = measure("diff", bomb)
    grown = found["peak_kb"] - found["idle_kb"]
    assert grown < BOUND_KB, f"the diff raised memory by {grown // 1024} MB: {found}"
    assert found["seen"]["cut"] is True, found


def test_exploration_and_the_read_only_tools_stay_within_the_bound(bomb: Bomb) -> None:
    found = measure("explore", bomb)
    grown = found["peak_kb"] - found["idle_kb"]
    assert grown < BOUND_KB, f"exploring raised memory by {grown // 1024} MB: {found}"
    seen = found["seen"]
    assert seen.get("failed") is None and seen["error"] is None, seen
    first_read, deep_read, grep_all, grep_tree, glob = seen["observations"][:5]
    assert "longer than 4,194,304 bytes" in first_read
    assert "cannot be read" in deep_read  # line 4,000,000 is past what is read
    assert "grep stopped after" in grep_all and "grep stopped after" in grep_tree
    assert "the file list stopped at" in glob
    assert seen["instructions"] == {"AGENTS.md": 4000}
    assert 0 < seen["excerpts"]["big.txt"] <= 3000


def test_the_built_in_agents_read_of_a_huge_checked_out_file_stays_within_the_bound(bomb: Bomb) -> None:
    found = measure("agent-read", bomb)
    grown = found["peak_kb"] - found["idle_kb"]
    assert grown < BOUND_KB, f"reading raised memory by {grown // 1024} MB: {found}"
    first, deep = found["seen"]["observations"]
    assert first.endswith("[big.txt is longer than 4,194,304 bytes: lines after 200 cannot be read]")
    assert "   159\tall work" in deep and "[... 41 more lines: call read with offset=160]" in deep
