"""`plan-cascade demo`: the whole local flow with the example agent, no App and no key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.execution_support import git
from tests.local.local_support import branches, cli


def test_the_demo_completes_and_says_where_its_branches_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("demo", "--dir", str(tmp_path)) == 0

    out = capsys.readouterr().out
    assert "example agent: writes canned changes; not an AI" in out
    match = re.search(r"^demo repository: (\S+)$", out, re.MULTILINE)
    assert match, out
    repo = Path(match.group(1))
    assert repo.parent.parent == tmp_path
    found = branches(repo)
    assert [b.rsplit("/", 1)[1] for b in found] == ["batch-1", "batch-2", "batch-3"]
    assert all(f"git push origin {b}" in out for b in found)
    assert "5 passed, 0 failed, 0 skipped" in out
    assert "✗ STORY-002 verification failed" in out and "STORY-002 attempt 2" in out, "a real gate, a retry"
    final = found[-1]
    assert git("show", f"{final}:textkit/cli.py", cwd=repo).startswith('"""`python -m textkit.cli')
    assert "## Usage" in git("show", f"{final}:README.md", cwd=repo)
    assert git("symbolic-ref", "--short", "HEAD", cwd=repo) == "main"
    assert git("status", "--porcelain", cwd=repo) == ""
