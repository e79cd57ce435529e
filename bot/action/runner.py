"""`plan-cascade action`: the server's handlers, run once for the event that started the workflow.

- Webhook-like events (`issues`, `issue_comment`, `pull_request`, `pull_request_review`) go
  through the default router, exactly as the server dispatches a delivery.
- `schedule` and `workflow_dispatch` run the repository's due `schedules:` (`action/schedules`),
  then poll 👍 reactions on the plans of open issues that carry the trigger label (GitHub sends
  no webhook for reactions).
- Jobs the handlers queue (execution, polls, review fixes) run inline, in order.
- `run-story` mode runs one story of a batch dispatched by `execution.backend: actions`.

State lives only on GitHub: every run starts from the plan comment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import httpx

from bot.action.inputs import ActionInputs, load_event, read_inputs
from bot.action.outputs import error_command, plan_outputs, write_outputs
from bot.action.run_story import run_one_story
from bot.action.schedules import run_due_schedules
from bot.action.services import InlineJobs, action_services
from bot.app.wiring import default_router
from bot.errors import PlanCascadeError
from bot.handlers.approval import poll_reactions
from bot.handlers.session import open_session
from bot.handlers.stack import batch_of_pr
from bot.log import log_context, register_secret
from bot.plan.state import PlanState, StoryStatus
from bot.runtime.routing import Event
from bot.runtime.services import Services

log = logging.getLogger(__name__)
POLL_EVENTS = ("schedule", "workflow_dispatch")


def run_action(
    env: Mapping[str, str], *, transport: httpx.AsyncBaseTransport | None = None, stdout: TextIO | None = None
) -> int:
    """Run the Action once; 0 on success, 1 with a `::error::` line on failure."""
    return asyncio.run(action_main(env, transport=transport, stdout=stdout))


async def action_main(
    env: Mapping[str, str], *, transport: httpx.AsyncBaseTransport | None = None, stdout: TextIO | None = None
) -> int:
    """`run_action` inside a running event loop (tests run several at once)."""
    out = stdout or sys.stdout
    try:
        inputs = read_inputs(env)
        with _data_dir(inputs) as data_dir:
            outputs = await _run(inputs, data_dir=data_dir, transport=transport)
        write_outputs(inputs.output_path, outputs)
        return 0
    except PlanCascadeError as exc:
        log.error("plan-cascade action failed: %s", exc.message)
        problems = getattr(exc, "problems", None) or []
        print(error_command("\n".join([exc.message, *problems])), file=out)
        return 1
    except Exception as exc:
        log.exception("plan-cascade action crashed")
        print(error_command(f"plan-cascade action crashed: {type(exc).__name__}: {exc}"), file=out)
        return 1


@contextlib.contextmanager
def _data_dir(inputs: ActionInputs) -> Iterator[Path]:
    if inputs.data_dir is not None:
        inputs.data_dir.mkdir(parents=True, exist_ok=True)
        yield inputs.data_dir
        return
    with tempfile.TemporaryDirectory(prefix="plan-cascade-") as tmp:
        yield Path(tmp)


async def _run(
    inputs: ActionInputs, *, data_dir: Path, transport: httpx.AsyncBaseTransport | None
) -> dict[str, str]:
    for secret in (inputs.token, inputs.anthropic_api_key, inputs.openai_api_key):
        register_secret(secret)
    services, jobs = action_services(inputs, data_dir=data_dir, transport=transport)
    if inputs.mode == "run-story":
        return await _run_story(services, inputs)
    with log_context(delivery=inputs.delivery_id, plan=inputs.repository):
        if inputs.event_name in POLL_EVENTS:
            issues = await run_due_schedules(
                services, jobs, repo=inputs.repository, delivery_id=inputs.delivery_id
            )
            issues |= await poll_plans(services, jobs, inputs)
        else:
            issues = await handle_event(services, jobs, inputs, load_event(inputs))
        plans = await _plans(services, inputs, issues | _job_issues(jobs))
    return plan_outputs(plans)


async def handle_event(
    services: Services, jobs: InlineJobs, inputs: ActionInputs, payload: dict[str, Any]
) -> set[int]:
    """Dispatch the event through the server's router, then run the jobs it queued."""
    payload = dict(payload)
    payload.setdefault("repository", {"full_name": inputs.repository})
    event = Event.from_delivery(name=inputs.event_name, delivery_id=inputs.delivery_id, payload=payload)
    ran = await default_router().dispatch(event, services)
    if not ran:
        log.info("no handler for %s.%s: nothing to do", event.name, event.action)
    await jobs.drain(delivery_id=inputs.delivery_id)
    return {n for n in (_plan_issue(event),) if n is not None}


def _plan_issue(event: Event) -> int | None:
    """The issue whose plan the event is about (a batch PR points at its plan's issue)."""
    pr = event.envelope.pull_request
    if pr is not None and event.repo is not None:
        found = batch_of_pr(event.repo, pr.head.ref, pr.body)
        return found[0] if found else None
    issue = event.envelope.issue
    if issue is not None and not issue.is_pull_request:
        return issue.number
    return None


async def poll_plans(services: Services, jobs: InlineJobs, inputs: ActionInputs) -> set[int]:
    """Poll 👍 on the plan of every open issue with the trigger label; run what gets approved."""
    repo = inputs.repository
    first = await open_session(services, repo=repo, issue=0, installation_id=None)
    config = await first.load_config()
    labels = {inputs.trigger_label} | ({config.trigger_label} if config else set())
    numbers: set[int] = set()
    for label in sorted(labels):
        for issue in await first.port.list_issues(repo, labels=[label]):
            if not issue.is_pull_request:
                numbers.add(issue.number)
    for number in sorted(numbers):
        with log_context(delivery=inputs.delivery_id, plan=f"{repo}#{number}"):
            session = await open_session(
                services,
                repo=repo,
                issue=number,
                installation_id=None,
                default_branch=first.default_branch,
                clone_url=first.clone_url,
            )
            if await session.load_config() is None:
                continue
            await poll_reactions(session)
            await jobs.drain(delivery_id=inputs.delivery_id)
    return numbers


async def _run_story(services: Services, inputs: ActionInputs) -> dict[str, str]:
    story = inputs.story
    assert story is not None
    with log_context(delivery=inputs.delivery_id, plan=f"{inputs.repository}#{story.issue}"):
        outcome = await run_one_story(services, inputs)
    outputs = {
        "plan_state": outcome.plan.status.value,
        "pull_requests": "",
        "story_state": outcome.story.status.value,
    }
    if outcome.story.status != StoryStatus.PASSED:
        write_outputs(inputs.output_path, outputs)
        why = outcome.refused or outcome.story.reason or "see its check runs"
        raise PlanCascadeError(f"{story.story_id} failed: {why}")
    return outputs


def _job_issues(jobs: InlineJobs) -> set[int]:
    return {int(p["issue"]) for _, p in jobs.done if "issue" in p}


async def _plans(services: Services, inputs: ActionInputs, issues: set[int]) -> dict[int, PlanState]:
    """The current plan of each issue touched, read back from GitHub (for the outputs)."""
    if not issues:
        return {}
    assert services.github_for is not None
    port = await services.github_for(None, inputs.repository)
    plans: dict[int, PlanState] = {}
    for number in sorted(issues):
        loaded = await services.plan_store.find_on_github(
            port, inputs.repository, number, bot_login=services.bot_login
        )
        if loaded is not None:
            plans[number] = loaded.state
    return plans
