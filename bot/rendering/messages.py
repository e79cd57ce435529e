"""Replies the bot posts on issues and pull requests, as Markdown bodies.

Every function is pure and renders ``templates/messages/<name>.md.j2``. Logins, PRD
text, reasons and commands are treated as untrusted: the templates pass them through
the ``md_inline`` / ``mention`` / ``md_code`` filters, so nothing pings anyone.
"""

from __future__ import annotations

from typing import Any

from bot.environment.setup import missing_program_hint
from bot.plan import short_hash
from bot.plan.state import PlanState, StoryStatus, totals
from bot.rendering.jinja import COMMAND, template_env
from bot.rendering.plan_comment import PLAN_BADGE

MAX_PROBLEMS = 50
"""Problems listed in one reply; the rest are counted."""
MAX_PROBLEM_CHARS = 400
"""Characters of one problem shown: 50 of them always fit a comment."""
_WRITE = ("admin", "maintain", "write")
_COUNT_ORDER = [StoryStatus.PASSED, StoryStatus.RUNNING, StoryStatus.FAILED, StoryStatus.SKIPPED,
                StoryStatus.CANCELLED, StoryStatus.PENDING]  # fmt: skip
_SOURCES = {
    "prd-block": "the ```` ```prd ```` block in the issue",
    "llm": "the plan the model wrote",
    "plan-pr": "the PRD in the plan pull request",
    "reflection": "the revised plan",
}


def _render(name: str, **context: Any) -> str:
    return template_env().get_template(f"messages/{name}.md.j2").render(context).strip() + "\n"


def _approvers(state: PlanState) -> int:
    return len({a.user for a in state.current_approvals()})


def help_text(app_url: str | None, trigger_label: str) -> str:
    """Every command with a one-line explanation; `app_url` is the App's page as GitHub names it
    (on an Enterprise Server, under its host), None: no link."""
    return _render("help", app_url=app_url, trigger_label=trigger_label)


def permission_denied(user: str, permission: str, *, approvers: list[str]) -> str:
    """Why `user` (whose repository permission is `permission`) may not use the bot."""
    return _render(
        "permission_denied",
        user=user,
        permission=permission,
        approvers=approvers,
        can_write=permission in _WRITE,
    )


def state_refusal(command: str, reason: str) -> str:
    """`command` does not fit the plan's state; `reason` says why (a StateError message)."""
    if not command.startswith("/"):
        command = f"{COMMAND} {command}"
    return _render("state_refusal", command=command, reason=reason.rstrip("."))


def approval_recorded(state: PlanState, user: str, *, outcome: str) -> str:
    """The reply to an approval; `state` and `outcome` are what `bot.plan.approval.add_approval` returned."""
    partial = bool(state.approved_scope) and len(state.approved_scope) < len(state.prd.stories)
    return _render(
        "approval_recorded",
        state=state,
        user=user,
        outcome=outcome,
        short=short_hash(state.plan_hash),
        have=_approvers(state),
        partial=partial,
    )


def stale_approval(state: PlanState, *, user: str, approved_hash: str) -> str:
    """`user` approved an older revision (`approved_hash`) than the current one."""
    return _render(
        "stale_approval",
        state=state,
        user=user,
        old=short_hash(approved_hash),
        short=short_hash(state.plan_hash),
    )


def approval_predates(state: PlanState, *, user: str) -> str:
    """`user`'s approve command was written before the current revision was posted."""
    return _render("approval_predates", state=state, user=user, short=short_hash(state.plan_hash))


def plan_altered(url: str, reason: str) -> str:
    """The plan comment failed verification (edited by someone, or unsigned): re-plan."""
    return _render("plan_altered", url=url, reason=reason)


def prd_invalid(problems: list[str], source: str) -> str:
    """A PRD failed validation: one line per problem and how to fix it.

    `source` is where the PRD came from: ``prd-block``, ``llm``, ``plan-pr``, ``reflection``
    or a short description such as "the `prd` block" (which picks the advice by its words).
    """
    lowered = source.lower()
    if "block" in lowered:
        advice = "prd-block"
    elif source == "plan-pr" or "pull request" in lowered:
        advice = "plan-pr"
    else:
        advice = "llm"
    return _render(
        "prd_invalid",
        problems=problems,
        shown=[
            p if len(p) <= MAX_PROBLEM_CHARS else p[: MAX_PROBLEM_CHARS - 1] + "…"
            for p in problems[:MAX_PROBLEMS]
        ],
        more=max(0, len(problems) - MAX_PROBLEMS),
        source=source,
        advice=advice,
        where=_SOURCES.get(source, ""),
        known=source in _SOURCES,
    )


def planning_failed(reason: str) -> str:
    """Planning could not produce a plan (the model failed, or gave nothing usable)."""
    return _render("planning_failed", reason=reason)


def status_reply(state: PlanState) -> str:
    """A short status: the plan's status, story counts, batches, approvals and cost."""
    counts: dict[StoryStatus, int] = {}
    for story in state.prd.stories:
        status = state.stories[story.id].status if story.id in state.stories else StoryStatus.PENDING
        counts[status] = counts.get(status, 0) + 1
    batches = state.batches_ids()
    done = sum(
        1
        for batch in batches
        if all(sid in state.stories and state.stories[sid].status == "passed" for sid in batch)
    )
    spent_tokens, spent_cost = totals(state)
    return _render(
        "status",
        state=state,
        badge=PLAN_BADGE[state.status],
        short=short_hash(state.plan_hash),
        counts=[f"{counts[s]} {s.value}" for s in _COUNT_ORDER if counts.get(s)],
        batches_done=done,
        batches_total=len(batches),
        have=_approvers(state),
        spent_tokens=spent_tokens,
        spent_cost=spent_cost,
    )


def cancelled(state: PlanState, removed_worktrees: int) -> str:
    """The plan was cancelled; `removed_worktrees` running stories were stopped and cleaned up."""
    prs = [b for b in state.batches if b.pr_number and b.pr_url and not b.merged]
    return _render("cancelled", state=state, removed_worktrees=removed_worktrees, prs=prs)


def cost_paused(state: PlanState, limit: float) -> str:
    """Execution paused because the issue reached its budget of `limit` US dollars."""
    spent_tokens, spent_cost = totals(state)
    passed = sum(1 for s in state.stories.values() if s.status == StoryStatus.PASSED)
    remaining = sum(
        1 for s in state.stories.values() if s.status in (StoryStatus.PENDING, StoryStatus.RUNNING)
    )
    return _render(
        "cost_paused",
        state=state,
        limit=limit,
        spent_tokens=spent_tokens,
        spent_cost=spent_cost,
        passed=passed,
        remaining=remaining,
    )


def plan_completed(state: PlanState, *, pull_requests: list[tuple[int, str]], elapsed_minutes: float) -> str:
    """Every story is done; `pull_requests` are (number, URL) pairs to review."""
    spent_tokens, spent_cost = totals(state)
    stories = state.stories.values()
    return _render(
        "plan_completed",
        state=state,
        pull_requests=pull_requests,
        elapsed_minutes=elapsed_minutes,
        passed=sum(1 for s in stories if s.status == StoryStatus.PASSED),
        skipped=sum(1 for s in stories if s.status == StoryStatus.SKIPPED),
        spent_tokens=spent_tokens,
        spent_cost=spent_cost,
    )


def plan_failed(state: PlanState) -> str:
    """Which stories failed and why, what was skipped, and the commands that go on from here."""
    order = [s.id for s in state.prd.stories if s.id in state.stories]
    failed = [(sid, state.stories[sid]) for sid in order if state.stories[sid].status == StoryStatus.FAILED]
    skipped = [sid for sid in order if state.stories[sid].status == StoryStatus.SKIPPED]
    return _render(
        "plan_failed",
        failed=failed,
        skipped=skipped,
        titles={s.id: s.title for s in state.prd.stories},
        first=failed[0][0] if failed else "STORY-…",
    )


def unknown_command(command: str, *, app_url: str | None = None, trigger_label: str = "plan-cascade") -> str:
    """`command` is not a command we know; the reply includes the help text."""
    return _render("unknown_command", command=command, help=help_text(app_url, trigger_label).strip())


def hands_off(branch: str) -> str:
    """Someone else pushed to a bot branch: the bot leaves it alone from now on."""
    return (
        f"Someone else pushed to `{branch}`, so Plan Cascade stops touching this branch; it never "
        "overwrites human work. Continue by hand, or delete the branch to let the bot publish again."
    )


def base_setup_failed(*, label: str, commands: str, output: str, missing: str | None = None) -> str:
    """Setup fails on the plan's unchanged base: nothing ran; `commands` and `output` come fenced.
    `missing`: the program it could not find (exit 127), which is the server's to provide."""
    hint = missing_program_hint(missing) if missing else None
    return _render("base_setup_failed", label=label, commands=commands, output=output, missing=hint)
