"""`plan-cascade run|resume|status` on real repositories, driven like a user would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.execution_support import agent_script, git
from tests.local.local_support import (
    CHAIN_OF_THREE_BATCHES,
    WRITE_DONE,
    branches,
    cli,
    make_user_repo,
    prd,
    script_config,
)


@pytest.fixture(autouse=True)
def _unconfined(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count agent calls in a file outside the worktree, which the sandbox forbids
    (containment has its own tests): they run with PLAN_CASCADE_SANDBOX=off."""
    monkeypatch.setenv("PLAN_CASCADE_SANDBOX", "off")


def _counting_agent(tmp: Path, body: str = WRITE_DONE) -> tuple[Path, Path]:
    calls = tmp / "calls.txt"
    return agent_script(tmp, "agent.sh", f'echo "$1" >> {calls}\n' + body), calls


def _calls(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _run_file(repo: Path) -> dict:  # type: ignore[type-arg]
    (path,) = (repo / ".git" / "plan-cascade" / "runs").glob("*.json")
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_three_batches_complete_and_land_as_branches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, calls = _counting_agent(tmp_path)
    repo = make_user_repo(tmp_path, config=script_config(script))
    git("init", "-q", "--bare", str(tmp_path / "remote.git"), cwd=tmp_path)
    git("remote", "add", "origin", str(tmp_path / "remote.git"), cwd=repo)
    (repo / "notes.txt").write_text("untracked work in progress\n")  # untracked files do not count as dirty
    prd_file = tmp_path / "prd.yaml"
    prd_file.write_text(prd(CHAIN_OF_THREE_BATCHES, title="Three batches: of files!"))
    main_before = git("rev-parse", "main", cwd=repo)

    code = cli("run", "--repo", str(repo), "--prd", str(prd_file), "--yes")

    out, err = capsys.readouterr()
    assert code == 0, out + err
    found = branches(repo)
    assert len(found) == 3 and all(b.startswith("plan-cascade/local-three-batches-of-files-") for b in found)
    prefix = found[0].rsplit("/", 1)[0]
    assert found == [f"{prefix}/batch-1", f"{prefix}/batch-2", f"{prefix}/batch-3"]
    assert sorted(_calls(calls)) == ["STORY-001", "STORY-002", "STORY-003", "STORY-004"]
    log1 = git("log", "--format=%s", f"{prefix}/batch-1", cwd=repo).splitlines()
    assert {"STORY-001: Write story-001.txt", "STORY-002: Write story-002.txt"} <= set(log1)
    assert "Merge STORY-001 into batch 1" in log1 and "STORY-003: Write story-003.txt" not in log1
    log3 = git("log", "--format=%s", f"{prefix}/batch-3", cwd=repo).splitlines()
    assert log3[0] == "Merge STORY-004 into batch 3" and "Merge STORY-003 into batch 2" in log3
    assert git("show", f"{prefix}/batch-3:story-004.txt", cwd=repo) == "done"
    assert git("merge-base", "--is-ancestor", f"{prefix}/batch-2", f"{prefix}/batch-3", cwd=repo) == ""
    # The user's branch, checkout and files are untouched.
    assert git("rev-parse", "main", cwd=repo) == main_before
    assert git("symbolic-ref", "--short", "HEAD", cwd=repo) == "main"
    assert git("status", "--porcelain", cwd=repo) == "?? notes.txt"
    assert not (repo / "story-001.txt").exists()
    assert f"git push origin {prefix}/batch-1" in out
    assert f"gh pr create --head {prefix}/batch-2 --base {prefix}/batch-1" in out
    pushes = [line.split() for line in out.splitlines() if line.startswith("  git push ")]
    assert len(pushes) == 3
    for push in pushes:  # they work when copied, in the repository
        subprocess.run(push, cwd=repo, check=True, capture_output=True)
    assert git("rev-parse", f"{prefix}/batch-3", cwd=tmp_path / "remote.git") == git(
        "rev-parse", f"{prefix}/batch-3", cwd=repo
    )
    assert "4 passed, 0 failed, 0 skipped" in out
    record = _run_file(repo)
    assert record["state"]["status"] == "completed" and record["branch_prefix"] == prefix
    assert not list((repo / ".git" / "plan-cascade" / "worktrees").glob("*/story-*")), "worktrees removed"


def test_a_failing_gate_is_retried_then_its_dependents_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = 'id=$(echo "$1" | tr A-Z a-z)\nif [ "$1" = STORY-001 ]; then echo nope > "$2/$id.txt"; else ' + (
        'echo done > "$2/$id.txt"; fi\n'
    )
    script, calls = _counting_agent(tmp_path, body)
    repo = make_user_repo(
        tmp_path, config=script_config(script, "gates:\n  detect: false\n  strict: true\n  max_retries: 1\n")
    )
    prd_file = tmp_path / "prd.yaml"
    prd_file.write_text(prd([("STORY-001", []), ("STORY-002", ["STORY-001"]), ("STORY-003", [])]))

    code = cli("run", "--repo", str(repo), "--prd", str(prd_file), "--yes")

    out = capsys.readouterr().out
    assert code == 1, out
    assert _calls(calls).count("STORY-001") == 2, "tried, then retried once"
    assert "STORY-002" not in _calls(calls)
    assert "✗ STORY-001 failed: gates still failing after 2 attempt(s): verification" in out
    assert "STORY-002 skipped: depends on STORY-001, which failed" in out
    assert "1 passed, 1 failed, 1 skipped" in out
    (batch1,) = branches(repo)
    assert batch1.endswith("/batch-1")
    assert git("show", f"{batch1}:story-003.txt", cwd=repo) == "done"
    assert "story-001.txt" not in git("ls-tree", "--name-only", batch1, cwd=repo)
    assert _run_file(repo)["state"]["status"] == "failed"

    assert cli("resume", "--repo", str(repo)) == 1, "resume retries the failed story (it fails again)"
    assert "1 passed, 1 failed, 1 skipped" in capsys.readouterr().out
    assert _calls(calls).count("STORY-001") == 4 and _calls(calls).count("STORY-003") == 1


def test_approve_batch_runs_only_the_first_batch_then_resume_runs_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, calls = _counting_agent(tmp_path)
    repo = make_user_repo(tmp_path, config=script_config(script))
    prd_file = tmp_path / "prd.yaml"
    prd_file.write_text(prd(CHAIN_OF_THREE_BATCHES))

    assert cli("run", "--repo", str(repo), "--prd", str(prd_file), "--approve-batch", "1") == 0

    out = capsys.readouterr().out
    assert sorted(_calls(calls)) == ["STORY-001", "STORY-002"]
    (batch1,) = branches(repo)
    assert batch1.endswith("/batch-1")
    assert "awaiting_approval" in out and "Resume with: plan-cascade resume" in out
    batch1_sha = git("rev-parse", batch1, cwd=repo)

    assert cli("status", "--repo", str(repo)) == 0
    status = capsys.readouterr().out
    assert "awaiting_approval" in status and "Story files" in status

    assert cli("resume", "--repo", str(repo), "--yes") == 0

    out = capsys.readouterr().out
    assert sorted(_calls(calls)) == ["STORY-001", "STORY-002", "STORY-003", "STORY-004"], "nothing redone"
    assert len(branches(repo)) == 3
    assert git("rev-parse", batch1, cwd=repo) == batch1_sha, "a finished batch is not rebuilt"
    assert "4 passed" in out
    assert cli("resume", "--repo", str(repo), "--yes") == 2
    assert "no unfinished run" in capsys.readouterr().err


def test_a_batch_branch_changed_by_hand_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, _ = _counting_agent(tmp_path)
    repo = make_user_repo(tmp_path, config=script_config(script))
    prd_file = tmp_path / "prd.yaml"
    prd_file.write_text(prd(CHAIN_OF_THREE_BATCHES))
    assert cli("run", "--repo", str(repo), "--prd", str(prd_file), "--approve-batch", "1") == 0
    (batch1,) = branches(repo)
    tree = git("rev-parse", f"{batch1}^{{tree}}", cwd=repo)
    mine = git("commit-tree", tree, "-p", batch1, "-m", "my own fix", cwd=repo)
    git("update-ref", f"refs/heads/{batch1}", mine, cwd=repo)
    capsys.readouterr()

    assert cli("resume", "--repo", str(repo), "--yes") == 0

    out = capsys.readouterr().out
    assert f"{batch1} was changed in {repo} since Plan Cascade wrote it: left as it is" in out
    assert git("rev-parse", batch1, cwd=repo) == mine
    assert len(branches(repo)) == 3, "the other batches still land"
