"""Rebuilding a batch branch on a new base, keeping its shape: after the previous batch was
squash- or rebase-merged, when the base branch moved, or when a fix landed lower in the stack.

A batch branch is its base plus, on its first-parent line, one `--no-ff` merge per story
(the story branch's own commits) and the fix commits made on it (review, CI). Only the
batch's own commits are replayed, those not reachable from `exclude` (the head of the
previous batch as GitHub merged it, the old base) nor from the new base: each story's commits
are cherry-picked onto the new base (its branch keeps its identity: the same story, rebuilt)
and merged again with the original message; each fix commit is cherry-picked. A story whose
commits conflict with the new base is redone by its agent on top of what is rebuilt so far
(the refactor phase, with both sides of the conflict in its prompt) and gated; when that
fails, nothing moves and the conflicting files are reported.

Nothing here pushes or talks to GitHub: the caller moves refs and publishes (never over
someone else's push).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bot.errors import WorkspaceError
from bot.gates.report import fenced_tail
from bot.orchestration.batch import redo_story
from bot.orchestration.run import Run
from bot.orchestration.scheduler import story_branch
from bot.workspace.worktree import Worktree, add_detached, remove_worktree

log = logging.getLogger(__name__)
TRAILER = "Plan-Cascade-Story"
SIDE_CHARS = 5000
"""Characters of each side of a conflict shown to the agent that redoes the story."""


@dataclass
class Rebuild:
    """What rebuilding one batch gave."""

    batch: int
    old_head: str
    onto: str
    head: str = ""
    """The rebuilt head ("" when the rebuild stopped on a conflict)."""
    tree_changed: bool = True
    replayed: dict[str, str] = field(default_factory=dict)
    """Story id → its rebuilt branch tip (the story's own commits on the new base)."""
    redone: list[str] = field(default_factory=list)
    """Stories the agent redid on the new base because their commits conflicted."""
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    """What could not be brought over (a story id or a commit) → the conflicting files."""

    @property
    def ok(self) -> bool:
        """The whole batch was rebuilt."""
        return bool(self.head) and not self.conflicts


async def rebuild_batch(
    run: Run, batch: int, *, old_head: str, onto: str, exclude: list[str], onto_label: str
) -> Rebuild:
    """Replay batch `batch` (now at `old_head`) onto commit `onto`; see the module's docstring.

    `run` should be a scratch run (its state is not saved): redone stories update its state,
    and the caller takes over what it needs. The local story branches move to their rebuilt
    tips only when the whole batch was rebuilt; otherwise they are put back.
    """
    out = Rebuild(batch=batch, old_head=old_head, onto=onto)
    negative = [f"^{sha}" for sha in [onto, *exclude] if sha]
    listed = await run.mirror.git(
        "rev-list", "--first-parent", "--reverse", "--parents", old_head, *negative, "--"
    )
    chain = [line.split() for line in listed.stdout.splitlines() if line.strip()]
    ids = run.state.batches_ids()[batch - 1] if batch <= len(run.state.batches_ids()) else []
    before = {sid: await _ref(run, story_branch(run.branch_prefix, sid)) for sid in ids}
    wt = await add_detached(run.mirror, path=run.work_root / f"restack-{batch}", ref=onto)
    try:
        await _replay(run, wt, out, chain, negative, onto_label)
    finally:
        try:
            await remove_worktree(wt)
        except WorkspaceError as exc:
            log.warning("could not remove the restack worktree: %s", exc.message)
        if not out.ok:  # nothing moves (also when cancelled): the story branches go back
            for sid, sha in before.items():
                if sha:
                    await run.mirror.git(
                        "update-ref", f"refs/heads/{story_branch(run.branch_prefix, sid)}", sha
                    )
    if not out.ok:
        return out
    for sid, sha in out.replayed.items():
        await run.mirror.git("update-ref", f"refs/heads/{story_branch(run.branch_prefix, sid)}", sha)
    trees = await run.mirror.git("rev-parse", f"{old_head}^{{tree}}", f"{out.head}^{{tree}}")
    old_tree, new_tree = trees.stdout.split()
    out.tree_changed = old_tree != new_tree
    return out


async def _replay(
    run: Run,
    wt: Worktree,
    out: Rebuild,
    chain: list[list[str]],
    negative: list[str],
    onto_label: str,
) -> None:
    """The old batch's first-parent commits, one by one, on top of `out.onto`; `out.head` is set
    when all of them came over."""
    identity = (run.author.name, run.author.email)
    mapping: dict[str, str] = {}
    tip = out.onto
    for commit, *parents in chain:
        if len(parents) == 1:
            files = await _cherry_pick(wt, tip, [commit], identity)
            if files is not None:
                out.conflicts[f"commit {commit[:12]}"] = files
                return
        elif len(parents) == 2:
            if not await _replay_story(run, wt, out, commit, parents, tip, mapping, negative, onto_label):
                return
        else:
            out.conflicts[f"commit {commit[:12]}"] = [f"a merge of {len(parents)} parents"]
            return
        tip = (await wt.git("rev-parse", "HEAD")).stdout.strip()
        mapping[commit] = tip
    out.head = tip


async def _replay_story(
    run: Run,
    wt: Worktree,
    out: Rebuild,
    merge: str,
    parents: list[str],
    tip: str,
    mapping: dict[str, str],
    negative: list[str],
    onto_label: str,
) -> bool:
    """One story merge of the old batch, on top of `tip`: the story's commits replayed onto the
    new counterpart of where they started, then merged with the original message. A conflict
    sends the story to its agent. False when it could not be brought over (in `out.conflicts`)."""
    first, side = parents
    sid = await _story_of(wt, side)
    message = (await wt.git("log", "-1", "--format=%B", merge)).stdout
    listed = await wt.git("rev-list", "--reverse", "--no-merges", side, f"^{first}", *negative, "--")
    own = listed.stdout.split()
    fork = (await wt.git("merge-base", first, side)).stdout.strip()
    identity = (run.author.name, run.author.email)
    files = await _cherry_pick(wt, mapping.get(fork, out.onto), own, identity)
    if files is None:
        story_tip = (await wt.git("rev-parse", "HEAD")).stdout.strip()
        files = await _merge(wt, tip, story_tip, message, identity)
        if files is None:
            if sid is not None:
                out.replayed[sid] = story_tip
            return True
    if sid is None or sid not in run.state.stories:
        out.conflicts[f"commit {side[:12]}"] = files
        return False
    feedback = await _conflict_feedback(wt, sid, files, fork=fork, side=side, tip=tip, onto_label=onto_label)
    why = f"conflicted with the new base in {', '.join(files[:5])}; redone on top of it"
    if not await redo_story(run, sid, tip, why=why, feedback=feedback):
        out.conflicts[sid] = files
        return False
    redone_tip = await _ref(run, story_branch(run.branch_prefix, sid)) or ""
    files = await _merge(wt, tip, redone_tip, f"Merge {sid} (rebased) into batch {out.batch}", identity)
    if files is not None:
        out.conflicts[sid] = files
        return False
    out.redone.append(sid)
    out.replayed.pop(sid, None)
    return True


async def _cherry_pick(
    wt: Worktree, start: str, commits: list[str], identity: tuple[str, str]
) -> list[str] | None:
    """`commits` replayed onto `start` (HEAD ends on the last); None, or the conflicting files."""
    await wt.git("checkout", "--quiet", "--force", "--detach", start)
    if not commits:
        return None
    picked = await wt.git(
        "cherry-pick", "--allow-empty", "--keep-redundant-commits", *commits, check=False, identity=identity
    )
    if picked.returncode == 0:
        return None
    files = await _unmerged(wt)
    await wt.git("cherry-pick", "--abort", check=False)
    return files or ["(no file named)"]


async def _merge(
    wt: Worktree, tip: str, side: str, message: str, identity: tuple[str, str]
) -> list[str] | None:
    """A `--no-ff` merge of `side` into `tip` (HEAD ends on it); None, or the conflicting files."""
    await wt.git("checkout", "--quiet", "--force", "--detach", tip)
    args = ["merge", "--no-ff", "--no-edit", "--no-verify", "--no-gpg-sign", "-m", message.strip(), side]
    merged = await wt.git(*args, check=False, identity=identity)
    if merged.returncode == 0:
        return None
    files = await _unmerged(wt)
    await wt.git("merge", "--abort", check=False)
    return files or ["(no file named)"]


async def _unmerged(wt: Worktree) -> list[str]:
    listed = await wt.git("diff", "--name-only", "--diff-filter=U", "-z", check=False)
    return sorted(name for name in listed.stdout.split("\0") if name)


async def _story_of(wt: Worktree, commit: str) -> str | None:
    """The story a commit belongs to, from the trailer the bot writes on every story commit."""
    found = await wt.git("log", "-1", f"--format=%(trailers:key={TRAILER},valueonly)", commit, check=False)
    values = [line.strip() for line in found.stdout.splitlines() if line.strip()]
    return values[-1] if values else None


async def _ref(run: Run, branch: str) -> str | None:
    found = await run.mirror.git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    return found.stdout.strip() or None


async def _conflict_feedback(
    wt: Worktree, sid: str, files: list[str], *, fork: str, side: str, tip: str, onto_label: str
) -> str:
    """Both sides of the conflict: what the story changed, and what its new base changed since."""
    paths = ["--", *files[:20]]
    ours = await wt.git("diff", "--no-color", "--no-ext-diff", fork, side, *paths, check=False)
    theirs = await wt.git("diff", "--no-color", "--no-ext-diff", fork, tip, *paths, check=False)
    return (
        f"{sid} was done before, but its change now conflicts with {onto_label} in "
        f"{', '.join(files[:20])}. Do the story again on top of the current code, keeping what "
        "the new base changed.\n\n"
        f"What {sid} changed in these files before:\n\n{fenced_tail(ours.stdout, budget=SIDE_CHARS)}\n\n"
        f"What the new base changed in them since {sid} was written:\n\n"
        f"{fenced_tail(theirs.stdout, budget=SIDE_CHARS)}"
    )
