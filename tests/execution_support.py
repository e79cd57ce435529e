"""Real git remotes, command agents written as scripts, and Runs wired for tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from bot.agent.registry import AgentRegistry
from bot.config.load import load_repo_config
from bot.plan import parse_prd
from bot.plan.approval import add_approval
from bot.plan.state import PlanState, new_plan
from bot.testing.recording import RecordingReporter
from bot.workspace.mirror import Mirror

GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}


def git(*args: str, cwd: Path, email: str | None = None) -> str:
    """Run git as a developer would (own identity, or `email`'s; no global config)."""
    env = GIT_ENV if email is None else {**GIT_ENV, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_EMAIL": email}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_remote(tmp: Path, files: dict[str, str] | None = None) -> Path:
    """A bare repository with one commit on `main`."""
    work = tmp / "seed"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    for name, text in (files or {"README.md": "# demo\n"}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "initial", cwd=work)
    bare = tmp / "remote.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp)
    return bare


def agent_script(tmp: Path, name: str, body: str) -> Path:
    """An executable bash script used as a `command` agent; `$1` is the story id."""
    path = tmp / "agents" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\nset -e\n" + body)
    path.chmod(0o755)
    return path


def counted(counter: Path) -> str:
    """A line of an agent script: which run of the script this is (1, 2, …) in `$n`, counted in
    the file `counter` (an attempt's number, when one story runs it)."""
    return f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}\n"


def config_for(script: Path, extra: str = "") -> Any:
    """A repo config whose default agent is the script (run in the worktree)."""
    gates = "" if "gates:" in extra else "gates:\n  detect: false\n  strict: true\n"
    return load_repo_config(
        f"""
agent:
  default: script
  commands:
    script: "{script} {{story_id}} {{worktree}}"
  sandbox: none
{gates}{extra}
"""
    )


def approved_state(prd_yaml: str, *, repo: str = "octo/demo", issue: int = 7) -> PlanState:
    """A plan approved by a maintainer."""
    from datetime import UTC, datetime

    from bot.plan.state import Approval

    prd = parse_prd(prd_yaml)
    state = new_plan(repo=repo, issue=issue, prd=prd, at=datetime(2026, 1, 1, tzinfo=UTC))
    approved, _ = add_approval(
        state,
        Approval(user="maint", at=datetime(2026, 1, 1, tzinfo=UTC), via="command", plan_hash=state.plan_hash),
    )
    return approved


def make_run(tmp: Path, remote: Path, state: PlanState, config: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
    """A Run against the bare remote with a recording reporter."""
    from bot.orchestration.run import Run

    data = tmp / "data"
    reporter = kwargs.pop("reporter", RecordingReporter())
    return Run(
        state=state,
        config=config,
        mirror=Mirror(root=data, clone_url=f"file://{remote}"),
        base_branch="main",
        branch_prefix=f"plan-cascade/{state.issue}",
        work_root=data / "worktrees",
        transcripts=data / "transcripts",
        agents=kwargs.pop("agents", AgentRegistry(None, config.agent.commands)),
        reporter=reporter,
        **kwargs,
    )


def remote_branches(remote: Path) -> list[str]:
    out = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=remote)
    return sorted(out.splitlines())


def prompt_logging_repo(
    harness: Any, tmp: Path, *, title: str, body: str, writes: str, config: str = ""
) -> Path:
    """The harness's repository on a real bare remote, issue #1 (`title`, `body`), a maintainer
    `maint`, and a command agent that appends each prompt (then `===`) to the returned log and
    runs `writes` (bash; `$2` is the worktree). `config` is added to `.github/plan-cascade.yml`."""
    from tests.harness import REPO

    remote = make_remote(tmp)
    harness.remote = remote
    harness.fake.repo(REPO).clone_url = f"file://{remote}"
    harness.fake.set_permission(REPO, "maint", "maintain")
    harness.fake.add_issue(REPO, title=title, body=body)
    prompts = tmp / "prompts.log"
    script = agent_script(tmp, "agent.sh", f'cat "$1" >> {prompts}\necho "===" >> {prompts}\n{writes}')
    harness.fake.set_file(
        REPO,
        ".github/plan-cascade.yml",
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{prompt_file}} {{worktree}}"\n'
        "  sandbox: none\ngates:\n  detect: false\n  strict: true\n  max_retries: 0\n" + config,
    )
    return prompts
