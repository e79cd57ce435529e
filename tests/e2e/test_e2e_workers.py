"""Several workers on one host, one data directory, one PostgreSQL queue (issue #38): the real
`serve --no-workers` and two real `plan-cascade worker` processes run three plans; one worker is
killed with SIGKILL while its agent runs and a third worker starts. The starting worker kills what
the dead one left running and nothing of the live one: every plan completes, and every agent the
surviving worker started runs to its end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus
from bot.procinfo import start_time
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_model import now_iso
from bot.testing.fake_github_serve import serve
from bot.testing.server_process import running_server, running_worker, server_env
from tests.e2e.world import INSTALLATION, REPO, World, payload
from tests.execution_support import agent_script, git, make_remote
from tests.support import WEBHOOK_SECRET, postgres_database, rsa_private_key_pem

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]
PLANS = (1, 2, 3)
PRD = """One story.

```prd
version: 1
title: Wait
summary: One story whose agent waits for the test.
stories:
  - id: STORY-001
    title: Wait, then write
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
```
"""


@pytest.fixture
async def database_url() -> AsyncIterator[str]:
    async with postgres_database() as url:
        yield url


class Agents:
    """The agents' own account of themselves: `started.<pid>` and `finished.<pid>` files, each
    holding the agent's worktree; an agent waits for `release` before it writes its file."""

    def __init__(self, tmp: Path) -> None:
        self.marks, self.release = tmp / "marks", tmp / "release"
        self.marks.mkdir()
        self.script = agent_script(
            tmp,
            "waiting.sh",
            f'echo "$2" > {self.marks}/started.$$\n'
            f"while [ ! -e {self.release} ]; do sleep 0.1; done\n"
            'echo done > "$2/$(echo "$1" | tr A-Z a-z).txt"\n'
            f'echo "$2" > {self.marks}/finished.$$\n',
        )
        self.starts: dict[int, int | None] = {}

    def started(self) -> list[int]:
        found = sorted(int(p.name.split(".")[1]) for p in self.marks.glob("started.*"))
        for pid in found:
            self.starts.setdefault(pid, start_time(pid))
        return found

    def finished(self) -> list[int]:
        return sorted(int(p.name.split(".")[1]) for p in self.marks.glob("finished.*"))

    def plan_of(self, pid: int) -> int:
        """The issue whose worktree the agent works in (`…/worktrees/<repo>/<issue>/…`)."""
        parts = Path((self.marks / f"started.{pid}").read_text().strip()).parts
        return int(parts[parts.index("worktrees") + 2])

    def alive(self, pid: int) -> bool:
        """Still the agent's process and not a zombie."""
        return self.starts.get(pid) is not None and start_time(pid) == self.starts[pid]


def parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def owner(pid: int, candidates: set[int]) -> int | None:
    """Which of `candidates` the process descends from."""
    while pid > 1:
        if pid in candidates:
            return pid
        pid = parent(pid)
    return None


def approve(number: int) -> dict:
    return payload(
        "issue_comment.created.1",
        number=number,
        comment={
            "id": 7770000 + number,
            "body": "/plan-cascade approve",
            "author_association": "MEMBER",
            "user": {"login": "maint", "type": "User"},
            "created_at": now_iso(),
        },
        sender={"login": "maint", "type": "User"},
        installation={"id": INSTALLATION},
    )


def test_a_starting_worker_kills_only_a_dead_siblings_agents(tmp_path: Path, database_url: str) -> None:
    agents = Agents(tmp_path)
    remote = make_remote(tmp_path)
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    fake.set_permission(REPO, "maint", "maintain")
    fake.set_file(
        REPO,
        ".github/plan-cascade.yml",
        f'agent:\n  default: script\n  commands:\n    script: "{agents.script} {{story_id}} {{worktree}}"\n'
        "gates:\n  detect: false\n  strict: true\n  custom:\n    - name: files\n"
        '      command: "grep -q done story-001.txt"\n',
    )
    settings = {
        "PLAN_CASCADE_DATABASE_URL": database_url,
        "PLAN_CASCADE_WORKERS": "1",  # one job at a time: each worker runs one plan's agent
        "PLAN_CASCADE_REDELIVERY_SECONDS": "0",
        # Unconfined, an agent outlives its killed worker (and sees the release file): the
        # starting worker's reaper has to tell the dead worker's agent from the live one's.
        "PLAN_CASCADE_SANDBOX": "off",
    }
    common = {"webhook_secret": WEBHOOK_SECRET, "private_key_pem": rsa_private_key_pem()}
    with serve(fake) as api:
        env = server_env(tmp_path, api_url=api, extra_env=settings, **common)
        server = running_server(
            tmp_path, api_url=api, serve_args=["--no-workers"], extra_env=settings, **common
        )
        with (
            server as (url, _),
            running_worker(tmp_path, env=env, name="worker-a") as first,
            running_worker(tmp_path, env=env, name="worker-b") as second,
        ):
            world = World(tmp_path, fake, api, url, remote)
            for number in PLANS:
                fake.add_issue(REPO, title=f"Wait {number}", body=PRD)
                labeled = payload(
                    "issues.labeled.1",
                    number=number,
                    label={"name": "plan-cascade"},
                    sender={"login": "maint"},
                )
                assert world.post("issues", labeled).status_code == 202
            for number in PLANS:
                world.wait(lambda n=number: world.plan(n)[1])  # type: ignore[misc]
                assert world.post("issue_comment", approve(number)).status_code == 202
            running = world.wait(lambda: len(agents.started()) == 2 and agents.started(), timeout=120)
            owners = {pid: owner(pid, {first.pid, second.pid}) for pid in running}
            assert sorted(owners.values()) == sorted([first.pid, second.pid]), owners
            doomed = next(pid for pid in running if owners[pid] == first.pid)
            spared = next(pid for pid in running if owners[pid] == second.pid)
            first.kill()  # mid-story: its agent waits for the release file
            first.wait()
            with running_worker(tmp_path, env=env, name="worker-c"):
                # Worker C is up: its start-up sweeps are over.
                world.wait(lambda: not agents.alive(doomed), timeout=30)
                assert agents.alive(spared), "the starting worker killed a live worker's agent"
                agents.release.touch()
                for number in PLANS:
                    world.wait(
                        lambda n=number: world.plan(n)[1].status == PlanStatus.COMPLETED,  # type: ignore[misc]
                        timeout=180,
                    )
    assert spared in agents.finished(), "the surviving worker's agent did not run to its end"
    assert set(agents.started()) - {doomed} == set(agents.finished()), "a live worker's agent was killed"
    assert doomed not in agents.finished(), "the dead worker's agent wrote after its worker died"
    assert agents.plan_of(spared) != agents.plan_of(doomed)
    assert {agents.plan_of(pid) for pid in agents.finished()} == set(PLANS)
    for number in PLANS:
        assert git("show", f"plan-cascade/{number}/batch-1:story-001.txt", cwd=remote) == "done"
