"""The roll-up `plan-cascade` check of a batch: one per batch head, from its stories and gates,
updated in place when it exists; carried to a new head with the same tree."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bot.errors import GitHubError
from bot.gates.ci import rollup_verdict
from bot.github.port import GitHubPort
from bot.plan.state import PlanState

log = logging.getLogger(__name__)


async def post_rollup(
    port: GitHubPort,
    repo: str,
    state: PlanState,
    *,
    batch: int,
    head: str,
    merged: list[str],
    integration: Mapping[str, str],
    unmet: str | None = None,
) -> None:
    """The `plan-cascade` check of batch `batch` on `head`, from its stories and gates."""
    verdict, title = rollup_verdict(state, batch, merged, integration, unmet=unmet)
    lines = [_story_line(state, sid) for sid in state.batches_ids()[batch - 1]]
    lines += [f"- integration `{n}`: {c}" for n, c in integration.items()]
    lines += [f"- {unmet}"] if unmet else []
    output = {"title": title, "summary": "\n".join(lines)}
    await write_rollup(port, repo, head=head, batch=batch, conclusion=verdict, output=output)


def _story_line(state: PlanState, story_id: str) -> str:
    """`- STORY-001: passed`, and what the egress proxy refused it, when it refused anything."""
    record = state.stories[story_id]
    line = f"- {story_id}: {record.status.value}"
    if record.blocked:
        shown = ", ".join(f"`{b.target}` ×{b.count} ({b.by})" for b in record.blocked[:5])
        more = f" and {len(record.blocked) - 5} more" if len(record.blocked) > 5 else ""
        line += f" · network blocked: {shown}{more} (see the pull request)"
    return line


async def carry_rollup(port: GitHubPort, repo: str, *, batch: int, old: str, new: str) -> None:
    """Batch `batch`'s roll-up check of `old` on `new`, a commit with the same tree (a restack
    that changed nothing): its checks hold for it. A GitHub error is logged, never raised."""
    try:
        runs = await port.list_check_runs_for_ref(repo, old, check_name="plan-cascade")
    except GitHubError as exc:
        log.warning("could not read the roll-up of %s: %s", old[:12], exc.message)
        return
    found = next((r for r in runs if r.external_id == f"batch-{batch}" and r.conclusion), None)
    if found is None:
        return
    summary = f"Carried over from {old[:12]}: the same tree.\n\n{found.summary}".strip()
    output = {"title": found.title or found.name, "summary": summary}
    await write_rollup(
        port, repo, head=new, batch=batch, conclusion=found.conclusion or "neutral", output=output
    )


async def write_rollup(
    port: GitHubPort, repo: str, *, head: str, batch: int, conclusion: str, output: Mapping[str, str]
) -> None:
    """The `plan-cascade` check of batch `batch` on `head`: updated when it exists (a publish redone
    after a crash, CI judged later), created otherwise. A GitHub error is logged, never raised."""
    try:
        existing = [
            r
            for r in await port.list_check_runs_for_ref(repo, head, check_name="plan-cascade")
            if r.external_id == f"batch-{batch}"
        ]
        if existing:
            await port.update_check_run(
                repo, existing[0].id, status="completed", conclusion=conclusion, output=output
            )
            return
        await port.create_check_run(
            repo,
            name="plan-cascade",
            head_sha=head,
            status="completed",
            conclusion=conclusion,
            external_id=f"batch-{batch}",
            output=output,
        )
    except GitHubError as exc:
        log.warning("could not write the roll-up check of batch %s: %s", batch, exc.message)
