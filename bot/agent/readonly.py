"""A read-only investigation: the model reads one commit of the repository and answers in JSON.

The loop is the built-in agent's (one message list, tools answered by id, limits checked
before each model call) with a different tool set: ``read``, ``glob`` and ``grep`` over a
commit of the mirror (``git show``, ``git ls-tree``, ``git grep``: no checkout, no process of
the repository's, nothing can be written) and ``submit`` with the answer, plus, for exploration,
the tools of the repository's MCP servers marked ``read_only: true`` (`bot.mcp.tools`). Any other
tool name is refused, whatever the model asks. The answer may also come as a plain JSON message.

Used by the acceptance review of a batch (`bot.orchestration.acceptance`).
"""

from __future__ import annotations

import fnmatch
import io
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, Field, ValidationError

from bot.agent.tools import MAX_GLOB_RESULTS, MAX_GREP_RESULTS, MAX_LINE_CHARS, clip
from bot.agent.toolspecs import GlobArgs, GrepArgs, ReadArgs
from bot.config.globs import is_denied
from bot.errors import LLMError
from bot.llm import LLM, Message, ToolCall, ToolSpec, Usage
from bot.llm.structured import problems_of
from bot.mcp.tools import McpTools
from bot.workspace.git import GitResult

LISTING_BYTES = 4 * 2**20
"""The most of ``git ls-tree -r`` read: the names of the files at a commit."""
FILE_BYTES = 4 * 2**20
"""The most of one file read (``git cat-file``); lines past it cannot be read."""
GREP_BYTES = 2**20
"""The most of ``git grep`` output read; the tool shows at most `MAX_GREP_RESULTS` hits anyway."""
DIFF_BYTES = 2**20
"""The most of a diff read (``git diff``); the acceptance review's prompt shows less."""

T = TypeVar("T", bound=BaseModel)


class Git(Protocol):
    """Runs git on the mirror (`bot.workspace.Mirror.git`): stdout bounded by ``max_output``."""

    def __call__(
        self, *args: str, check: bool = ..., max_output: int = ..., partial: bool = ...
    ) -> Awaitable[GitResult]: ...


TOOLS = ("read", "glob", "grep", "submit")


class ReadOnlyLimits(BaseModel):
    """The bounds of one investigation."""

    max_steps: int = Field(default=12, ge=1, description="Model calls.")
    max_tokens: int = Field(default=200_000, ge=1, description="Tokens, input and output.")
    max_cost_usd: float = Field(default=1.0, gt=0, description="US dollars.")
    max_seconds: float = Field(default=600, gt=0, description="Wall-clock seconds.")
    output_limit_chars: int = Field(default=20_000, ge=1000, description="Characters of one tool answer.")


class Unfinished(LLMError):
    """The investigation ended without an answer; what it spent so far is attached."""

    def __init__(self, message: str, *, usage: Usage, cost_usd: float) -> None:
        super().__init__(message)
        self.usage = usage
        self.cost_usd = cost_usd


@dataclass
class Investigation(Generic[T]):
    """The answer and what it took."""

    value: T
    usage: Usage
    cost_usd: float
    steps: int
    files_read: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.usage.total_input_tokens + self.usage.output_tokens


@dataclass(frozen=True)
class GitTree:
    """One commit of a mirror, readable and nothing else.

    Every read stops at a bound (`LISTING_BYTES`, `FILE_BYTES`, `GREP_BYTES`, `DIFF_BYTES`):
    a few KB pushed can decompress to hundreds of MB, and git is killed rather than read whole.
    What was cut is said in the answer.
    """

    git: Git
    sha: str

    async def paths(self) -> list[str]:
        return (await self.listing())[0]

    async def listing(self) -> tuple[list[str], bool]:
        """Every file's path, and whether the list stopped at `LISTING_BYTES` (then it is a prefix)."""
        out = await self.git(
            "ls-tree",
            "-r",
            "--name-only",
            "-z",
            self.sha,
            check=False,
            max_output=LISTING_BYTES,
            partial=True,
        )
        paths = out.stdout.split("\0")
        if out.truncated:
            paths.pop()  # the last name was cut in the middle
        return [p for p in paths if p], out.truncated

    async def text(self, path: str) -> str | None:
        """The text of `path` at this commit (its first `FILE_BYTES`); None when missing or binary."""
        found, _, _ = await self._blob(_clean(path))
        return found

    async def _blob(self, path: str) -> tuple[str | None, str, bool]:
        out = await self.git(
            "cat-file", "-p", f"{self.sha}:{path}", check=False, max_output=FILE_BYTES, partial=True
        )
        if out.returncode != 0 and not out.truncated:
            return None, f"error: no file {path!r} at this commit", False
        if "\0" in out.stdout[:8192]:
            return None, f"error: {path} is a binary file", False
        return out.stdout, "", out.truncated

    async def read(self, args: ReadArgs) -> str:
        path = _clean(args.path)
        found, error, cut = await self._blob(path)
        if found is None:
            return error
        if cut:
            found = found[: found.rfind("\n") + 1]  # the last line was cut in the middle
        first, last = args.offset, args.offset + args.limit - 1
        shown, count = [], 0
        for number, line in enumerate(io.StringIO(found), start=1):  # one line at a time, never a list
            count = number
            if first <= number <= last:
                shown.append(f"{number:>6}\t{line.rstrip(chr(13) + chr(10))[:MAX_LINE_CHARS]}")
        more = count - (args.offset - 1 + len(shown))
        tail = [f"[{more} more lines: read with offset={args.offset + len(shown)}]"] if more > 0 else []
        if cut:
            tail.append(f"[{path} is longer than {FILE_BYTES:,} bytes: lines after {count} cannot be read]")
        return "\n".join(shown + tail) or f"({path} is empty)"

    async def glob(self, args: GlobArgs) -> str:
        pattern = args.pattern.strip().removeprefix("./") or "*"
        paths, cut = await self.listing()
        found = [p for p in paths if _matches(p, pattern)]
        extra = len(found) - MAX_GLOB_RESULTS
        shown = found[:MAX_GLOB_RESULTS] + ([f"[{extra} more]"] if extra > 0 else [])
        if cut:
            shown.append(
                f"[the file list stopped at {LISTING_BYTES:,} bytes of names: files after it are not listed]"
            )
        return "\n".join(shown) or "no file matches"

    async def grep(self, args: GrepArgs) -> str:
        where = _clean(args.path) or "."
        # One thread: git prints each match as it finds it instead of holding whole files' output.
        out = await self.git(
            "grep", "--threads=1", "-n", "-I", "-E", "--no-color", "-e", args.pattern, self.sha, "--", where,
            check=False, max_output=GREP_BYTES, partial=True,
        )  # fmt: skip
        if out.returncode not in (0, 1) and not out.truncated:
            return f"error: grep failed: {out.stderr.strip()[:300]}"
        lines = out.stdout.split("\n")
        if out.truncated or not lines[-1]:
            lines.pop()  # a line cut in the middle, or the empty rest after the last newline
        hits = []
        for line in lines:
            hit = line.removeprefix(f"{self.sha}:")
            name = hit.split(":", 1)[0]
            if args.glob is None or _matches(name, args.glob):
                hits.append(hit[:MAX_LINE_CHARS])
        extra = len(hits) - MAX_GREP_RESULTS
        more = [f"[{extra} more]"] if extra > 0 else []
        if out.truncated:
            more.append(
                f"[grep stopped after {GREP_BYTES:,} bytes of matches: later matches were not read; "
                "narrow the pattern or the path]"
            )
        return "\n".join(hits[:MAX_GREP_RESULTS] + more) or "no match"

    async def diff_from(self, base: str) -> tuple[str, bool]:
        """``git diff base...sha`` (its first `DIFF_BYTES`), and whether it was cut there.

        Files over `DIFF_BYTES` show as binary, so git does not load them whole either.
        """
        out = await self.git(
            "-c", f"core.bigFileThreshold={DIFF_BYTES}",
            "diff", "--no-color", "--no-ext-diff", f"{base}...{self.sha}",
            max_output=DIFF_BYTES, partial=True,
        )  # fmt: skip
        return out.stdout, out.truncated


def _matches(path: str, pattern: str) -> bool:
    if "/" in pattern:
        return is_denied(path, [pattern])
    return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)


def _clean(path: str) -> str:
    parts = [p for p in path.strip().split("/") if p not in ("", ".")]
    if path.startswith("/") or ".." in parts:
        raise ValueError(f"{path!r} is not a path inside the repository")
    return "/".join(parts)


def tool_specs(answer: type[BaseModel]) -> list[ToolSpec]:
    """read, glob, grep and submit (whose input is the answer's schema)."""
    schema = answer.model_json_schema()
    return [
        ToolSpec(
            name="read", description="Read a text file with numbered lines.", input_schema=_schema(ReadArgs)
        ),
        ToolSpec(name="glob", description="List files matching a glob.", input_schema=_schema(GlobArgs)),
        ToolSpec(
            name="grep",
            description="Search file contents with an extended regular expression; prints path:line:text.",
            input_schema=_schema(GrepArgs),
        ),
        ToolSpec(name="submit", description="Give your final answer; ends the session.", input_schema=schema),
    ]


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


async def investigate(
    llm: LLM,
    tree: GitTree,
    *,
    system: str,
    prompt: str,
    answer: type[T],
    limits: ReadOnlyLimits,
    validate: Callable[[T], list[str]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    mcp: McpTools | None = None,
) -> Investigation[T]:
    """Let the model read `tree` until it submits a valid `answer`; raises `Unfinished`. `mcp`:
    the tools of the repository's `read_only` MCP servers, offered beside read, glob and grep."""
    started = clock()
    usage, cost, steps = Usage(), 0.0, 0
    files: list[str] = []
    messages = [Message(role="user", content=prompt)]
    specs = tool_specs(answer) + (mcp.specs if mcp is not None else [])
    while True:
        why = _over(limits, steps, usage, cost, clock() - started)
        if why:
            raise Unfinished(why, usage=usage, cost_usd=cost)
        try:
            completion = await llm.complete(system=system, messages=messages, tools=specs, cache_prefix=True)
        except LLMError as exc:
            raise Unfinished(f"the model call failed: {exc.message}", usage=usage, cost_usd=cost) from exc
        steps += 1
        usage += completion.usage
        cost += completion.cost_usd
        messages.append(Message(role="assistant", content=completion.text, tool_calls=completion.tool_calls))
        if not completion.tool_calls:
            value, problems = problems_of(completion.text, answer, validate=validate)
            if value is not None:
                return Investigation(value, usage, round(cost, 6), steps, files)
            messages.append(Message(role="user", content=_fix(problems)))
            continue
        for call in completion.tool_calls:
            if call.name == "submit":
                value, problems = _submitted(call, answer, validate)
                if value is not None:
                    return Investigation(value, usage, round(cost, 6), steps, files)
                observation = _fix(problems)
            elif mcp is not None and mcp.offers(call.name):
                observation = await mcp.call(call.name, call.arguments)
            else:
                observation = clip(await _run(tree, call, files), limits.output_limit_chars)
            messages.append(Message(role="tool", content=observation, tool_call_id=call.id))


def _submitted(
    call: ToolCall, answer: type[T], validate: Callable[[T], list[str]] | None
) -> tuple[T | None, list[str]]:
    try:
        value = answer.model_validate(call.arguments)
    except ValidationError as exc:
        return None, [f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()]
    problems = validate(value) if validate is not None else []
    return (value, []) if not problems else (None, problems)


def _fix(problems: list[str]) -> str:
    lines = "\n".join(f"- {p}" for p in problems[:10])
    return f"The answer is not valid yet:\n{lines}\nCall submit again with a corrected answer."


async def _run(tree: GitTree, call: ToolCall, files: list[str]) -> str:
    kinds: dict[str, type[BaseModel]] = {"read": ReadArgs, "glob": GlobArgs, "grep": GrepArgs}
    kind = kinds.get(call.name)
    if kind is None:
        return f"refused: this session is read-only; the tools are {', '.join(TOOLS)}"
    try:
        args = kind.model_validate(call.arguments)
        if isinstance(args, ReadArgs):
            text = await tree.read(args)
            path = _clean(args.path)
            if not text.startswith("error:") and path not in files:
                files.append(path)
            return text
        if isinstance(args, GlobArgs):
            return await tree.glob(args)
        assert isinstance(args, GrepArgs)
        return await tree.grep(args)
    except ValidationError as exc:
        return f"error: bad arguments for {call.name}: " + "; ".join(e["msg"] for e in exc.errors())
    except ValueError as exc:
        return f"refused: {exc}"


def _over(limits: ReadOnlyLimits, steps: int, usage: Usage, cost: float, elapsed: float) -> str | None:
    tokens = usage.total_input_tokens + usage.output_tokens
    if steps >= limits.max_steps:
        return f"step limit reached: {steps} model calls of {limits.max_steps}"
    if tokens >= limits.max_tokens:
        return f"token limit reached: {tokens:,} of {limits.max_tokens:,}"
    if cost >= limits.max_cost_usd:
        return f"cost limit reached: ${cost:.4f} of ${limits.max_cost_usd:.2f}"
    if elapsed >= limits.max_seconds:
        return f"time limit reached: {elapsed:.0f}s of {limits.max_seconds:.0f}s"
    return None
