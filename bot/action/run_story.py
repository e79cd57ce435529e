"""`plan-cascade action` in `run-story` mode: one matrix job of a dispatched batch.

Loads the plan from the issue's plan comment (never writes it: the App owns it), checks the
approved revision, runs ONE story with the engine's story runner (worktree, agent, gates as
check runs on the story commit), pushes `plan-cascade/<issue>/<story-id>` and ends with the
check run `plan-cascade / <STORY-ID>` the App waits for. A story that produced no commit
gets an empty marker commit, so its result never lands on someone else's commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.action.inputs import ActionInputs, StoryInputs
from bot.action.services import require_config
from bot.errors import PlanCascadeError, StateError
from bot.github.port import GitHubPort
from bot.handlers.execution import build_run
from bot.handlers.session import open_session
from bot.orchestration.actions_contract import StoryReport, story_check_name
from bot.orchestration.run import Run, RunSuperseded, batch_base
from bot.orchestration.scheduler import in_scope, story_branch
from bot.orchestration.story import run_story
from bot.plan.state import PlanState, PlanStatus, StoryState, StoryStatus
from bot.publishing.github import GitHubReporter
from bot.runtime.services import Services
from bot.workspace.git import run_git

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoryOutcome:
    """How the story ended on this runner."""

    story: StoryState
    plan: PlanState
    head_sha: str
    refused: str | None = None
    """Why the story was not run at all (a changed plan, a story not approved)."""


async def _discard(state: PlanState) -> PlanState:
    """Matrix jobs never edit the plan comment: the App records their results."""
    return state


def check_runnable(state: PlanState, story: StoryInputs) -> None:
    """Refuse a story the approved plan does not ask for now."""
    if state.plan_hash != story.plan_hash:
        raise StateError(
            f"the plan changed since this batch was dispatched ({story.plan_hash[:12]} → "
            f"{state.plan_hash[:12]}): nothing was run"
        )
    if state.status != PlanStatus.RUNNING:
        raise StateError(f"the plan is {state.status.value}, not running: nothing was run")
    if story.story_id not in state.stories or not in_scope(state, story.story_id):
        raise StateError(f"{story.story_id} is not an approved story of this plan")
    batches = state.batches_ids()
    if not 1 <= story.batch <= len(batches) or story.story_id not in batches[story.batch - 1]:
        raise StateError(f"{story.story_id} is not in batch {story.batch}")


async def run_one_story(services: Services, inputs: ActionInputs) -> StoryOutcome:
    """Run the story of `inputs.story` and report it (a refused story is reported failed)."""
    story = inputs.story
    assert story is not None
    session = await open_session(services, repo=inputs.repository, issue=story.issue, installation_id=None)
    await require_config(session)
    loaded = await session.load_plan()
    if loaded is None:
        raise StateError(f"issue #{story.issue} has no plan comment written by {inputs.bot_login}")
    try:
        check_runnable(loaded.state, story)
        refused = None
    except StateError as exc:
        refused = exc
    fresh = loaded.state.stories.get(story.story_id, StoryState()).model_copy(
        update={"status": StoryStatus.PENDING, "attempts": 0, "commit": None, "reason": None, "gates": {}}
    )
    state = loaded.state.model_copy(update={"stories": {**loaded.state.stories, story.story_id: fresh}})
    run = await build_run(session, state, loaded.comment_id, None)
    run.reporter = GitHubReporter(
        session.port, session.repo, story.issue, save_comment=_discard, details_url=inputs.run_url
    )
    run.publisher = None
    run.story_runner = None
    await run.mirror.fetch()  # clones a missing mirror
    base = batch_base(run, story.batch)
    await _local_base(run, base)
    if refused is None:
        try:
            await run_story(run, story.story_id, base)
            record = run.state.stories[story.story_id]
        except RunSuperseded as exc:  # cancelled or revised since the dispatch: no agent ran
            record = fresh.model_copy(update={"status": StoryStatus.FAILED, "reason": f"not run: {exc.why}"})
    else:
        record = fresh.model_copy(update={"status": StoryStatus.FAILED, "reason": refused.message})
    head = record.commit or await _marker_commit(run, story.story_id, base, record)
    await _report(session.port, inputs, story, record, head)
    return StoryOutcome(
        story=record, plan=run.state, head_sha=head, refused=refused.message if refused else None
    )


async def _local_base(run: Run, base: str) -> None:
    """A stacked batch starts from the previous batch branch the App pushed: make it local."""
    prefix = "refs/heads/"
    if not base.startswith(prefix):
        return
    branch = base.removeprefix(prefix)
    try:
        sha = await run.mirror.resolve(f"refs/remotes/origin/{branch}")
    except PlanCascadeError:
        raise StateError(f"the previous batch branch {branch} is not on the remote yet") from None
    await run.mirror.git("update-ref", base, sha)


async def _marker_commit(run: Run, story_id: str, base: str, record: StoryState) -> str:
    """An empty commit on the story branch that carries the failure, pushed."""
    base_sha = await run.mirror.resolve(base)
    author = run.author
    env = run.mirror.local_env(
        {
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_COMMITTER_NAME": author.name,
            "GIT_COMMITTER_EMAIL": author.email,
        }
    )
    message = f"{story_id}: no changes ({record.reason or record.status.value})"
    made = await run_git(
        ["commit-tree", f"{base_sha}^{{tree}}", "-p", base_sha, "-m", message], cwd=run.mirror.path, env=env
    )
    sha = made.stdout.strip()
    branch = story_branch(run.branch_prefix, story_id)
    await run.mirror.git("update-ref", f"refs/heads/{branch}", sha)
    remote = await run.mirror.remote_sha(branch)
    return await run.mirror.push(branch, expected_remote_sha=remote, force=True)


async def _report(
    port: GitHubPort, inputs: ActionInputs, story: StoryInputs, record: StoryState, head: str
) -> None:
    """The final check run `plan-cascade / <STORY-ID>` the App watches."""
    passed = record.status == StoryStatus.PASSED
    report = StoryReport(
        dispatch_id=story.dispatch_id or inputs.delivery_id,
        story_id=story.story_id,
        attempts=record.attempts,
        tokens=record.tokens,
        cost_usd=record.cost_usd,
    )
    gates = "\n".join(f"- `{name}`: {c}" for name, c in sorted(record.gates.items())) or "- no gates ran"
    summary = (
        f"**{story.story_id}** {'passed' if passed else 'failed'} after {record.attempts} attempt(s)"
        + ("" if passed else f": {record.reason or 'no reason given'}")
        + f"\n\n{gates}\n\n[Workflow run]({inputs.run_url})"
    )
    output = {
        "title": f"{story.story_id}: {'passed' if passed else 'failed'}",
        "summary": summary[:60000],
    }
    if record.summary:
        output["text"] = record.summary[:60000]
    await port.create_check_run(
        inputs.repository,
        name=story_check_name(story.story_id),
        head_sha=head,
        status="completed",
        conclusion="success" if passed else "failure",
        external_id=report.external_id(),
        details_url=inputs.run_url,
        output=output,
    )
