"""`plan-cascade action` run as GitHub Actions runs it: one fresh process state per workflow
run, GitHub (the fake) the only state between runs, git against a real bare remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.action.runner import run_action
from bot.cli import main
from bot.plan.state import PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from bot.testing.fake_github_serve import serve
from tests.action.action_support import (
    TOKEN,
    ActionWorld,
    comment_event,
    labeled_event,
    outputs,
    pr_closed_event,
)
from tests.execution_support import git
from tests.harness import REPO


@pytest.fixture
def world(tmp_path: Path) -> ActionWorld:
    return ActionWorld(tmp_path)


def plan(world: ActionWorld):  # type: ignore[no-untyped-def]
    (comment,) = world.plan_comments()
    return comment, decode_state(comment.body)


def run(world: ActionWorld, env: dict[str, str]) -> int:
    return run_action(env, transport=world.fake.transport())


def test_cli_label_posts_the_plan_as_github_actions(
    world: ActionWorld, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(world.fake) as api_url:
        env = world.env("issues", labeled_event(world), GITHUB_API_URL=api_url)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert main(["action"]) == 0, capsys.readouterr()
    comment, state = plan(world)
    assert comment.user == "github-actions[bot]"
    assert state.status == PlanStatus.AWAITING_APPROVAL and state.source == "prd-block"
    assert outputs(env) == {"plan_state": "awaiting_approval", "pull_requests": ""}
    auth = {r.headers.get("authorization") for r in world.fake.requests}
    assert auth == {f"token {TOKEN}"}, "every call uses the token input"


def test_approve_comment_runs_the_plan_inline_and_opens_the_pr(world: ActionWorld) -> None:
    assert run(world, world.env("issues", labeled_event(world))) == 0
    env = world.env("issue_comment", comment_event(world, "/plan-cascade approve"))
    assert run(world, env) == 0
    _, state = plan(world)
    assert state.status == PlanStatus.COMPLETED, state.note
    assert all(s.status == StoryStatus.PASSED for s in state.stories.values())
    assert world.remote_branches() == [
        "main",
        "plan-cascade/1/batch-1",
        "plan-cascade/1/batch-2",
        "plan-cascade/1/story-001",
        "plan-cascade/1/story-002",
        "plan-cascade/1/story-003",
    ]
    assert git("show", "plan-cascade/1/batch-2:story-003.txt", cwd=world.remote) == "done"
    pulls = world.fake.repo(REPO).pulls
    assert sorted(p.head_ref for p in pulls.values()) == ["plan-cascade/1/batch-1", "plan-cascade/1/batch-2"]
    out = outputs(env)
    assert out["plan_state"] == "completed"
    assert out["pull_requests"].split(",") == [b.pr_url for b in state.batches]


def test_schedule_polls_thumbs_up_and_approves(world: ActionWorld) -> None:
    assert run(world, world.env("issues", labeled_event(world))) == 0
    comment, _ = plan(world)
    env = world.env("schedule", {"schedule": "*/10 * * * *"})
    assert run(world, env) == 0
    assert plan(world)[1].status == PlanStatus.AWAITING_APPROVAL, "no 👍 yet"
    world.fake.add_reaction(REPO, comment.id, "stranger", "+1")  # no write access: ignored
    world.fake.add_reaction(REPO, comment.id, "maint", "+1")
    env = world.env("schedule", {"schedule": "*/10 * * * *"})
    assert run(world, env) == 0
    _, state = plan(world)
    assert [a.user for a in state.approvals] == ["maint"] and state.approvals[0].via == "reaction"
    assert state.status == PlanStatus.COMPLETED
    assert outputs(env)["plan_state"] == "completed"


def test_merged_batch_prs_complete_the_plan(world: ActionWorld) -> None:
    assert run(world, world.env("issues", labeled_event(world))) == 0
    assert run(world, world.env("issue_comment", comment_event(world, "/plan-cascade approve"))) == 0
    pulls = sorted(world.fake.repo(REPO).pulls)
    for number in pulls:
        world.fake.merge_pull(REPO, number)
        env = world.env("pull_request", pr_closed_event(world, number))
        assert run(world, env) == 0
        assert outputs(env)["plan_state"] == "completed"
    _, state = plan(world)
    assert all(b.merged for b in state.batches) and state.summary_posted
    summaries = [c.body for c in world.fake.comments(REPO, 1) if "**Plan completed**" in c.body]
    assert len(summaries) == 1 and "3 of 3 stories passed" in summaries[0], summaries
    # A redelivered close changes nothing and posts no second summary.
    before = len(world.fake.comments(REPO, 1))
    assert run(world, world.env("pull_request", pr_closed_event(world, pulls[-1]))) == 0
    assert len(world.fake.comments(REPO, 1)) == before


def test_a_squash_merge_restacks_the_next_batch_in_the_action(world: ActionWorld) -> None:
    """The Action answers the merge the same way as the App: retarget, rebuild on main."""
    assert run(world, world.env("issues", labeled_event(world))) == 0
    assert run(world, world.env("issue_comment", comment_event(world, "/plan-cascade approve"))) == 0
    world.fake.repo(REPO).delete_branch_on_merge = True
    first, second = sorted(world.fake.repo(REPO).pulls)
    world.fake.merge_pull(REPO, first, method="squash")
    assert run(world, world.env("pull_request", pr_closed_event(world, first))) == 0
    pulls = world.fake.repo(REPO).pulls
    assert pulls[second].base_ref == "main"
    shown = git("diff", "--name-only", "main...plan-cascade/1/batch-2", cwd=world.remote).split()
    assert shown == ["story-003.txt"]
    world.fake.merge_pull(REPO, second, method="squash")
    assert run(world, world.env("pull_request", pr_closed_event(world, second))) == 0
    _, state = plan(world)
    assert all(b.merged for b in state.batches) and state.summary_posted
    files = git("ls-tree", "--name-only", "main", cwd=world.remote).split()
    assert {"story-001.txt", "story-002.txt", "story-003.txt"} <= set(files)


def test_config_path_input_moves_the_repo_config(world: ActionWorld) -> None:
    text = world.fake.repo(REPO).files["main"].pop(".github/plan-cascade.yml")
    world.fake.set_file(REPO, "ci/cascade.yml", text.replace("trigger_label", "x"))
    env = world.env("issues", labeled_event(world), PLAN_CASCADE_CONFIG_PATH="ci/cascade.yml")
    assert run(world, env) == 0
    assert world.fake.requests_to("GET", r"/repos/octo-org/hello-world/contents/ci/cascade.yml")
    assert len(world.plan_comments()) == 1


def test_failure_exits_non_zero_with_an_error_line(
    world: ActionWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    world.fake.set_file(REPO, ".github/plan-cascade.yml", "agent:\n  default: [1, 2]\n")
    env = world.env("issue_comment", comment_event(world, "/plan-cascade plan"))
    assert run(world, env) == 0, "a bad config is reported on the issue, as on the server"
    assert "plan-cascade.yml" in world.fake.comments(REPO, 1)[-1].body
    env = world.env("issues", labeled_event(world))
    del env["PLAN_CASCADE_GITHUB_TOKEN"]
    assert run(world, env) == 1
    assert capsys.readouterr().out.startswith("::error::no GitHub token")
    world.fake.fail_next(
        "GET", r"/repos/octo-org/hello-world", status=403, message="Resource not accessible by integration"
    )
    assert run(world, world.env("schedule", {})) == 1
    assert "Resource not accessible by integration" in capsys.readouterr().out


def test_a_workflow_run_event_drives_the_ci_loop_in_the_action(world: ActionWorld) -> None:
    """With an App token the batch PRs start the repository's CI; its `workflow_run` runs the Action."""
    from bot.testing.fake_github_actions import add_workflow_run
    from bot.testing.fake_github_forks import workflow_run_event

    assert run(world, world.env("issues", labeled_event(world))) == 0
    assert run(world, world.env("issue_comment", comment_event(world, "/plan-cascade approve"))) == 0
    head = git("rev-parse", "plan-cascade/1/batch-1", cwd=world.remote)
    lost = "The runner has received a shutdown signal.\n"
    ci = add_workflow_run(
        world.fake,
        REPO,
        head_sha=head,
        head_branch="plan-cascade/1/batch-1",
        name="CI",
        jobs=[("test", "failure", lost)],
    )
    payload = workflow_run_event(world.fake, REPO, ci)  # a push's run, in this repository
    assert run(world, world.env("workflow_run", payload)) == 0
    assert ci.reruns == 1
    (pull,) = [p for p in world.fake.repo(REPO).pulls.values() if p.head_ref == "plan-cascade/1/batch-1"]
    (note,) = [c.body for c in world.fake.comments(REPO, pull.number) if "plan-cascade:ci batch-1" in c.body]
    assert "re-ran the failed jobs" in note and "runner lost" in note
