"""End to end: the real `plan-cascade serve` process, a fake GitHub over HTTP, a bare git remote.

Deliveries are signed and posted as GitHub posts them; the assertions read what the fake
GitHub and the bare repository end up holding.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.state import PlanStatus
from bot.state_block import decode_state
from bot.testing.deliveries import encode, load_fixture, signed_headers
from bot.testing.fake_github import FakeGitHub, serve
from bot.testing.server_process import running_server
from tests.execution_support import agent_script, git, make_remote, remote_branches
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem

pytestmark = pytest.mark.e2e
REPO = "octo-org/shop"
INSTALLATION = 777
PRD = """Add greetings.

```prd
version: 1
title: Greetings
summary: Two independent files, then one that needs both.
stories:
  - id: STORY-001
    title: Hello file
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: World file
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Both
    depends_on: [STORY-001, STORY-002]
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
```
"""


class World:
    """The fake GitHub, the bare remote and the server process."""

    def __init__(self, tmp: Path, fake: FakeGitHub, api: str, url: str, remote: Path) -> None:
        self.tmp, self.fake, self.api, self.url, self.remote = tmp, fake, api, url, remote

    def post(self, event: str, payload: dict) -> httpx.Response:
        body = encode(payload)
        headers = signed_headers(body, secret=WEBHOOK_SECRET, event=event)
        return httpx.post(f"{self.url}/webhook", content=body, headers=headers, timeout=10)

    def wait(self, predicate, timeout: float = 60.0):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out; comments: {[c.body[:120] for c in self.fake.comments(REPO, 1)]}")

    def plan(self, number: int = 1):  # type: ignore[no-untyped-def]
        found = [c for c in self.fake.comments(REPO, number) if "plan-cascade:plan" in c.body]
        return (found[0], decode_state(found[0].body)) if found else (None, None)


def payload(kind: str, *, number: int, **fields: object) -> dict:
    data = copy.deepcopy(load_fixture(kind))
    data["repository"].update({"full_name": REPO, "name": "shop", "clone_url": "", "default_branch": "main"})
    data["repository"]["owner"]["login"] = "octo-org"
    data["installation"] = {"id": INSTALLATION}
    data["issue"]["number"] = number
    data["issue"].pop("pull_request", None)
    for key, value in fields.items():
        section, _, name = key.partition("__")
        if name:
            data[section][name] = value
        else:
            data[section] = value
    return data


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    remote = make_remote(tmp_path)
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    for login, role in [("maint", "maintain"), ("reader", "read")]:
        fake.set_permission(REPO, login, role)
    script = agent_script(tmp_path, "agent.sh", 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n')
    fake.set_file(
        REPO,
        ".github/plan-cascade.yml",
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        "  sandbox: none\ngates:\n  detect: false\n  custom:\n    - name: files\n"
        '      command: "grep -q done story-*.txt"\n',
    )
    with (
        serve(fake) as api,
        running_server(
            tmp_path, api_url=api, webhook_secret=WEBHOOK_SECRET, private_key_pem=rsa_private_key_pem()
        ) as (url, _proc),
    ):
        yield World(tmp_path, fake, api, url, remote)


def test_labelled_issue_to_pull_requests(world: World) -> None:
    world.fake.add_issue(REPO, title="Greetings", body=PRD)
    resp = world.post(
        "issues",
        payload(
            "issues.labeled.1",
            number=1,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        ),
    )
    assert resp.status_code == 202
    # Wait for a readable state, not just a comment: the fake may be mid-write when first seen.
    comment, state = world.wait(lambda: world.plan()[1] and world.plan())
    assert state.status == PlanStatus.AWAITING_APPROVAL
    assert "```mermaid" in comment.body
    world.fake.add_reaction(REPO, comment.id, "reader", "+1")  # does not count
    world.fake.add_reaction(REPO, comment.id, "maint", "+1")  # approves (polled)
    world.wait(lambda: world.plan()[1].status == PlanStatus.COMPLETED, timeout=120)
    _, state = world.plan()
    assert [(a.user, a.via) for a in state.approvals] == [("maint", "reaction")]
    pulls = sorted(world.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert [(p.head_ref, p.base_ref) for p in pulls] == [
        ("plan-cascade/1/batch-1", "main"),
        ("plan-cascade/1/batch-2", "plan-cascade/1/batch-1"),
    ]
    assert "Closes #1" in world.fake.repo(REPO).issues[pulls[-1].number].body
    assert "Closes #1" not in world.fake.repo(REPO).issues[pulls[0].number].body
    assert {"plan-cascade/1/batch-1", "plan-cascade/1/batch-2"} <= set(remote_branches(world.remote))
    assert git("show", "plan-cascade/1/batch-2:story-003.txt", cwd=world.remote) == "done"
    checks = [r.json["name"] for r in world.fake.requests_to("POST", rf"/api/v3/repos/{REPO}/check-runs")]
    assert {"plan-cascade / STORY-001 / files", "plan-cascade / STORY-003 / files", "plan-cascade"} <= set(
        checks
    )


def test_unhappy_paths(world: World) -> None:
    world.fake.add_issue(REPO, title="Greetings", body=PRD)
    labeled = payload(
        "issues.labeled.1",
        number=1,
        label={"name": "plan-cascade"},
        sender={"login": "maint", "type": "User"},
    )
    # A forged signature is refused and changes nothing.
    body = encode(labeled)
    headers = signed_headers(body, secret="not-the-secret", event="issues")
    assert httpx.post(f"{world.url}/webhook", content=body, headers=headers).status_code == 401
    # A plan with a cycle gets the cycle named.
    world.fake.add_issue(
        REPO,
        title="Cyclic",
        body=PRD.replace("depends_on: [STORY-001, STORY-002]", "depends_on: [STORY-003]"),
    )
    world.post(
        "issues",
        payload(
            "issues.labeled.1",
            number=2,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        ),
    )
    world.wait(lambda: any("STORY-003 → STORY-003" in c.body for c in world.fake.comments(REPO, 2)))
    # A read-only user's approve is refused.
    world.post("issues", labeled)
    world.wait(lambda: world.plan()[1])
    comment = payload(
        "issue_comment.created.1",
        number=1,
        comment={
            "id": 5550001,
            "body": "/plan-cascade approve",
            "author_association": "COLLABORATOR",
            "user": {"login": "reader", "type": "User"},
        },
        sender={"login": "reader", "type": "User"},
    )
    world.post("issue_comment", comment)
    world.wait(lambda: any("write access" in c.body for c in world.fake.comments(REPO, 1)))
    assert world.plan()[1].status == PlanStatus.AWAITING_APPROVAL
    # An invalid config is reported on the issue and nothing runs.
    world.fake.set_file(REPO, ".github/plan-cascade.yml", "execution:\n  stacking: diagonal\n")
    world.fake.add_issue(REPO, title="Another", body=PRD)
    world.post(
        "issues",
        payload(
            "issues.labeled.1",
            number=3,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        ),
    )
    world.wait(lambda: any("execution.stacking" in c.body for c in world.fake.comments(REPO, 3)))
    assert world.plan(3) == (None, None)
