"""What the bot says when it keeps the batch pull requests on their base. Pure.

File names come from the repository and are untrusted: they pass through `md_code`.
"""

from __future__ import annotations

from bot.rendering.jinja import COMMAND, md_code, md_inline

MAX_FILES = 10


def _files(files: list[str]) -> str:
    shown = ", ".join(md_code(f) for f in files[:MAX_FILES])
    return shown + (f" and {len(files) - MAX_FILES} more" if len(files) > MAX_FILES else "")


def merged_elsewhere(
    *, batch: int, pr: int, into: str, base: str, waits_for: tuple[int, int | None] | None
) -> str:
    """A batch PR was merged into a branch other than the base branch: it delivers nothing yet."""
    head = f"#{pr} (batch {batch}) was merged into `{into}`, not `{base}`: its work is not on `{base}`"
    if waits_for is not None:
        number, holder_pr = waits_for
        where = f" (#{holder_pr})" if holder_pr else ""
        return (
            f"{head} yet. It counts as merged once batch {number}{where}, which now carries it, is merged "
            f"into `{base}`."
        )
    return (
        f"{head}, and nothing will bring it there by itself. The plan keeps waiting for it: "
        f"comment `{COMMAND} rebase` on the issue to open a new pull request for batch {batch} "
        f"against `{base}`."
    )


def restacked(
    *,
    onto: str,
    cause: str,
    tree_changed: bool,
    redone: list[str],
    gates: str | None,
) -> str:
    """The PR's short note after the bot rebuilt its branch on a new base."""
    what = f"Rebased onto {onto} {cause}".rstrip() + "."
    if redone:
        verb = "was" if len(redone) == 1 else "were"
        what += f" {', '.join(redone)} conflicted with it and {verb} redone by the agent on top of it."
    if not tree_changed:
        return f"{what} Same changes (the same tree): the checks carry over."
    return f"{what} The code changed: gates re-ran ({gates or 'none configured'})."


FAILED = "Plan Cascade could not bring this batch onto"
NOTE_MARKER = "<!-- plan-cascade:stack-note -->"


def failed_before(note: str | None) -> bool:
    """Whether a batch's last stack note says its rebuild failed (its PR was made a draft for it)."""
    return (note or "").startswith(FAILED)


def with_note(body: str | None, note: str) -> str:
    """A pull request body with the stack note in place of the one before (under the first two
    lines: the bot's marker and the batch's headline), everything else as it was."""
    lines = [line for line in (body or "").split("\n") if not line.endswith(NOTE_MARKER)]
    head, rest = lines[:2], lines[2:]
    return "\n".join([*head, "", f"> {md_inline(note.splitlines()[0])} {NOTE_MARKER}", *rest])


def restack_failed(*, onto: str, cause: str, conflicts: dict[str, list[str]], branch: str) -> str:
    """The batch could not be rebuilt on its new base: which files conflict, what to do."""
    lines = [
        f"{FAILED} {onto} {cause}".rstrip() + ": the replay conflicts and the agent could not redo it.",
        "",
    ]
    lines += [f"- {what}: {_files(files)}" for what, files in conflicts.items()]
    lines += [
        "",
        f"The branch `{branch}` is unchanged and this pull request stays a draft. Resolve the "
        f"conflicts by hand, or comment `{COMMAND} rebase` to try again.",
    ]
    return "\n".join(lines)


def rebuild_error(*, onto: str, cause: str, error: str) -> str:
    """Git failed while rebuilding the batch: nothing moved."""
    return (
        f"Plan Cascade could not rebuild this batch on {onto} {cause}".rstrip()
        + f": {md_inline(error[:500])}. The branch is unchanged; comment `{COMMAND} rebase` to try again."
    )


def someone_pushed(*, branch: str, seen: str | None, onto: str, exclude: str | None) -> str:
    """Someone else pushed to a batch branch: the bot will not rewrite it; how to do it by hand."""
    now = f" (now `{seen[:12]}`, a commit Plan Cascade did not push)" if seen else " (it is gone)"
    upstream = exclude or "<the commit it was built on>"
    return (
        f"Someone else pushed to `{branch}`{now}, so Plan Cascade will not rebuild it on {onto}: "
        "it never force-pushes over a person's work, and an amended or rebased commit is that "
        "person's even when it keeps the bot's author. To do it by hand:\n\n"
        "```sh\n"
        f"git fetch origin\n"
        f"git rebase --rebase-merges --onto {onto} {upstream} {branch}\n"
        f"git push --force-with-lease origin {branch}\n"
        "```"
    )


def not_reopened(*, branch: str, seen: str, why: str) -> str:
    """A stranded batch's branch holds a commit the bot did not push: it is not put back."""
    return (
        f"Batch branch `{branch}` needs a new pull request ({why}), but it now holds `{seen[:12]}`, "
        "a commit Plan Cascade did not push, so Plan Cascade did not put its own head back nor "
        "open the pull request: it never force-pushes over a person's work. Open the pull request "
        f"from `{branch}` yourself when it is ready."
    )


def up_to_date(prs: list[int], base: str) -> str:
    """`rebase` found nothing to do."""
    listed = ", ".join(f"#{n}" for n in prs) or "no open batch pull request"
    return f"Already up to date with `{base}`: {listed}."


def rebase_done(done: list[tuple[int, str]]) -> str:
    """The reply to `rebase`: each pull request and what happened to it."""
    return "\n".join(f"- #{pr}: {what}" for pr, what in done) or "Nothing to rebase."
