"""New dependencies against the fake GitHub's Advisory Database: a story that brings in a version
with a critical advisory fails its `dependencies` check run (the agent is told the advisory and
the fixed version), a clean one is listed and passes, and the PR body shows them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.gates.dependencies import AdvisoryCache, AdvisoryLookup
from bot.github import token_port
from bot.orchestration.depcheck import changed_dependencies
from bot.orchestration.engine import execute
from bot.plan.state import PlanState, StoryStatus
from bot.publishing.github import GitHubReporter
from bot.rendering.pr_body import pr_body
from bot.sandbox.confinement import Sandbox
from bot.testing.fake_github import FakeGitHub
from bot.workspace.worktree import add_worktree
from tests.execution_support import agent_script, approved_state, config_for, git, make_remote, make_run

REPO = "octo/demo"
ONE_STORY = """
version: 1
title: YAML config
summary: Read the config from YAML.
stories:
  - id: STORY-001
    title: YAML config loader
    acceptance_criteria: ["config.py reads config.yaml"]
"""
CHECK = "plan-cascade / STORY-001 / dependencies"


def setup(
    tmp: Path, body: str, extra: str = "", files: dict[str, str] | None = None
) -> tuple[Any, FakeGitHub, Path]:
    """A run whose command agent (`$1` prompt file, `$2` worktree) logs its prompts and runs
    `body`, reporting check runs to a fake GitHub that holds the remote's commits."""
    remote = make_remote(tmp, files or {"README.md": "# demo\n", "requirements.txt": "requests==2.31.0\n"})
    fake = FakeGitHub()
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    fake.add_issue(REPO, title="Read the config from YAML")  # #1: the plan's issue
    port = token_port("ghs_test", base_url=fake.api_url, transport=fake.transport(), auto_retry=False)
    log = tmp / "prompts.log"
    script = agent_script(tmp, "agent.sh", f'cat "$1" >> {log}\necho "=====" >> {log}\n{body}')
    cfg = config_for(script, extra)
    cfg = cfg.model_copy(
        update={
            "agent": cfg.agent.model_copy(
                update={"commands": {"script": f"{script} {{prompt_file}} {{worktree}}"}}
            )
        }
    )

    async def save(state: PlanState) -> PlanState:
        return state

    run = make_run(
        tmp,
        remote,
        approved_state(ONE_STORY, repo=REPO, issue=1),
        cfg,
        sandbox=Sandbox(mode="off"),
        reporter=GitHubReporter(port, REPO, 1, save_comment=save),
        advisories=AdvisoryLookup(port, AdvisoryCache()),
    )
    return run, fake, log


def checks(fake: FakeGitHub) -> list[Any]:
    return sorted((r for r in fake.repo(REPO).check_runs.values() if r.name == CHECK), key=lambda r: r.id)


async def test_a_critical_advisory_fails_the_check_and_the_agent_learns_the_fix(tmp_path: Path) -> None:
    run, fake, log = setup(tmp_path, 'echo "pyyaml==5.3" >> "$2/requirements.txt"\n')
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.FAILED and story.attempts == 3
    assert story.gates["dependencies"] == "failure" and "dependencies" in (story.reason or "")
    runs = checks(fake)
    assert [r.conclusion for r in runs] == ["failure", "failure", "failure"]
    summary = runs[0].output["summary"]
    assert "pip pyyaml 5.3, in requirements.txt" in summary
    assert "GHSA-8q59-q68h-6hv4 (critical): Improper Input Validation in PyYAML; fixed in 5.4" in summary
    retry = log.read_text().split("=====\n")[1]
    assert "GHSA-8q59-q68h-6hv4 (critical)" in retry and "fixed in 5.4" in retry
    [record] = story.dependencies
    assert (record.name, record.version, record.advisories[0].id) == ("pyyaml", "5.3", "GHSA-8q59-q68h-6hv4")
    asked = [r for r in fake.requests if r.path == "/advisories"]
    assert len(asked) == 2  # reviewed and malware, once: the retries' answers came from the cache
    assert {r.query["type"] for r in asked} == {"reviewed", "malware"}
    assert all(r.query["affects"] == "pyyaml@5.3" and r.query["ecosystem"] == "pip" for r in asked)


async def test_a_clean_version_is_listed_and_passes(tmp_path: Path) -> None:
    body = (
        'echo "pyyaml==6.0.1" >> "$2/requirements.txt"\n'
        """printf '{"dependencies": {"lodash": "4.17.21", "left-pad": "^1.3.0"}}' > "$2/package.json"\n"""
    )
    run, fake, _ = setup(tmp_path, body)
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED and story.gates["dependencies"] == "success"
    assert [r.conclusion for r in checks(fake)] == ["success"]
    listed = {(r.ecosystem, r.name, r.version, r.exact, r.checked) for r in story.dependencies}
    assert listed == {
        ("pip", "pyyaml", "6.0.1", True, True),
        ("npm", "lodash", "4.17.21", True, True),
        ("npm", "left-pad", "^1.3.0", False, False),
    }
    body_text = pr_body(state, 1, ["STORY-001"], plan_url="https://x", integration={})
    assert "## Dependencies" in body_text
    assert "| STORY-001 | `pyyaml` (pip) | 6.0.1 | no known advisory |" in body_text
    assert "| STORY-001 | `left-pad` (npm) | ^1.3.0 | a range: not looked up |" in body_text


async def test_an_upgrade_with_a_milder_advisory_is_neutral_and_the_pr_links_it(tmp_path: Path) -> None:
    extra = "dependencies:\n  fail_on: critical\n"
    run, fake, _ = setup(tmp_path, 'sed -i "s/2.31.0/2.19.0/" "$2/requirements.txt"\n', extra)
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED, story.reason  # "high" advisory, fail_on critical
    assert [r.conclusion for r in checks(fake)] == ["neutral"]
    [record] = story.dependencies
    assert (record.version, record.previous) == ("2.19.0", "2.31.0")
    body_text = pr_body(state, 1, ["STORY-001"], plan_url="https://x", integration={})
    assert (
        "| STORY-001 | `requests` (pip) | 2.19.0 (was 2.31.0) | ⚠️ [GHSA-x84v-xcm2-53pg]"
        "(https://github.com/advisories/GHSA-x84v-xcm2-53pg) (high, fixed in 2.20.0) |"
    ) in body_text


async def test_a_story_that_changes_no_dependency_file_gets_no_check(tmp_path: Path) -> None:
    run, fake, _ = setup(tmp_path, 'echo "print(1)" > "$2/config.py"\n')
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.PASSED
    assert checks(fake) == [] and not [r for r in fake.requests if r.path == "/advisories"]


# -- issue #47, defect 3: partial coverage is never a pass ------------------------------------
NO_RETRY = "gates:\n  detect: false\n  strict: true\n  max_retries: 0\n"


async def test_versions_past_the_lookup_limit_make_the_check_neutral(tmp_path: Path) -> None:
    """A lock file of 601 versions: `pyyaml 5.3` sorts last, past the 500 looked up."""
    entries = "".join(f'[[package]]\\nname = "aaa-{n:03d}"\\nversion = "1.0.0"\\n\\n' for n in range(600))
    entries += '[[package]]\\nname = "pyyaml"\\nversion = "5.3"\\n'
    run, fake, _ = setup(tmp_path, f"printf '{entries}' > \"$2/uv.lock\"\n", NO_RETRY)
    state = await execute(run)
    assert [r.conclusion for r in checks(fake)] == ["neutral"]  # was: success
    summary = checks(fake)[0].output["summary"]
    assert "Not checked, so this check is neutral rather than a pass:" in summary
    assert "- 101 package version(s) not looked up: a check looks up at most 500" in summary
    assert "pip pyyaml 5.3, in uv.lock: not looked up" in summary
    assert state.stories["STORY-001"].gates["dependencies"] == "neutral"


async def test_empty_requirement_files_do_not_hide_the_real_manifest(tmp_path: Path) -> None:
    body = (
        'for n in $(seq -w 0 50); do mkdir -p "$2/a$n" && : > "$2/a$n/requirements.txt"; done\n'
        'echo "pyyaml==5.3" >> "$2/requirements.txt"\n'
    )
    run, fake, _ = setup(tmp_path, body, NO_RETRY)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED  # was: passed, no check run
    [run_] = checks(fake)
    assert run_.conclusion == "failure"
    summary = run_.output["summary"]
    assert "GHSA-8q59-q68h-6hv4 (critical)" in summary
    assert "a50/requirements.txt: not read, a check reads at most 50 dependency files" in summary


async def test_a_byte_order_mark_hides_no_line(tmp_path: Path) -> None:
    body = "printf '\\357\\273\\277pyyaml==5.3\\nrequests==2.31.0\\n' > \"$2/requirements.txt\"\n"
    run, fake, _ = setup(tmp_path, body, NO_RETRY)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED  # was: passed, no check run
    assert [r.conclusion for r in checks(fake)] == ["failure"]
    assert "pip pyyaml 5.3, in requirements.txt" in checks(fake)[0].output["summary"]


async def test_included_requirements_and_constraints_are_followed(tmp_path: Path) -> None:
    body = (
        'mkdir -p "$2/deps" && echo "-c ../constraints.txt" > "$2/deps/extra.txt"\n'
        'echo "pyyaml" >> "$2/deps/extra.txt"\n'
        'echo "pyyaml==5.3  # pinned here" > "$2/constraints.txt"\n'
        'echo "-r deps/extra.txt" >> "$2/requirements.txt"\n'
    )
    run, fake, _ = setup(tmp_path, body, NO_RETRY)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED  # was: passed, no check run
    [run_] = checks(fake)
    assert run_.conclusion == "failure" and "pip pyyaml 5.3, in requirements.txt" in run_.output["summary"]


async def test_an_include_outside_the_repository_is_not_checked_and_says_so(tmp_path: Path) -> None:
    body = (
        'echo "--requirement=https://example.com/more.txt" >> "$2/requirements.txt"\n'
        'echo "-r ../../../elsewhere.txt" >> "$2/requirements.txt"\n'
        'echo "pyyaml==6.0.1" >> "$2/requirements.txt"\n'
    )
    run, fake, _ = setup(tmp_path, body, NO_RETRY)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.PASSED
    [run_] = checks(fake)
    assert run_.conclusion == "neutral"  # was: success
    summary = run_.output["summary"]
    assert (
        "- `https://example.com/more.txt` (included by requirements.txt): outside the repository" in summary
    )
    assert "- `../../../elsewhere.txt` (included by requirements.txt): outside the repository" in summary


async def test_a_changed_file_an_unchanged_requirements_file_includes_is_read(tmp_path: Path) -> None:
    files = {"requirements.txt": "-r base.txt\n", "base.txt": "requests==2.31.0\n"}
    run, fake, _ = setup(tmp_path, 'echo "pyyaml==5.3" >> "$2/base.txt"\n', NO_RETRY, files)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED  # was: passed, no check run
    [run_] = checks(fake)
    assert run_.conclusion == "failure" and "pip pyyaml 5.3, in requirements.txt" in run_.output["summary"]
    assert "requests" not in run_.output["summary"]  # what base.txt had before is not new


async def test_what_unchanged_requirements_files_include_is_read_once_per_base(tmp_path: Path) -> None:
    """The stories of a batch share a base: which of its requirements files include what is read
    there once (`Run.pip_includes`), and each story still gets exactly the files that include
    what it changed; a requirements file a story changed is read as that story left it."""
    files = {
        "requirements.txt": "-r base.txt\n",
        "requirements-dev.in": "-c base.txt\n--requirement=tools.txt\n",
        "base.txt": "requests==2.31.0\n",
        "tools.txt": "ruff==0.5.0\n",
        "notes.txt": "hi\n",
    }
    run, _, _ = setup(tmp_path, "", NO_RETRY, files)
    await run.mirror.fetch()
    base = await run.commit_of("refs/remotes/origin/main")
    wt = await add_worktree(
        run.mirror, branch="plan-cascade/1/story-001", base_ref=base, path=tmp_path / "wt"
    )

    async def story(edits: dict[str, str]) -> list[tuple[str, str, str]]:
        git("checkout", "-q", "--detach", base, cwd=wt.path)
        for name, text in edits.items():
            (wt.path / name).write_text(text)
        git("commit", "-q", "-am", "story", cwd=wt.path)
        head = git("rev-parse", "HEAD", cwd=wt.path)
        found, unread = await changed_dependencies(run, base=base, head=head)
        assert unread == []
        return sorted((c.file, c.name, c.version) for c in found)

    assert await story({"base.txt": "requests==2.31.0\npyyaml==5.3\n"}) == [
        ("requirements-dev.in", "pyyaml", "5.3"),
        ("requirements.txt", "pyyaml", "5.3"),
    ]
    assert await story({"tools.txt": "ruff==0.6.0\n"}) == [("requirements-dev.in", "ruff", "0.6.0")]
    assert await story({"notes.txt": "more\n"}) == []
    both = {"requirements.txt": "flask==3.0.0\n", "base.txt": "pyyaml==5.3\n"}
    assert await story(both) == [
        ("requirements-dev.in", "pyyaml", "5.3"),
        ("requirements.txt", "flask", "3.0.0"),
    ]
    assert run.pip_includes == {
        base: [
            ("requirements-dev.in", frozenset({"base.txt", "tools.txt"})),
            ("requirements.txt", frozenset({"base.txt"})),
        ]
    }


async def test_the_dependency_files_are_read_while_the_story_is_pushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read does not wait for the push (nor the push for the read): they run side by side."""
    from bot.orchestration import depcheck, story

    reading = asyncio.Event()
    real_changes, real_publish = depcheck.changed_dependencies, story.publish_story
    pushed_after_read: list[bool] = []

    async def changes(*args: Any, **kwargs: Any) -> Any:
        reading.set()
        return await real_changes(*args, **kwargs)

    async def publish(*args: Any, **kwargs: Any) -> Any:
        try:
            await asyncio.wait_for(reading.wait(), timeout=5)
            pushed_after_read.append(True)
        except TimeoutError:
            pushed_after_read.append(False)
        return await real_publish(*args, **kwargs)

    monkeypatch.setattr(depcheck, "changed_dependencies", changes)
    monkeypatch.setattr(story, "publish_story", publish)
    run, fake, _ = setup(tmp_path, 'echo "pyyaml==5.3" >> "$2/requirements.txt"\n', NO_RETRY)
    state = await execute(run)
    assert pushed_after_read == [True]  # the read had begun while the push waited
    assert state.stories["STORY-001"].status == StoryStatus.FAILED
    [run_] = checks(fake)
    assert run_.conclusion == "failure" and "pip pyyaml 5.3" in run_.output["summary"]


async def test_a_read_of_another_head_is_not_used(tmp_path: Path) -> None:
    """GitHub may make the pushed commit again (signed): the check then reads the head it reports on."""
    from bot.orchestration.depcheck import DependencyRead

    run, _, _ = setup(tmp_path, "", NO_RETRY)
    await run.mirror.fetch()
    base = await run.commit_of("refs/remotes/origin/main")
    read = DependencyRead(run, base_ref=base, head=base)
    assert await read.result(base) == ([], [])
    assert await read.result("0" * 40) is None
    failing = DependencyRead(run, base_ref=base, head="f" * 40)  # no such commit: its read fails
    await asyncio.sleep(0.5)
    failing.cancel()  # an unwanted read's error is dropped, never reported as unretrieved
    assert failing.task.done()


async def test_the_paths_of_an_agents_commit_come_from_the_secret_scans_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit of what the agent left is read from its index for the secret scan: the check
    takes which paths changed from that read, and lists them with no `git diff` of its own."""
    from bot.orchestration import depcheck

    listed: list[str] = []
    real = depcheck._numstat

    async def numstat(run: Any, base: str, head: str) -> dict[str, int]:
        listed.append(head)
        return await real(run, base, head)

    monkeypatch.setattr(depcheck, "_numstat", numstat)
    run, fake, _ = setup(tmp_path, 'echo "pyyaml==5.3" >> "$2/requirements.txt"\n', NO_RETRY)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED
    [run_] = checks(fake)
    assert run_.conclusion == "failure" and "pip pyyaml 5.3" in run_.output["summary"]
    assert listed == [], "no git diff --numstat: the scan's read named requirements.txt"
