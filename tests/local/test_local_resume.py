"""An interrupted `plan-cascade run` (SIGKILL or SIGTERM) resumes without redoing finished work."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.execution_support import agent_script, git
from tests.local.local_support import WRITE_DONE, branches, cli, make_user_repo, prd, script_config

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "bot.cli", "--env-file", "/nonexistent/.env"]


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_an_interrupted_run_resumes_without_redoing_finished_stories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sig: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAN_CASCADE_SANDBOX", "off")  # for the in-process `resume` below
    calls, hold, pid_file = tmp_path / "calls.txt", tmp_path / "hold", tmp_path / "agent.pid"
    hold.write_text("x")
    script = agent_script(
        tmp_path,
        "agent.sh",
        f'echo "$1" >> {calls}\n'
        f'if [ "$1" = STORY-002 ] && [ -f {hold} ]; then echo $$ > {pid_file}; sleep 120; fi\n' + WRITE_DONE,
    )
    repo = make_user_repo(tmp_path, config=script_config(script))
    prd_file = tmp_path / "prd.yaml"
    prd_file.write_text(prd([("STORY-001", []), ("STORY-002", ["STORY-001"]), ("STORY-003", ["STORY-002"])]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAN_CASCADE_")}
    env["PLAN_CASCADE_SANDBOX"] = "off"  # the agent's call log and pid file live outside its worktree
    proc = subprocess.Popen(
        [*CLI, "run", "--repo", str(repo), "--prd", str(prd_file), "--yes"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    agent_pid = 0
    try:
        _wait_for(pid_file)  # STORY-002 runs only after STORY-001 passed and batch 1 was published
        agent_pid = int(pid_file.read_text())
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        if sig == signal.SIGTERM:
            assert proc.returncode == 130, out
            assert "interrupted: resume with `plan-cascade resume" in out
            time.sleep(0.2)
            assert not _alive(agent_pid), "SIGTERM stops the agent's process group"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(agent_pid), signal.SIGKILL)  # SIGKILL leaves the agent behind: clean up
    assert [b.rsplit("/", 1)[1] for b in branches(repo)] == ["batch-1"]
    hold.unlink()

    assert cli("resume", "--repo", str(repo)) == 0

    out = capsys.readouterr().out
    assert "resuming run" in out and "3 passed" in out
    assert calls.read_text().split() == ["STORY-001", "STORY-002", "STORY-002", "STORY-003"]
    assert [b.rsplit("/", 1)[1] for b in branches(repo)] == ["batch-1", "batch-2", "batch-3"]
    batch3 = branches(repo)[-1]
    assert git("show", f"{batch3}:story-003.txt", cwd=repo) == "done"
    assert git("status", "--porcelain", cwd=repo) == ""
