"""The built-in agent's tools: read, write, edit, glob, grep, bash and finish.

Each tool works over one worktree root and returns a string observation for the model.
Mistakes are observations too (``error: ...``), and so are refused paths (``refused: ...``,
from :func:`~bot.sandbox.paths.resolve_path`): the loop never dies of a bad tool call.
Only ``finish`` raises, :class:`~bot.agent.base.Submitted`, to end the loop.

``bash`` runs each command in a fresh subprocess with ``cwd=`` the worktree, a scrubbed
env (no token of ours), a timeout that kills the process group, inside the operator's
sandbox (`bot.sandbox.confinement`: writable worktree and HOME only, no network, nothing of the
server visible). What bash writes is checked after the run like any agent's changes.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.agent.base import AgentTask, Submitted, confinement_for
from bot.agent.toolspecs import (
    ARGUMENTS,
    TOOL_SPECS,
    BashArgs,
    EditArgs,
    FinishArgs,
    GlobArgs,
    GrepArgs,
    ReadArgs,
    WriteArgs,
)
from bot.environment.setup import with_env_path
from bot.errors import SandboxViolation
from bot.llm import ToolCall
from bot.sandbox import Confinement, is_denied, resolve_path, run_process, scrubbed_env

__all__ = ["TOOL_SPECS", "ToolContext", "run_tool"]

MAX_LINE_CHARS = 2000
"""Longer lines are cut when shown by read and grep."""

MAX_GLOB_RESULTS = 200
MAX_GREP_RESULTS = 100
MAX_GREP_FILE_BYTES = 2_000_000
"""grep skips files larger than this."""
MAX_READ_BYTES = 4 * 2**20
"""read reads no further into a file than this (the repository decides how large files are)."""
MAX_EDIT_BYTES = 8 * 2**20
"""edit refuses files larger than this (it holds the whole file to change it)."""

_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class ToolContext:
    """Everything the tools need: the worktree, HOME, the deny globs and the command limits."""

    root: Path
    home: Path
    deny: tuple[str, ...] = ()
    confinement: Confinement | None = None
    timeout_s: float = 120.0
    output_limit: int = 20_000
    path: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    """The worktree's environment from setup (see `with_env_path`)."""

    @classmethod
    async def for_task(cls, task: AgentTask) -> ToolContext:
        """The context of ``task``: its worktree, HOME, deny globs, sandbox and limits."""
        return cls(
            root=task.worktree,
            home=task.home,
            deny=tuple(task.deny),
            # Its commands are one session: `git add` in one, `git commit` in the next.
            confinement=await confinement_for(task, git_session=True),
            timeout_s=float(task.limits.tool_timeout_seconds),
            output_limit=task.limits.output_limit_chars,
            path=task.path,
            env=tuple(task.env.items()),
        )


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its tail."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"


def _is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        return b"\0" in handle.read(_SNIFF_BYTES)


def _rel(ctx: ToolContext, path: Path) -> str:
    return path.relative_to(ctx.root.resolve()).as_posix() or "."


def _head_text(path: Path, limit: int) -> tuple[str, bool]:
    """The first ``limit`` bytes of ``path`` as text, and whether the file is longer."""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def read(ctx: ToolContext, args: ReadArgs) -> str:
    """Lines ``offset`` .. ``offset + limit - 1`` of a text file, numbered like ``cat -n``.

    Only the first `MAX_READ_BYTES` are read, one line at a time: a file of hundreds of MB
    costs no more than that.
    """
    path = resolve_path(ctx.root, args.path, write=False, deny=ctx.deny)
    if path.is_dir():
        return f"error: {args.path} is a directory; use glob to list files"
    if not path.is_file():
        return f"error: {args.path} does not exist"
    if _is_binary(path):
        return f"error: {args.path} is a binary file"
    text, cut = _head_text(path, MAX_READ_BYTES)
    if cut:
        text = text[: text.rfind("\n") + 1]  # the last line was cut in the middle
    start, count, shown = args.offset - 1, 0, []
    for count, line in enumerate(io.StringIO(text), start=1):
        if start < count <= start + args.limit:
            shown.append(f"{count:6}\t{line.rstrip(chr(13) + chr(10))[:MAX_LINE_CHARS]}")
    note = f"[{args.path} is longer than {MAX_READ_BYTES:,} bytes: lines after {count} cannot be read]"
    if count == 0:
        return note if cut else f"{args.path} is empty"
    if args.offset > count:
        return f"error: offset {args.offset} is past the end ({args.path} has {count} lines)" + (
            f"; {note}" if cut else ""
        )
    after = start + len(shown)
    out = shown
    if after < count:
        out.append(f"[... {count - after} more lines: call read with offset={after + 1}]")
    if cut:
        out.append(note)
    return "\n".join(out)


def write(ctx: ToolContext, args: WriteArgs) -> str:
    """Create or overwrite a file with ``content`` (parent directories created)."""
    path = resolve_path(ctx.root, args.path, write=True, deny=ctx.deny)
    if path.is_dir():
        return f"error: {args.path} is a directory"
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    path.write_text(args.content, encoding="utf-8")
    verb = "overwrote" if existed else "created"
    count = len(args.content.splitlines())
    return f"{verb} {args.path} ({count} line{'' if count == 1 else 's'})"


def edit(ctx: ToolContext, args: EditArgs) -> str:
    """Replace ``old`` by ``new``: exactly one match, or every match with ``replace_all``."""
    path = resolve_path(ctx.root, args.path, write=True, deny=ctx.deny)
    if not path.is_file():
        return f"error: {args.path} does not exist; use write to create it"
    if not args.old:
        return "error: old is empty; give the exact text to replace"
    if args.old == args.new:
        return "error: old and new are the same; nothing to change"
    if path.stat().st_size > MAX_EDIT_BYTES:
        return f"error: {args.path} is larger than {MAX_EDIT_BYTES:,} bytes; change it with bash instead"
    text = path.read_text(encoding="utf-8")
    count = text.count(args.old)
    if count == 0:
        return (
            f"error: old text not found in {args.path} (0 matches); read the file and copy the "
            "exact text, whitespace and indentation included"
        )
    if count > 1 and not args.replace_all:
        return (
            f"error: old text matches {count} times in {args.path}; include more surrounding lines "
            "to make it unique, or set replace_all to true"
        )
    path.write_text(text.replace(args.old, args.new), encoding="utf-8")
    return f"edited {args.path}: replaced {count} occurrence{'s' if count > 1 else ''}"


def _walk(ctx: ToolContext, top: Path) -> Iterator[Path]:
    """Files under ``top``, skipping ``.git`` and symlinks that lead out of the worktree.

    Symlinked directories are listed by name only, never walked into.
    """
    root = ctx.root.resolve()
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(folder, name)
            if name != ".git" and (not path.is_symlink() or path.resolve().is_relative_to(root)):
                yield path


def glob(ctx: ToolContext, args: GlobArgs) -> str:
    """Repository-relative paths of the files matching ``pattern``."""
    pattern = args.pattern.strip().removeprefix("./")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise SandboxViolation(f"pattern {args.pattern!r} must be relative and stay inside the repository")
    root = ctx.root.resolve()
    found = [rel for path in _walk(ctx, root) if is_denied(rel := _rel(ctx, path), [pattern])]
    if not found:
        return f"no files match {args.pattern!r}"
    more = len(found) - MAX_GLOB_RESULTS
    tail = [f"[... {more} more files: use a narrower pattern]"] if more > 0 else []
    return "\n".join(found[:MAX_GLOB_RESULTS] + tail)


def _grep_files(ctx: ToolContext, args: GrepArgs) -> Sequence[Path]:
    start = resolve_path(ctx.root, args.path, write=False, deny=ctx.deny)
    files = [start] if start.is_file() else list(_walk(ctx, start))
    if args.glob:
        files = [f for f in files if is_denied(_rel(ctx, f), [args.glob])]
    return files


def grep(ctx: ToolContext, args: GrepArgs) -> str:
    """Lines matching the Python regex ``pattern``, as ``file:line: text``."""
    try:
        regex = re.compile(args.pattern)
    except re.error as exc:
        return f"error: invalid regular expression {args.pattern!r}: {exc}"
    hits: list[str] = []
    for path in _grep_files(ctx, args):
        if not path.is_file() or path.stat().st_size > MAX_GREP_FILE_BYTES or _is_binary(path):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                hits.append(f"{_rel(ctx, path)}:{number}: {line[:300]}")
                if len(hits) > MAX_GREP_RESULTS:
                    hits[-1] = f"[... more than {MAX_GREP_RESULTS} matches: narrow the pattern or path]"
                    return "\n".join(hits)
    return "\n".join(hits) if hits else f"no matches for {args.pattern!r}"


async def bash(ctx: ToolContext, args: BashArgs) -> str:
    """Run ``command`` with bash in the worktree; the exit code, then the merged output."""
    result = await run_process(
        args.command,
        cwd=ctx.root,
        env=with_env_path(
            scrubbed_env(home=ctx.home, extra={"PATH": ctx.path} if ctx.path else None), dict(ctx.env)
        ),
        timeout=ctx.timeout_s,
        output_limit=ctx.output_limit,
        confinement=ctx.confinement,
    )
    if result.timed_out:
        head = f"timed out after {ctx.timeout_s:g}s (the command and its children were killed)"
    else:
        head = f"exit code: {result.exit_code}"
    return f"{head}\n{result.output}" if result.output else f"{head}\n(no output)"


_FILE_TOOLS: dict[str, Callable[[ToolContext, Any], str]] = {
    "read": read,
    "write": write,
    "edit": edit,
    "glob": glob,
    "grep": grep,
}


async def run_tool(ctx: ToolContext, call: ToolCall) -> str:
    """The observation of one tool call; raises :class:`Submitted` for ``finish``."""
    model = ARGUMENTS.get(call.name)
    if model is None:
        return f"error: unknown tool {call.name!r}; the tools are {', '.join(ARGUMENTS)}"
    try:
        args = model.model_validate(call.arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return f"error: bad arguments for {call.name}: {problems}"
    try:
        if isinstance(args, FinishArgs):
            raise Submitted(args.summary.strip() or "(no summary)")
        if isinstance(args, BashArgs):
            observation = await bash(ctx, args)
        else:
            observation = await asyncio.to_thread(_FILE_TOOLS[call.name], ctx, args)
    except SandboxViolation as exc:
        return f"refused: {exc.message}"
    except (OSError, UnicodeError) as exc:
        return f"error: {call.name} failed: {exc}"
    return clip(observation, ctx.output_limit)
