"""`plan-cascade demo`: the whole local flow with the example agent, no App and no key."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.execution_support import git
from tests.local.local_support import branches, cli


def test_the_demo_completes_and_says_where_its_branches_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # A relative --dir that does not exist yet: made, and the example agent is still found.
    assert cli("demo", "--dir", "demos/first") == 0

    out = capsys.readouterr().out
    assert "example agent: writes canned changes; not an AI" in out
    match = re.search(r"^demo repository: (\S+)$", out, re.MULTILINE)
    assert match, out
    repo = Path(match.group(1))
    assert repo.parent.parent == tmp_path / "demos" / "first"
    found = branches(repo)
    assert [b.rsplit("/", 1)[1] for b in found] == ["batch-1", "batch-2", "batch-3"]
    # The demo repository has no remote: no push is offered, and what is offered works when copied.
    assert "git push" not in out and "gh pr create" not in out
    shown = [line.split() for line in out.splitlines() if line.startswith(f"  git -C {repo} log --stat ")]
    assert [cmd[-1] for cmd in shown] == [
        f"main..{found[0]}",
        f"{found[0]}..{found[1]}",
        f"{found[1]}..{found[2]}",
    ]
    for cmd in shown:
        assert (
            "Plan-Cascade-Story: STORY-"
            in subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        )
    assert "STORY-002 failed its first attempt on purpose" in out
    last = out.rstrip().splitlines()[-3:]  # it ends with the next step on the user's own repository
    assert last == [
        '  plan-cascade run "what to build, in a sentence"',
        f"or run a PRD you wrote, like {repo.parent / 'prd.yaml'}:",
        "  plan-cascade run --prd prd.yaml",
    ]
    assert "5 passed, 0 failed, 0 skipped" in out
    assert "✗ STORY-002 verification failed" in out and "STORY-002 attempt 2" in out, "a real gate, a retry"
    final = found[-1]
    assert git("show", f"{final}:textkit/cli.py", cwd=repo).startswith('"""`python -m textkit.cli')
    assert "## Usage" in git("show", f"{final}:README.md", cwd=repo)
    assert git("symbolic-ref", "--short", "HEAD", cwd=repo) == "main"
    assert git("status", "--porcelain", cwd=repo) == ""
