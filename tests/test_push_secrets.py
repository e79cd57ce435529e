"""No credential leaves in a push: a story's commits are scanned before they are pushed, a
finding undoes them and goes back to the agent, and a finding that survives the retries fails
the story with nothing pushed. The remote's object store is searched, not just its branches:
a commit pushed and then overwritten would still be there."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

import bot.workspace.mirror as mirror_module
import bot.workspace.worktree as worktree_module
from bot.network.secretscan import SERVER_RULE
from bot.orchestration.engine import execute
from bot.orchestration.secretgate import hold_back
from bot.plan.state import StoryStatus
from bot.redaction import MASK, register_secret
from bot.sandbox.confinement import Sandbox
from bot.workspace.worktree import Worktree, add_worktree, commit_staged, head_sha, stage_all
from tests.execution_support import (
    agent_script,
    approved_state,
    config_for,
    counted,
    git,
    make_remote,
    make_run,
)
from tests.support import CountingExecutor

ONE_STORY = """
version: 1
title: Settings
summary: Add a settings module.
stories:
  - id: STORY-001
    title: Settings module
    acceptance_criteria: ["settings.py exists"]
"""
AWS_KEY = "AKIA" + "Q3X7ZP2M4N6B8V1C"
GITHUB_TOKEN = "ghp_" + "1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ1"


def all_objects(remote: Path) -> str:
    """Every object the remote holds, referenced or not, as text."""
    return subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=remote,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", errors="replace")


def logging_agent(tmp: Path, body: str) -> Path:
    """A command agent (`$1` prompt file, `$2` worktree) that appends each prompt to prompts.log."""
    return agent_script(
        tmp, "agent.sh", f'cat "$1" >> {tmp}/prompts.log\necho "=====" >> {tmp}/prompts.log\n{body}'
    )


def config(script: Path, extra: str = "") -> object:
    cfg = config_for(script, extra)
    commands = {"script": f"{script} {{prompt_file}} {{worktree}}"}
    return cfg.model_copy(update={"agent": cfg.agent.model_copy(update={"commands": commands})})


def prompts(tmp: Path) -> list[str]:
    return (tmp / "prompts.log").read_text().split("=====\n")[:-1]


async def test_an_aws_key_is_never_pushed_and_the_retry_is_told_where_it_is(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    script = logging_agent(
        tmp_path,
        counted(counter) + 'echo "import os" > "$2/settings.py"\n'
        f'if [ $n -eq 1 ]; then echo \'AWS_ACCESS_KEY_ID = "{AWS_KEY}"\' >> "$2/settings.py"; '
        """else echo 'AWS_ACCESS_KEY_ID = os.environ["AWS_ACCESS_KEY_ID"]' >> "$2/settings.py"; fi\n""",
    )
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(ONE_STORY), config(script), sandbox=Sandbox(mode="off"))
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED and story.attempts == 2
    assert "os.environ" in git("show", "plan-cascade/7/story-001:settings.py", cwd=remote)
    assert AWS_KEY not in all_objects(remote)
    retry = prompts(tmp_path)[1]
    assert "settings.py:2: AWS Access Key (AKIA… (20 characters))" in retry
    assert AWS_KEY not in retry
    assert AWS_KEY not in git("log", "-p", "--all", cwd=run.mirror.path)  # nothing committed keeps it


async def test_a_github_token_that_stays_fails_the_story_and_nothing_is_pushed(tmp_path: Path) -> None:
    script = logging_agent(
        tmp_path,
        'echo "x = 1" > "$2/settings.py"\n'
        f'mkdir -p "$2/conf" && echo \'token: "{GITHUB_TOKEN}"\' > "$2/conf/ci.yml"\n',
    )
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(ONE_STORY), config(script), sandbox=Sandbox(mode="off"))
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.FAILED and story.attempts == 3
    assert story.reason is not None and "conf/ci.yml:1 (GitHub Token)" in story.reason
    assert "nothing was pushed" in story.reason and GITHUB_TOKEN not in story.reason
    assert git("for-each-ref", "--format=%(refname)", "refs/heads/plan-cascade", cwd=remote) == ""
    assert GITHUB_TOKEN not in all_objects(remote)
    assert story.commit is None
    seen = prompts(tmp_path)
    assert len(seen) == 3 and all("conf/ci.yml:1: GitHub Token" in p for p in seen[1:])


async def test_a_server_secret_is_caught_even_in_an_ignored_fixture(tmp_path: Path) -> None:
    server_secret = "correct-horse-battery-" + secrets.token_hex(6)  # no rule would see it
    register_secret(server_secret)
    counter = tmp_path / "count"
    script = logging_agent(
        tmp_path,
        counted(counter) + 'mkdir -p "$2/fixtures"\n'
        f'echo \'AWS = "{AWS_KEY}"\' > "$2/fixtures/aws.py"\n'  # a known fixture: ignored
        'echo "x = 1" > "$2/settings.py"\n'
        f'if [ $n -eq 1 ]; then echo "copied: {server_secret}" > "$2/fixtures/env.txt"; '
        'else rm "$2/fixtures/env.txt"; fi\n',  # the held-back change is still in the worktree
    )
    remote = make_remote(tmp_path)
    extra = "paths:\n  secret_scan_ignore: [fixtures/**]\n"
    run = make_run(
        tmp_path, remote, approved_state(ONE_STORY), config(script, extra), sandbox=Sandbox(mode="off")
    )
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED and story.attempts == 2
    objects = all_objects(remote)
    assert server_secret not in objects and AWS_KEY in objects  # the fixture went, the secret did not
    retry = prompts(tmp_path)[1]
    assert "fixtures/env.txt:1: a secret of the Plan Cascade server (its value is withheld)" in retry
    assert server_secret not in retry


async def test_a_credential_in_a_path_is_never_pushed(tmp_path: Path) -> None:
    """Issue #47, defect 4: an empty file named like a token adds no line, a rename none."""
    server_secret = "correct-horse-name-" + secrets.token_hex(6)
    register_secret(server_secret)
    script = logging_agent(
        tmp_path,
        'echo "x = 1" > "$2/settings.py"\n'
        f': > "$2/{GITHUB_TOKEN}"\n'  # an empty file: no line added
        f'mv "$2/README.md" "$2/notes-{server_secret}.md"\n',  # a rename: no line added
    )
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(ONE_STORY), config(script), sandbox=Sandbox(mode="off"))
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.FAILED and story.reason is not None  # was: passed, pushed
    assert f"{MASK} (the file's name) (GitHub Token)" in story.reason
    assert f"notes-{MASK}.md (the file's name) ({SERVER_RULE})" in story.reason
    assert GITHUB_TOKEN not in story.reason and server_secret not in story.reason
    objects = all_objects(remote)
    assert GITHUB_TOKEN not in objects and server_secret not in objects  # tree entries hold names
    retry = prompts(tmp_path)[1]  # the agent is told which name to change (it wrote it: it knows it)
    assert f"- {MASK} (the file's name): GitHub Token" in retry


SLACK_TOKEN = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
FIX_PRD = """One story.

```prd
version: 1
title: Greetings
summary: Add a greeting file.
stories:
  - id: STORY-001
    title: Hello file
    acceptance_criteria: ["story-001.txt exists"]
```
"""


async def test_a_review_fix_that_adds_a_token_is_not_pushed(tmp_path: Path) -> None:
    from tests.harness import REPO, Harness, commented

    script = agent_script(
        tmp_path,
        "fixer.sh",
        'echo done > "$2/story-001.txt"\n'
        f'if [ "$1" = FIX-001 ]; then echo "SLACK_TOKEN={SLACK_TOKEN}" > "$2/notify.env"; fi\n',
    )
    async with Harness(tmp_path, execute=True) as h:
        remote = make_remote(tmp_path)
        h.remote = remote
        h.fake.repo(REPO).clone_url = f"file://{remote}"
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.add_issue(REPO, title="Greetings", body=FIX_PRD)
        h.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            "  sandbox: none\ngates:\n  detect: false\n  strict: true\n",
        )
        maint = {"user": "maint", "association": "MEMBER"}
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
        await h.drain()
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade approve", **maint))
        await h.drain(timeout=180)
        [pull] = h.fake.repo(REPO).pulls.values()
        before = git("rev-parse", "plan-cascade/1/batch-1", cwd=remote)
        fix = commented(number=pull.number, body="/plan-cascade fix notify on Slack", on_pr=True, **maint)
        await h.deliver("issue_comment", fix)
        await h.drain(timeout=180)
        assert git("rev-parse", "plan-cascade/1/batch-1", cwd=remote) == before
        assert SLACK_TOKEN not in all_objects(remote)
        reply = h.comments(pull.number)[-1]
        assert "did not push" in reply and "notify.env:1 (Slack Token)" in reply
        assert SLACK_TOKEN not in reply


async def _commit(wt: Worktree, files: dict[str, str]) -> str:
    for name, text in files.items():
        (wt.path / name).write_text(text)
    await stage_all(wt)
    sha = await commit_staged(
        wt, message="work", author_name="Dev", author_email="dev@example.com", trailers={}
    )
    assert sha is not None
    return sha


async def test_a_push_is_scanned_once_in_a_thread_and_what_comes_later_still_is(tmp_path: Path) -> None:
    """`hold_back` scans a head once (off the event loop: more than a few lines); the same head
    again scans nothing, a commit on top of it is scanned, and a secret the server learns
    afterwards is looked for in a head scanned before it."""
    remote = make_remote(tmp_path)
    run = make_run(
        tmp_path, remote, approved_state(ONE_STORY), config_for(agent_script(tmp_path, "a.sh", ""))
    )
    await run.mirror.fetch()
    base = await run.commit_of("refs/remotes/origin/main")
    wt = await add_worktree(
        run.mirror, branch="plan-cascade/7/story-001", base_ref=base, path=tmp_path / "wt"
    )
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    later = "correct-horse-battery-" + secrets.token_hex(6)
    table = "".join(f"row {i}\n" for i in range(400))  # past what is scanned on the loop
    clean = await _commit(wt, {"a.py": "x = 1\n", "notes.txt": f"{later}\n", "table.txt": table})
    handed = executor.handed
    assert await hold_back(run, "STORY-001", wt, since=base, head=clean) == []
    assert executor.handed == handed + 1  # the scan ran in a thread
    assert await hold_back(run, "STORY-001", wt, since=base, head=clean) == []
    assert executor.handed == handed + 1  # the same push again: not scanned again
    leaky = await _commit(wt, {"b.py": f'AWS_ACCESS_KEY_ID = "{AWS_KEY}"\n'})
    found = await hold_back(run, "STORY-001", wt, since=clean, head=leaky)
    assert [(f.path, f.rule) for f in found] == [("b.py", "AWS Access Key")]
    assert await head_sha(wt) == clean  # undone: the branch is back where the clean scan ended
    register_secret(later)  # the server learns a secret: what was scanned without it is scanned again
    found = await hold_back(run, "STORY-001", wt, since=base, head=clean)
    assert [f.path for f in found] == ["notes.txt"]


async def test_the_commit_of_what_the_agent_left_is_scanned_from_its_index_beside_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common case (the agent committed nothing itself): the scan reads the index while the
    commit is made, so no `git log` stands between the commit and its push; a secret in it is
    still held back, and the retry's clean commit goes."""
    counter = tmp_path / "count"
    script = logging_agent(
        tmp_path,
        counted(counter) + f'if [ $n -eq 1 ]; then echo \'KEY = "{AWS_KEY}"\' > "$2/settings.py"; '
        'else echo "KEY = None" > "$2/settings.py"; fi\n',
    )
    seen: list[str] = []
    original = worktree_module.run_git

    async def run_git(args: list[str], **kwargs: Any) -> Any:
        seen.extend(word for word in ("diff", "log", "commit", "push") if word in args[:12])
        return await original(args, **kwargs)

    for module in (worktree_module, mirror_module):
        monkeypatch.setattr(module, "run_git", run_git)
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(ONE_STORY), config(script), sandbox=Sandbox(mode="off"))
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED and story.attempts == 2
    assert "settings.py:1: AWS Access Key" in prompts(tmp_path)[1]
    assert AWS_KEY not in all_objects(remote)
    pushed = seen.index("push")
    assert "log" not in seen[:pushed]  # both commits were scanned from their index
    assert seen[:pushed].count("commit") == 2 and seen[:pushed].count("diff") >= 2


async def test_what_the_agent_committed_itself_is_scanned_from_its_commits(tmp_path: Path) -> None:
    """An agent that commits on its own (its commit is not the index's on what was scanned):
    every commit it made is read, and a secret in one is held back."""
    counter = tmp_path / "count"
    script = logging_agent(
        tmp_path,
        counted(counter) + 'cd "$2"\n'
        f"if [ $n -eq 1 ]; then echo 'KEY = \"{AWS_KEY}\"' > secret.py; git add secret.py; "
        "git -c user.name=a -c user.email=a@example.com commit -q -m mine; "
        'echo "x = 1" > settings.py; '
        'else git rm -q --cached secret.py; rm secret.py; echo "x = 2" > settings.py; fi\n',
    )
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(ONE_STORY), config(script), sandbox=Sandbox(mode="off"))
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED and story.attempts == 2
    assert "secret.py:1: AWS Access Key" in prompts(tmp_path)[1]
    assert AWS_KEY not in all_objects(remote)
    assert git("show", "plan-cascade/7/story-001:settings.py", cwd=remote) == "x = 2"
