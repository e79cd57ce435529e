"""The terminal's views of a plan: pure functions from state to rich renderables.

`bot.rendering` writes Markdown for GitHub; these are the local equivalents (a story
table, the batches, the dependency tree, progress, the summary and the list of runs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from bot.local.store import LocalRun
from bot.orchestration.scheduler import batch_branch
from bot.plan.state import PlanState, StoryStatus, totals

STATUS_STYLE: dict[StoryStatus, tuple[str, str]] = {
    StoryStatus.PENDING: ("·", "dim"),
    StoryStatus.RUNNING: ("…", "yellow"),
    StoryStatus.PASSED: ("✓", "green"),
    StoryStatus.FAILED: ("✗", "red"),
    StoryStatus.SKIPPED: ("-", "magenta"),
    StoryStatus.CANCELLED: ("x", "dim"),
}
EXAMPLE_AGENT_NOTE = "example agent: writes canned changes; not an AI"


def status_text(status: StoryStatus) -> Text:
    """`✓ passed` in the status's colour."""
    mark, style = STATUS_STYLE[status]
    return Text(f"{mark} {status.value}", style=style)


def batch_numbers(state: PlanState) -> dict[str, int]:
    """Story id -> its batch, from 1."""
    return {sid: n for n, ids in enumerate(state.batches_ids(), start=1) for sid in ids}


def story_counts(state: PlanState) -> Counter[str]:
    """How many stories are in each status (by status value)."""
    return Counter(s.status.value for s in state.stories.values())


def plan_view(state: PlanState) -> RenderableType:
    """The plan before approval: title, stories, batches and the dependency tree."""
    prd = state.prd
    header = Text.assemble(
        (prd.title, "bold"), f"  ({len(prd.stories)} stories, plan {state.plan_hash[:12]})"
    )
    table = Table(title="Stories", title_justify="left", expand=False)
    for column in ("Batch", "ID", "Title", "Type", "Depends on", "Acceptance criteria"):
        table.add_column(column, overflow="fold")
    batch = batch_numbers(state)
    for story in prd.stories:
        table.add_row(
            str(batch[story.id]),
            story.id,
            story.title,
            story.type.value,
            ", ".join(story.depends_on) or "-",
            "\n".join(f"• {c}" for c in story.acceptance_criteria),
        )
    batches = Text("Batches: " + "  →  ".join(f"{n}: {', '.join(ids)}" for n, ids in _numbered(state)))
    parts: list[RenderableType] = [header]
    if prd.summary:
        parts.append(Text(prd.summary))
    parts += [table, batches, dependency_tree(state)]
    if state.setup:
        parts.append(
            Text(
                f"Environment ({state.setup_source}"
                + (f" from {', '.join(state.setup_read)}" if state.setup_read else "")
                + ", before each story, with network): "
                + " && ".join(state.setup)
                + "".join(f"\nnote: {note}" for note in state.setup_notes)
            )
        )
    if state.warnings:
        parts.append(Text("\n".join(f"warning: {w}" for w in state.warnings), style="yellow"))
    return Group(*parts)


def _numbered(state: PlanState) -> list[tuple[int, list[str]]]:
    return list(enumerate(state.batches_ids(), start=1))


def dependency_tree(state: PlanState) -> Tree:
    """Stories under the stories they depend on; one shown twice is marked `(see above)`."""
    prd = state.prd
    dependents: dict[str, list[str]] = {s.id: [] for s in prd.stories}
    for story in prd.stories:
        for dep in story.depends_on:
            dependents[dep].append(story.id)
    tree = Tree("Dependencies")
    shown: set[str] = set()

    def add(node: Tree, sid: str) -> None:
        if sid in shown:
            node.add(Text(f"{sid} (see above)", style="dim"))
            return
        shown.add(sid)
        branch = node.add(f"{sid} {prd.story(sid).title}")
        for child in dependents[sid]:
            add(branch, child)

    for story in prd.stories:
        if not story.depends_on:
            add(tree, story.id)
    return tree


def progress_table(state: PlanState) -> Table:
    """One row per story: batch, status, attempts, gates, tokens and cost."""
    tokens, cost = totals(state)
    table = Table(title=f"{state.prd.title}: {state.status.value}", title_justify="left")
    for column in ("Batch", "Story", "Status", "Attempts", "Gates", "Tokens", "Cost"):
        table.add_column(column)
    batch = batch_numbers(state)
    for story in state.prd.stories:
        record = state.stories[story.id]
        gates = " ".join(f"{n}:{'ok' if c == 'success' else c}" for n, c in record.gates.items())
        table.add_row(
            str(batch[story.id]),
            f"{story.id} {story.title}",
            status_text(record.status),
            str(record.attempts),
            gates or "-",
            f"{record.tokens:,}",
            f"${record.cost_usd:.2f}",
        )
    table.caption = f"total {tokens:,} tokens, ${cost:.2f}"
    return table


def summary_lines(
    record: LocalRun, *, notes: Sequence[str] = (), remote: str | None = "origin"
) -> list[Text]:
    """What happened, which branches exist in the user's repository, and how to go on.

    `remote` is the repository's remote to push to (None: it has none, as the demo's: then the
    branches are shown, not pushed). Print them with `soft_wrap=True`: the commands in them must
    stay whole to be copied.
    """
    state = record.state
    counts = story_counts(state)
    tokens, cost = totals(state)
    lines = [
        Text(f"Run {record.id}: {state.status.value}", style="bold"),
        Text(
            f"stories: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
            f"{counts['pending'] + counts['running']} not run; {tokens:,} tokens, ${cost:.2f}"
        ),
    ]
    for story in state.prd.stories:
        st = state.stories[story.id]
        if st.status in (StoryStatus.FAILED, StoryStatus.SKIPPED) and st.reason:
            lines.append(
                Text(f"  {story.id} {st.status.value}: {st.reason}", style=STATUS_STYLE[st.status][1])
            )
    lines += acceptance_lines(state)
    branches = [(b.number, b.branch) for b in state.batches if b.branch and not b.hands_off]
    if branches:
        lines.append(Text(f"Branches created in {record.repo}:"))
        lines += [Text(f"  {branch}") for _, branch in branches]
        bases = [
            (branch, record.base_branch if number == 1 else batch_branch(record.branch_prefix, number - 1))
            for number, branch in branches
        ]
        if remote is None:
            lines.append(Text("This repository has no remote to push them to; see what each batch changed:"))
            lines += [Text(f"  git -C {record.repo} log --stat {base}..{branch}") for branch, base in bases]
        else:
            lines.append(Text("Push them:"))
            lines += [Text(f"  git push {remote} {branch}") for branch, _ in bases]
            lines.append(Text("Then open pull requests (each batch on the one before):"))
            lines += [Text(f"  gh pr create --head {branch} --base {base} --fill") for branch, base in bases]
    else:
        lines.append(Text("No branch was created."))
    lines += [Text(f"note: {n}", style="yellow") for n in notes]
    if not record.finished:
        lines.append(Text(f"Resume with: plan-cascade resume {record.id} --repo {record.repo}"))
    return lines


def acceptance_lines(state: PlanState) -> list[Text]:
    """What the acceptance reviews found: a count, then every criterion not met, with why."""
    verdicts = [(sid, n, c) for sid, st in state.stories.items() for n, c in enumerate(st.acceptance, 1)]
    if not verdicts:
        return []
    met = sum(c.verdict == "met" for _, _, c in verdicts)
    lines = [Text(f"acceptance review: {met} of {len(verdicts)} criteria met (${state.review_cost_usd:.2f})")]
    for sid, n, check in verdicts:
        if check.verdict == "not_met":
            why = f": {check.evidence}" if check.evidence else ""
            lines.append(Text(f"  {sid} criterion {n} not met{why}", style="red"))
    return lines


def status_table(records: list[LocalRun]) -> Table:
    """Local runs, most recent first, with their status and story counts."""
    table = Table(title="Local runs", title_justify="left")
    for column in ("Run", "Status", "Passed", "Failed", "Skipped", "Left", "Updated", "Title"):
        table.add_column(column, overflow="fold")
    for record in records:
        counts = story_counts(record.state)
        table.add_row(
            record.id,
            record.state.status.value,
            str(counts["passed"]),
            str(counts["failed"]),
            str(counts["skipped"]),
            str(counts["pending"] + counts["running"]),
            record.updated_at.strftime("%Y-%m-%d %H:%M"),
            record.state.prd.title,
        )
    return table
