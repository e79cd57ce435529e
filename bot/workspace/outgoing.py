"""What a push would carry: the lines added by each commit not yet scanned, and the scan of them.

A push sends every commit between what the remote has and the new head, not just their sum:
a credential added by one commit and removed by the next still travels. So each commit of
`since..head` is read on its own (`git log -p`), with the bot's hardened git, as text
(`--text`: a credential in a file git thinks binary is found too), without the repository's
diff drivers or text conversions (`--no-ext-diff --no-textconv`), rename-aware (a moved file
adds no lines), and with at most `MAX_DIFF_BYTES` read: a bigger change is refused whole,
since what was not read cannot be said to be clean. Every path a commit adds, copies or renames
to is scanned as well, with the same rules: a name is pushed too.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence

from bot.network.secretscan import NAME_LINE, AddedLine, Finding, scan
from bot.workspace.git import OutputTooLarge
from bot.workspace.worktree import Worktree

MAX_DIFF_BYTES = 64 * 2**20
"""Diff text a scan reads at most; past it the change is refused (rule `TOO_LARGE`)."""
TOO_LARGE = "change too large to scan"
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", '"': '"', "\\": "\\"}


def added_lines(diff: str) -> Iterator[AddedLine]:
    """The added lines of `git log -p -U0` output, each with its file and line number."""
    path: str | None = None
    number = 0
    in_hunk = False
    for raw in diff.split("\n"):
        if in_hunk and raw[:1] == "+":
            if path is not None:
                yield AddedLine(path, number, raw[1:])
            number += 1
            continue
        if in_hunk and raw[:1] in ("-", "\\"):
            continue
        in_hunk = False
        if raw.startswith("+++ "):
            # git ends the line with a TAB when the name holds a space; a TAB in a name is quoted.
            target = raw[4:].removesuffix("\t")
            path = None if target == "/dev/null" else _unquote(target).removeprefix("b/")
        elif raw.startswith("diff --git "):
            path = None
        elif raw.startswith("@@ "):
            match = _HUNK.match(raw)
            if match:
                number, in_hunk = int(match.group(1)), True


def _unquote(name: str) -> str:
    """A path as git prints it: C-quoted when it holds unusual characters."""
    if not (len(name) >= 2 and name[0] == '"' and name[-1] == '"'):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 == len(body):
            out += char.encode()
            i += 1
        elif body[i + 1] in "01234567":
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out += _ESCAPES.get(body[i + 1], body[i + 1]).encode()
            i += 2
    return out.decode("utf-8", errors="replace")


async def commits_diff(wt: Worktree, *, since: str, head: str) -> str:
    """The patches of every commit in `since..head`, oldest first (raises OutputTooLarge)."""
    result = await wt.mirror.git(
        "-c", "core.quotepath=on",
        "log", "--reverse", "-p", "-U0", "--text", "--no-color", "--no-ext-diff", "--no-textconv",
        "--find-renames", "--diff-merges=first-parent", "--format=%x00commit %H",
        "--end-of-options", f"{since}..{head}", "--",
        max_output=MAX_DIFF_BYTES,
    )  # fmt: skip
    return result.stdout


async def added_paths(wt: Worktree, *, since: str, head: str) -> list[str]:
    """Every path a commit of `since..head` adds, copies or renames to, once each: a name is
    pushed too (an empty file adds no line, a rename none)."""
    result = await wt.mirror.git(
        "log", "--format=", "--name-only", "-z", "--diff-filter=ACR", "--find-renames",
        "--diff-merges=first-parent", "--no-ext-diff", "--no-textconv",
        "--end-of-options", f"{since}..{head}", "--",
        max_output=MAX_DIFF_BYTES,
    )  # fmt: skip
    return list(dict.fromkeys(p.strip("\n") for p in result.stdout.split("\0") if p.strip("\n")))


async def outgoing_secrets(
    wt: Worktree, *, since: str, head: str, known: Sequence[str], ignore: Sequence[str]
) -> list[Finding]:
    """Credentials in what pushing `head` would send beyond `since`, in its lines and in its
    paths (empty: it may go)."""
    try:
        diff = await commits_diff(wt, since=since, head=head)
        paths = await added_paths(wt, since=since, head=head)
    except OutputTooLarge:
        return [Finding(f"more than {MAX_DIFF_BYTES // 2**20} MB of changes", 0, TOO_LARGE)]
    names = [AddedLine(path, NAME_LINE, path) for path in paths]
    # The rules' regular expressions over every added line (and every path) are CPU work: off the loop.
    return await asyncio.to_thread(lambda: scan([*added_lines(diff), *names], known=known, ignore=ignore))


async def uncommit(wt: Worktree, *, to: str) -> None:
    """Move the branch back to commit `to` (a sha), keeping the commits' changes staged in the worktree."""
    if not re.fullmatch(r"[0-9a-f]{40,64}", to):
        raise ValueError(f"not a commit sha: {to!r}")
    await wt.git("reset", "--soft", to)
