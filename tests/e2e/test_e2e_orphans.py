"""Processes die with the bot (issue #12, escape 4) and a restart picks up at once (issue #13): the
real server is killed with SIGKILL while an agent writes into its worktree; nothing of that agent
survives, the restarted server reclaims the dead worker's job without waiting for its lease, and
only the resumed run's work is committed and pushed, once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_model import now_iso
from bot.testing.fake_github_serve import serve
from bot.testing.server_process import running_server
from tests.e2e.world import INSTALLATION, REPO, World, payload
from tests.execution_support import agent_script, git, make_remote
from tests.processes import live_with_arg, unique_sleep
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem

pytestmark = pytest.mark.e2e
PRD = """One story.

```prd
version: 1
title: Lines
summary: One story that writes for a while.
stories:
  - id: STORY-001
    title: Write lines
    acceptance_criteria: ["out.txt has 150 lines written by one run of the agent"]
```
"""


def test_an_agent_dies_with_the_server_and_never_writes_into_the_resumed_run(tmp_path: Path) -> None:
    pause = unique_sleep().split(".")[1]  # a sleep argument only this agent uses: 0.1NNNN seconds
    script = agent_script(
        tmp_path,
        "writer.sh",
        'run="$RANDOM$RANDOM"\nfor i in $(seq 1 150); do echo "$run $i" >> "$2/out.txt"; '
        f"sleep 0.1{pause}; done\n",
    )
    remote = make_remote(tmp_path)
    git("config", "core.logAllRefUpdates", "always", cwd=remote)  # count pushes
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    fake.set_permission(REPO, "maint", "maintain")
    fake.set_file(
        REPO,
        ".github/plan-cascade.yml",
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        "gates:\n  detect: false\n  strict: true\n",
    )
    fake.add_issue(REPO, title="Lines", body=PRD)
    server = {
        "webhook_secret": WEBHOOK_SECRET,
        "private_key_pem": rsa_private_key_pem(),
        # The default 60 s lease: the restarted server must see that the job's worker died.
        "extra_env": {},
    }
    with serve(fake) as api:
        with running_server(tmp_path, api_url=api, **server) as (url, proc):  # type: ignore[arg-type]
            world = World(tmp_path, fake, api, url, remote)
            world.post(
                "issues",
                payload(
                    "issues.labeled.1", number=1, label={"name": "plan-cascade"}, sender={"login": "maint"}
                ),
            )
            world.wait(lambda: world.plan()[1])
            world.post("issue_comment", approve())
            out = world.wait(
                lambda: next((tmp_path / "data" / "worktrees").rglob("out.txt"), None), timeout=60
            )
            world.wait(lambda: len(out.read_text().splitlines()) >= 10)
            proc.kill()
            proc.wait()
            deadline = time.monotonic() + 5
            while live_with_arg(f"0.1{pause}") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert live_with_arg(f"0.1{pause}") == [], "the agent outlived the server"
        with running_server(tmp_path, api_url=api, **server) as (url, _proc):  # type: ignore[arg-type]
            world = World(tmp_path, fake, api, url, remote)
            # Well inside the 60 s lease: only the dead-worker reclaim can make it in time.
            world.wait(lambda: world.plan()[1].status == PlanStatus.COMPLETED, timeout=45)
    lines = git("show", "plan-cascade/1/batch-1:out.txt", cwd=remote).splitlines()
    assert len({line.split()[0] for line in lines}) == 1, "two runs of the agent wrote into one worktree"
    assert len(lines) == 150
    story = "plan-cascade/1/story-001"
    fmt = "--format=%(trailers:key=Plan-Cascade-Story,valueonly)"
    assert git("log", fmt, story, cwd=remote).split().count("STORY-001") == 1
    assert len(git("reflog", "show", "--format=%H", f"refs/heads/{story}", cwd=remote).split()) == 1


def approve() -> dict:
    return payload(
        "issue_comment.created.1",
        number=1,
        comment={
            "id": 7770001,
            "body": "/plan-cascade approve",
            "author_association": "MEMBER",
            "user": {"login": "maint", "type": "User"},
            "created_at": now_iso(),
        },
        sender={"login": "maint", "type": "User"},
        installation={"id": INSTALLATION},
    )
