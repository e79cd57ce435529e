"""The end-to-end world: the real `plan-cascade serve` process, a fake GitHub over HTTP, a bare remote.

Shared by the e2e tests (the `world` fixture lives in conftest.py).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from bot.plan.state_block import decode_state
from bot.testing.deliveries import encode, load_fixture, signed_headers
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_serve import serve
from bot.testing.server_process import free_port, running_server
from tests.execution_support import agent_script, make_remote
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem

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
        if self.fake.enterprise:  # what an Enterprise Server sends names its own host
            text = json.dumps(payload).replace("https://api.github.com", self.api)
            payload = json.loads(text.replace("https://github.com", self.fake.urls.html))
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

    def run_greetings(self) -> None:
        """Label issue #1 holding PRD, approve its plan with a maintainer's 👍, wait until it completes."""
        from bot.plan.state import PlanStatus

        self.fake.add_issue(REPO, title="Greetings", body=PRD)
        labeled = payload(
            "issues.labeled.1",
            number=1,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        )
        assert self.post("issues", labeled).status_code == 202
        comment, _ = self.wait(lambda: self.plan()[1] and self.plan())
        self.fake.add_reaction(REPO, comment.id, "maint", "+1")
        self.wait(lambda: self.plan()[1].status == PlanStatus.COMPLETED, timeout=120)

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


def make_world(
    tmp_path: Path,
    *,
    extra_env: dict[str, str] | None = None,
    before_start: Callable[[FakeGitHub], object] | None = None,
    enterprise: bool = False,
) -> Iterator[World]:
    """The world; `before_start(fake)` runs once GitHub is up and before the server starts;
    `enterprise`: GitHub is an Enterprise Server (REST under `/api/v3`, GraphQL at `/api/graphql`)."""
    remote = make_remote(tmp_path)
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3", enterprise=enterprise)
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    for login, role in [("maint", "maintain"), ("reader", "read")]:
        fake.set_permission(REPO, login, role)
    script = agent_script(tmp_path, "agent.sh", 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n')
    fake.set_file(
        REPO,
        ".github/plan-cascade.yml",
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        "  sandbox: none\ngates:\n  detect: false\n  strict: true\n  custom:\n    - name: files\n"
        '      command: "grep -q done story-*.txt"\n',
    )
    port = free_port()  # GitHub's webhook points there before the server listens
    fake.hooks.url, fake.hooks.target, fake.hooks.secret = (
        f"http://127.0.0.1:{port}/webhook",
        "network",
        WEBHOOK_SECRET,
    )
    with serve(fake) as api:
        if before_start is not None:
            before_start(fake)
        with running_server(
            tmp_path,
            api_url=api,
            webhook_secret=WEBHOOK_SECRET,
            private_key_pem=rsa_private_key_pem(),
            extra_env=extra_env,
            port=port,
        ) as (url, _proc):
            yield World(tmp_path, fake, api, url, remote)
