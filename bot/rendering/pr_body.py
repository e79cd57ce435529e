"""The body and title of a batch pull request. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping

from bot.plan import Strategy, short_hash
from bot.plan.records import DependencyRecord
from bot.plan.state import PlanState, StoryStatus
from bot.rendering.jinja import html_inline, md_cell, template_env

BATCH_MARKER = "<!-- plan-cascade:batch {repo}#{issue} {batch} -->"
_MARKER = re.compile(r"<!-- plan-cascade:batch (\S+)#(\d+) (\d+) -->")
BODY_LIMIT = 65536
_GHSA = re.compile(r"GHSA(?:-[0-9a-z]{4}){3}")


def batch_marker(repo: str, issue: int, batch: int) -> str:
    """The hidden line that identifies a batch PR."""
    return BATCH_MARKER.format(repo=repo, issue=issue, batch=batch)


def parse_batch_marker(body: str | None) -> tuple[str, int, int] | None:
    """(repo, issue, batch) of a batch PR body, or None: only the marker the bot writes as the
    body's first line counts (the rest holds a model's text, defused, but never read for markers)."""
    first = (body or "").lstrip().split("\n", 1)[0].strip()
    match = _MARKER.fullmatch(first)
    return (match.group(1), int(match.group(2)), int(match.group(3))) if match else None


def pr_title(state: PlanState, batch: int, story_ids: list[str]) -> str:
    """`[Plan Cascade] #12 batch 1/3: <short summary>` (a direct plan: `[Plan Cascade] #12: <title>`)."""
    total = len(state.batches_ids())
    titles = [state.prd.story(sid).title for sid in story_ids]
    summary = "; ".join(titles)
    if len(summary) > 60:
        summary = summary[:57].rstrip() + "…"
    if state.prd.strategy is Strategy.DIRECT:
        return f"[Plan Cascade] #{state.issue}: {summary}"
    return f"[Plan Cascade] #{state.issue} batch {batch}/{total}: {summary}"


def pr_body(
    state: PlanState,
    batch: int,
    story_ids: list[str],
    *,
    plan_url: str,
    integration: Mapping[str, str],
    draft_reason: str | None = None,
    base_note: str | None = None,
    review_note: str | None = None,
) -> str:
    """The PR body from `templates/pr_body.md.j2`, within GitHub's size limit."""
    total = len(state.batches_ids())
    batch_ids = state.batches_ids()[batch - 1]
    stories = []
    for sid in story_ids:
        story, record = state.prd.story(sid), state.stories[sid]
        passed = record.status == StoryStatus.PASSED
        checks = record.acceptance if len(record.acceptance) == len(story.acceptance_criteria) else []
        criteria = [
            {
                "text": text,
                "ticked": checks[n].verdict == "met" if checks else passed,
                "verdict": checks[n].verdict if checks else None,
                "evidence": checks[n].evidence if checks else "",
            }
            for n, text in enumerate(story.acceptance_criteria)
        ]
        stories.append(
            {
                "id": sid,
                "title": story.title,
                "description": story.description,
                "criteria": criteria,
                "reviewed": bool(checks),
                "gates": ", ".join(f"{k}: {v}" for k, v in sorted(record.gates.items())) or "—",
                "agent": record.agent or "—",
                "model": record.model or "—",
                "attempts": record.attempts,
                "tokens": record.tokens,
                "cached": record.cached_tokens,
                "cost": record.cost_usd,
            }
        )
    dependencies = [
        {"story": sid, **_dependency_row(record)}
        for sid in story_ids
        for record in state.stories[sid].dependencies
    ]
    mcp_tools = [
        {"story": sid, "tool": md_cell(name), "calls": use.calls, "failed": use.failed}
        for sid in story_ids
        for name, use in sorted(state.stories[sid].mcp_tools.items())
    ]
    failed = [
        {"id": sid, "reason": state.stories[sid].reason or state.stories[sid].status.value}
        for sid in batch_ids
        if sid not in story_ids
    ]
    # What the egress proxy refused the batch's stories (those left out too: it may be why).
    blocked = [
        {"story": sid, "by": b.by, "target": b.target, "count": b.count, "allow": b.allow}
        for sid in batch_ids
        if sid in state.stories
        for b in state.stories[sid].blocked
    ]
    body = (
        template_env()
        .get_template("pr_body.md.j2")
        .render(
            marker=batch_marker(state.repo, state.issue, batch),
            closes=batch == total,
            issue=state.issue,
            batch=batch,
            total=total,
            plan_url=plan_url,
            revision=state.revision,
            short_hash=short_hash(state.plan_hash),
            stories=stories,
            failed=failed,
            dependencies=dependencies,
            mcp_tools=mcp_tools,
            dependencies_more=sum(state.stories[sid].dependencies_more for sid in story_ids),
            blocked=blocked,
            integration=integration,
            draft_reason=draft_reason,
            base_note=base_note,
            review_note=review_note,
            review_cost=state.review_cost_usd,
            total_tokens=sum(s["tokens"] for s in stories),
            total_cached=sum(s["cached"] for s in stories),
            total_cost=sum(s["cost"] for s in stories),
        )
    )
    if len(body) > BODY_LIMIT:
        note = "\n\n_(trimmed to GitHub's size limit; see the plan comment for the rest)_"
        body = body[: BODY_LIMIT - len(note)] + note
    return body


def _cell(value: object) -> str:
    """Untrusted text (from files an agent wrote) in a table cell: no HTML, no mention, no `|`."""
    return md_cell(html_inline(str(value).replace("`", "'")))


def _dependency_row(record: DependencyRecord) -> dict[str, str]:
    """A package version's cells: untrusted names escaped, advisories linked to their pages as
    GitHub named them (`html_url`: on an Enterprise Server, its own host)."""
    version = _cell(record.version) + (f" (was {_cell(record.previous)})" if record.previous else "")
    if not record.exact:
        status = "a range: not looked up"
    elif not record.checked:
        status = "not checked"
    elif not record.advisories:
        status = "no known advisory"
    else:
        notes = []
        for note in record.advisories:
            linked = _GHSA.fullmatch(note.id) and (note.url or "").startswith(("https://", "http://"))
            url = (note.url or "").replace(" ", "%20").replace(")", "%29").replace("|", "%7C")
            link = f"[{note.id}]({url})" if linked else _cell(note.id)  # GitHub's link, on its host
            kind = "malware" if note.malware else _cell(note.severity)
            fix = f", fixed in {_cell(note.fixed)}" if note.fixed and not note.malware else ""
            notes.append(f"⚠️ {link} ({kind}{fix})")
        status = "; ".join(notes)
    return {
        "package": f"`{md_cell(record.name).replace('`', '')}` ({_cell(record.ecosystem)})",
        "version": version,
        "status": status,
    }
