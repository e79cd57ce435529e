"""What a push would carry: the lines added by each commit not yet scanned, and the scan of them.

A push sends every commit between what the remote has and the new head, not just their sum:
a credential added by one commit and removed by the next still travels. So each commit of
`since..head` is read on its own, in one `git log -p --raw -z`, with the bot's hardened git, as
text (`--text`: a credential in a file git thinks binary is found too), without the repository's
diff drivers or text conversions (`--no-ext-diff --no-textconv`), rename-aware (a moved file
adds no lines), and with at most `MAX_DIFF_BYTES` read: a bigger change is refused whole,
since what was not read cannot be said to be clean. Every path a commit adds, copies or renames
to (its `--raw` record, NUL-separated: read whole, whatever the name holds) is scanned as well,
with the same rules: a name is pushed too.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Iterator, Sequence

from bot.network.secretscan import NAME_LINE, AddedLine, Finding, scan
from bot.workspace.git import OutputTooLarge
from bot.workspace.worktree import Worktree

MAX_DIFF_BYTES = 64 * 2**20
"""Log text (patches and their raw records) a scan reads at most; past it the change is refused
(rule `TOO_LARGE`)."""
TOO_LARGE = "change too large to scan"
INLINE_SCAN = 2048
"""Characters of log scanned on the event loop (~50 added lines, ~1 ms at most); a larger one is
scanned in a thread (a hand-off and back took ~3 ms under load, more than the scan of a few lines)."""
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_COMMIT = re.compile(r"\0commit [0-9a-f]{40,64}\0(\n?)")
"""A commit's header in `commits_diff` (`-z` ends it with NUL; a newline follows when it changed
something)."""
_RAW = re.compile(r":[0-7]{6} [0-7]{6} [0-9a-f]+ [0-9a-f]+ ([ACDMRTUX])[0-9]*\0")
"""One `--raw -z` record up to its path(s): two for a copy or a rename (from, to), else one."""
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", '"': '"', "\\": "\\"}


def added_lines(diff: str) -> Iterator[AddedLine]:
    """The added lines of `git log -p -U0` patches, each with its file and line number."""
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
    """Every commit of `since..head`, oldest first: its header, its raw records (`-z`), its
    patch (see `read_log`; raises OutputTooLarge)."""
    result = await wt.mirror.git(
        "-c", "core.quotepath=on",
        "log", "--reverse", "-p", "--raw", "-z", "-U0", "--text", "--no-color", "--no-ext-diff",
        "--no-textconv", "--find-renames", "--diff-merges=first-parent", "--format=%x00commit %H",
        "--end-of-options", f"{since}..{head}", "--",
        max_output=MAX_DIFF_BYTES,
    )  # fmt: skip
    return result.stdout


def read_log(log: str) -> tuple[list[AddedLine], list[str]]:
    """The added lines of `commits_diff` output, and every path a commit adds, copies or renames
    to, once each, newest commit first (a name is pushed too: an empty file adds no line, a
    rename none). Raises ValueError on output that is not such a log.

    Each commit is `\\0commit <sha>\\0`; when it changed something, a newline, its raw records
    (NUL-terminated fields), a NUL, and its patch, whose lines all start with a character other
    than NUL (an added line with `+`): the patch ends at the first line that starts with NUL."""
    patches: list[str] = []
    commits: list[list[str]] = []
    pos = 0
    while pos < len(log):
        header = _COMMIT.match(log, pos)
        if header is None:
            raise ValueError(f"not git log output at character {pos}")
        pos = header.end()
        paths: list[str] = []
        commits.append(paths)
        if not header.group(1):
            continue  # an empty commit (or a merge that brings nothing over its first parent)
        records, patch, pos = _commit(log, header.end())
        paths += [names[-1] for kind, names in records if kind in "ACR"]
        patches.append(patch)
    lines = [line for patch in patches for line in added_lines(patch)]
    return lines, list(dict.fromkeys(path for paths in reversed(commits) for path in paths))


def _commit(log: str, pos: int) -> tuple[list[tuple[str, list[str]]], str, int]:
    """One commit's raw records from `pos` (each its kind and its names), its patch, and where
    the next commit starts."""
    start = pos
    records: list[tuple[str, list[str]]] = []
    while record := _RAW.match(log, pos):
        pos = record.end()
        names: list[str] = []
        for _ in range(2 if record.group(1) in "CR" else 1):
            end = log.find("\0", pos)
            if end < 0:
                raise ValueError(f"a raw record of git log cut short at character {pos}")
            names.append(log[pos:end])
            pos = end + 1
        records.append((record.group(1), names))
    if pos == start or log[pos : pos + 1] != "\0":
        raise ValueError(f"git log output without its raw records or patch at character {pos}")
    pos += 1
    end = log.find("\n\0", pos) + 1 or len(log)  # no patch line starts with NUL
    if log[pos : pos + 1] == "\0":
        end = pos  # no patch at all: the next commit follows the records (never seen, but read right)
    return records, log[pos:end], end


def changed_paths(staged: str) -> dict[str, int]:
    """Every path `staged_diff` output changes (both names of a rename), each with the lines it
    adds: what `git diff --numstat --no-renames` of that commit lists, except that a binary
    file's lines are counted as text's (`--text`). Raises ValueError on other output."""
    header = _COMMIT.match(staged)
    if header is None:
        raise ValueError("not staged_diff output")
    if not header.group(1):
        return {}  # nothing staged
    records, patch, _ = _commit(staged, header.end())
    added = Counter(line.path for line in added_lines(patch))
    return {name: added.get(name, 0) for _, names in records for name in names}


async def staged_diff(wt: Worktree, *, since: str) -> str:
    """What a commit of the worktree's index on commit `since` adds, in `commits_diff`'s form for
    that one commit (under a header naming no commit), read from the index before the commit is
    made: beside it, so its push waits for no `git log` of its own. The same options as
    `commits_diff` (`--text` wins over the worktree's attributes, as there), no lock taken (the
    commit holds the index's). Raises OutputTooLarge."""
    result = await wt.git(
        "-c", "core.quotepath=on", "--no-optional-locks",
        "diff", "--cached", "-p", "--raw", "-z", "-U0", "--text", "--no-color", "--no-ext-diff",
        "--no-textconv", "--find-renames", "--end-of-options", since, "--",
        max_output=MAX_DIFF_BYTES,
    )  # fmt: skip
    header = f"\0commit {'0' * 40}\0"
    return f"{header}\n{result.stdout}" if result.stdout else header


async def outgoing_secrets(
    wt: Worktree,
    *,
    since: str,
    head: str,
    known: Sequence[str],
    ignore: Sequence[str],
    staged: Awaitable[str] | None = None,
) -> list[Finding]:
    """Credentials in what pushing `head` would send beyond `since`, in its lines and in its
    paths (empty: it may go). `staged`: `staged_diff` on `since` when `head` is the one commit of
    the index made on it (its change is that diff), else its commits are read."""
    try:
        log = await (staged if staged is not None else commits_diff(wt, since=since, head=head))
    except OutputTooLarge:
        return [Finding(f"more than {MAX_DIFF_BYTES // 2**20} MB of changes", 0, TOO_LARGE)]

    def scanned() -> list[Finding]:
        lines, paths = read_log(log)
        names = [AddedLine(path, NAME_LINE, path) for path in paths]
        return scan([*lines, *names], known=known, ignore=ignore)

    # Reading the log and the rules' regular expressions over every added line (and every path)
    # are CPU work: off the loop, unless there are a few lines only (a hand-off costs more).
    if len(log) <= INLINE_SCAN:
        return scanned()
    return await asyncio.to_thread(scanned)


async def uncommit(wt: Worktree, *, to: str) -> None:
    """Move the branch back to commit `to` (a sha), keeping the commits' changes staged in the worktree."""
    if not re.fullmatch(r"[0-9a-f]{40,64}", to):
        raise ValueError(f"not a commit sha: {to!r}")
    await wt.git("reset", "--soft", to)
