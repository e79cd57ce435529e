"""Running `plan-cascade action` as GitHub Actions would: event files, env, a fake GitHub
whose repository clones from a real bare remote. Shared by the tests in this folder."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

from bot.action.inputs import ACTIONS_BOT
from bot.testing.deliveries import load_fixture
from bot.testing.fake_github import FakeGitHub
from tests.execution_support import agent_script, git, make_remote
from tests.harness import REPO, commented, labeled

TOKEN = "ghs_actions_test_token"
_runs = itertools.count(7000)

PRD = """Add two files.

```prd
version: 1
title: Two files
summary: Write two files, then a third that needs the first.
stories:
  - id: STORY-001
    title: First file
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: Second file
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Third file
    depends_on: [STORY-001]
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
```
"""

WRITE_FILE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'


def repo_config(script: Path, extra: str = "", *, gates: str = "") -> str:
    """`.github/plan-cascade.yml` whose default agent is the script."""
    return (
        "agent:\n  default: script\n  commands:\n"
        f'    script: "{script} {{story_id}} {{worktree}}"\n  sandbox: none\n'
        "gates:\n  detect: false\n  strict: true\n" + gates + extra
    )


class ActionWorld:
    """A fake GitHub, a bare remote and the env of each simulated workflow run."""

    def __init__(
        self, tmp: Path, *, config_extra: str = "", gates: str = "", fake: FakeGitHub | None = None
    ) -> None:
        self.tmp = tmp
        self.remote = make_remote(tmp)
        self.fake = fake or FakeGitHub(api_url="http://github.test", actor=ACTIONS_BOT)
        self.fake.add_repo(REPO, clone_url=f"file://{self.remote}")
        self.fake.set_permission(REPO, "maint", "maintain")
        self.script = agent_script(tmp, "write.sh", WRITE_FILE)
        self.fake.set_file(
            REPO, ".github/plan-cascade.yml", repo_config(self.script, config_extra, gates=gates)
        )
        self.issue = self.fake.add_issue(REPO, title="Two files", body=PRD, labels=["plan-cascade"])

    def env(self, event: str, payload: dict[str, Any], **extra: str) -> dict[str, str]:
        """The environment of one fresh workflow run (own RUNNER_TEMP, own output file)."""
        run = next(_runs)
        folder = self.tmp / f"run-{run}"
        folder.mkdir()
        event_path = folder / "event.json"
        event_path.write_text(json.dumps(payload))
        output = folder / "output.txt"
        output.write_text("")
        return {
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": self.fake.api_url,
            "GITHUB_SERVER_URL": self.fake.html_url,
            "GITHUB_RUN_ID": str(run),
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_OUTPUT": str(output),
            "RUNNER_TEMP": str(folder / "tmp"),
            "PLAN_CASCADE_GITHUB_TOKEN": TOKEN,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            **extra,
        }

    def story_env(self, inputs: dict[str, str], story: str, **extra: str) -> dict[str, str]:
        """A matrix job of a dispatched batch, as the template workflow starts it."""
        return self.env(
            "workflow_dispatch",
            {"inputs": inputs},
            PLAN_CASCADE_MODE="run-story",
            PLAN_CASCADE_ISSUE=inputs["issue"],
            PLAN_CASCADE_BATCH=inputs["batch"],
            PLAN_CASCADE_STORY=story,
            PLAN_CASCADE_PLAN_HASH=inputs["plan_hash"],
            PLAN_CASCADE_DISPATCH_ID=inputs["dispatch_id"],
            **extra,
        )

    def plan_comments(self, number: int = 1) -> list[Any]:
        return [c for c in self.fake.comments(REPO, number) if "<!-- plan-cascade:plan -->" in c.body]

    def remote_branches(self) -> list[str]:
        out = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=self.remote)
        return sorted(out.splitlines())

    def push_story(self, branch: str, files: dict[str, str]) -> str:
        """Push a commit on `branch` (from main) to the remote, as a runner would; returns its sha."""
        work = self.tmp / f"clone-{branch.replace('/', '-')}"
        git("clone", "-q", str(self.remote), str(work), cwd=self.tmp)
        git("checkout", "-q", "-b", branch, cwd=work)
        for name, text in files.items():
            (work / name).write_text(text)
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", f"work on {branch}", cwd=work)
        git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work)
        return git("rev-parse", "HEAD", cwd=work)


def outputs(env: dict[str, str]) -> dict[str, str]:
    """Parse the `$GITHUB_OUTPUT` file (heredoc form)."""
    values: dict[str, str] = {}
    lines = Path(env["GITHUB_OUTPUT"]).read_text().splitlines()
    i = 0
    while i < len(lines):
        name, _, mark = lines[i].partition("<<")
        end = lines.index(mark, i + 1)
        values[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return values


def without_installation(payload: dict[str, Any]) -> dict[str, Any]:
    """Actions payloads name no App installation."""
    payload = copy.deepcopy(payload)
    payload.pop("installation", None)
    return payload


def labeled_event(world: ActionWorld, sender: str = "maint") -> dict[str, Any]:
    return without_installation(
        labeled(number=world.issue.number, sender=sender, clone_url=f"file://{world.remote}")
    )


def comment_event(world: ActionWorld, body: str, user: str = "maint") -> dict[str, Any]:
    return without_installation(
        commented(
            number=world.issue.number,
            body=body,
            user=user,
            association="MEMBER",
            clone_url=f"file://{world.remote}",
        )
    )


def pr_closed_event(world: ActionWorld, number: int, *, merged: bool = True) -> dict[str, Any]:
    """`pull_request.closed` of a PR the fake holds, from GitHub's example payload."""
    payload = without_installation(load_fixture("pull_request.closed.1"))
    pull = world.fake.repo(REPO).pulls[number]
    owner, name = REPO.split("/")
    payload["repository"].update({"full_name": REPO, "name": name, "default_branch": "main"})
    payload["repository"]["owner"]["login"] = owner
    payload["number"] = number
    payload["pull_request"].update(
        {"number": number, "merged": merged, "body": world.fake.repo(REPO).issues[number].body}
    )
    payload["pull_request"]["head"].update({"ref": pull.head_ref, "sha": pull.head_sha})
    payload["sender"].update({"login": "maint", "type": "User"})
    return payload
