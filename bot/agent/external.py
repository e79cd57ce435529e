"""Command agents: an external CLI (Claude Code, aider, Codex, or any command) run on one story.

The prompt is written to a file in the task's HOME, outside the worktree, so it never shows in
the story's diff. The command template is formatted with ``{prompt_file}``, ``{story_id}`` and
``{worktree}`` (each value shell-quoted) and runs through bash in the worktree, in its own
process group, killed with its children after ``limits.max_wall_seconds``.

Credentials: the command gets a scrubbed environment (PATH, HOME, locale, TERM) with no token
of ours, plus exactly the variables the operator lists in ``PLAN_CASCADE_AGENT_ENV`` (for
example ``ANTHROPIC_API_KEY``): those are visible to the agent and to whatever it runs.

These agents run in the same sandbox as everything else the bot starts on untrusted code
(see `bot.sandbox.confinement`), in their own network namespace. When the operator allows them the
network (``PLAN_CASCADE_AGENT_NETWORK``, default on: they must reach their model's API) their only
way out is a proxy of the bot's own, started for the run, like setup's: it reaches the hosts of
``PLAN_CASCADE_AGENT_EGRESS`` that the repository's ``agent.egress`` (when set) lists too, never the
server's loopback, the private network or the cloud's metadata address, and counts what it refuses
(`AgentResult.blocked`, reported on the story's check runs and pull request). Unconfined
(``PLAN_CASCADE_SANDBOX=off``) they share the host's network, like every unconfined process.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import shutil
import string
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from bot.agent.base import AgentResult, AgentTask, confinement_for, open_task_mcp
from bot.agent.prompt import task_prompt
from bot.agent.transcript import Transcript
from bot.environment.setup import with_env_path
from bot.errors import AgentError
from bot.mcp.relay import SERVER_NAME, McpRelay, empty_config, mcp_relay
from bot.network.route import EgressRoute, agent_route
from bot.plan.blocked import BlockedRequest, blocked_requests
from bot.sandbox import run_process, scrubbed_env
from bot.sandbox.confinement import Confinement
from bot.sandbox.process import SAFE_PATH

SUMMARY_CHARS = 2000
"""Characters of the output's tail kept as the summary or the failure reason."""

PRESETS: dict[str, tuple[str, str]] = {
    # Headless mode; edits accepted without asking, and Bash allowed so it can run the tests.
    # `{mcp}`: the bot's MCP relay, when the run has MCP tools (`bot.mcp.relay`).
    "claude-code": (
        "claude -p --permission-mode acceptEdits --allowedTools Bash{mcp} < {prompt_file}",
        "claude",
    ),
    # Keeps git for aider's repository map, but never commits and never touches .gitignore.
    "aider": (
        "aider --yes-always --no-auto-commits --no-dirty-commits --no-gitignore --no-check-update "
        "--message-file {prompt_file}",
        "aider",
    ),
    # `-` reads the prompt from stdin; its own sandbox lets it write the workspace only.
    "codex": ("codex exec {mcp}--sandbox workspace-write --skip-git-repo-check - < {prompt_file}", "codex"),
}
"""Preset command agents: name -> (command template, binary that must be installed)."""


def _tail(text: str, limit: int = SUMMARY_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


class CommandAgent:
    """An agent that is one shell command; ``binary`` (if any) must be on PATH for it to be available."""

    def __init__(self, name: str, template: str, *, binary: str | None) -> None:
        self.name = name
        self.template = template
        self.binary = binary

    def available(self) -> bool:
        """True when there is no binary to check, or it is installed."""
        return self.binary is None or shutil.which(self.binary) is not None

    def command(
        self,
        *,
        prompt_file: Path,
        task: AgentTask,
        mcp_config: Path | None = None,
        relay: McpRelay | None = None,
    ) -> str:
        """The template with its placeholders filled in, shell-quoted; a preset that takes MCP
        servers is given the relay when there is one."""
        config = shlex.quote(str(mcp_config or ""))
        flags = ""
        if relay is not None and self.name == "claude-code":  # only the relay's servers, its tools allowed
            flags = (
                f" mcp__{SERVER_NAME} --strict-mcp-config --mcp-config {shlex.quote(str(relay.config_file))}"
            )
        elif relay is not None and self.name == "codex":
            flags = relay.codex_flags()
        return self.template.format(
            prompt_file=shlex.quote(str(prompt_file)),
            story_id=shlex.quote(task.story.id),
            worktree=shlex.quote(str(task.worktree)),
            mcp_config=config,
            mcp=flags,
        )

    def _names(self, placeholder: str) -> bool:
        """Whether the template has `{placeholder}`."""
        return any(name == placeholder for _, name, _, _ in string.Formatter().parse(self.template))

    def _tool_dirs(self) -> list[Path]:
        """Directories the command needs to see: where the programs and scripts it names live."""
        try:
            words = shlex.split(self.template)
        except ValueError:
            return []
        dirs = []
        for word in words:
            path = Path(word.split("=", 1)[-1])
            if path.is_absolute() and path.exists():
                dirs.append(path if path.is_dir() else path.parent)
        return dirs

    def _path(self, base: str | None = None) -> str:
        """The task's PATH (or SAFE_PATH), preceded by the directory of ``binary`` so it is found."""
        base = base or SAFE_PATH
        if not self.binary:
            return base
        found = shutil.which(self.binary, path=f"{base}:{SAFE_PATH}") or shutil.which(self.binary)
        return f"{Path(found).parent}:{base}" if found else base

    async def run(self, task: AgentTask) -> AgentResult:
        transcript = Transcript(task.transcript_path)
        transcript.record("task", agent=self.name, story=task.story.id, phase=task.phase)
        try:
            async with open_task_mcp(task, record=transcript.record) as mcp, mcp_relay(mcp) as relay:
                result = await self._run(task, transcript, relay)
            result = result.model_copy(update={"mcp_tools": dict(mcp.used)})
            transcript.record("result", **result.model_dump(mode="json"))
            return result
        finally:  # redacting the output and writing the file: not on the loop (a save cut short
            await asyncio.to_thread(transcript.save)  # by a cancel still ends in its thread)

    async def _run(self, task: AgentTask, transcript: Transcript, relay: McpRelay | None) -> AgentResult:
        prompt_file = task.home / f"prompt-{task.story.id}.md"
        if prompt_file.resolve().is_relative_to(task.worktree.resolve()):
            raise AgentError(
                f"the agent's HOME {task.home} is inside its worktree: the prompt would be committed"
            )
        # Its prompt's file (a file made: milliseconds on a busy disk), then its sandbox (its git
        # read again), in one thread, off the event loop.
        prompt = task_prompt(task)
        confinement = await confinement_for(  # its own network namespace
            task, tools=self._tool_dirs(), before=lambda: _write_prompt(prompt_file, prompt)
        )
        mcp_config = relay.config_file if relay is not None else None
        if relay is None and self._names("mcp_config"):  # a template without it never reads one
            mcp_config = empty_config(task.home)
        command = self.command(prompt_file=prompt_file, task=task, mcp_config=mcp_config, relay=relay)
        transcript.record("command", command=command)
        if relay is not None:  # the relay's script and the bot's socket, read-only
            confinement = replace(confinement, readonly=(*confinement.readonly, relay.folder))
        env = with_env_path(
            scrubbed_env(
                home=task.home, extra={"PATH": self._path(task.path)}, passthrough=task.sandbox.agent_env
            ),
            task.env,
        )
        blocked: list[BlockedRequest] = []
        async with _egress(task, confinement) as route:
            if route is not None:  # out through the proxy alone
                command = route.command(command)
                env = {**env, **route.env}
                confinement = confinement.going_out(route)
            outcome = await run_process(
                shell_free(command, path=env.get("PATH")) or command,  # no shell only to split words
                cwd=task.worktree,
                env=env,
                timeout=task.limits.max_wall_seconds,
                output_limit=max(task.limits.output_limit_chars, SUMMARY_CHARS),
                confinement=confinement,
            )
            if route is not None:
                blocked = blocked_requests(route.proxy.blocked.entries(), by="agent")
        transcript.record("output", **outcome.model_dump(mode="json"))
        if blocked:
            transcript.record("blocked", requests=[b.model_dump(mode="json") for b in blocked])
        tail = _tail(outcome.output)
        if outcome.timed_out:
            reason = f"time limit reached: killed after {task.limits.max_wall_seconds}s\n{tail}".rstrip()
            return AgentResult(status="limits_exceeded", reason=reason, agent=self.name, blocked=blocked)
        if outcome.exit_code != 0:
            reason = f"`{self.name}` exited with code {outcome.exit_code}\n{tail}".rstrip()
            return AgentResult(status="failed", reason=reason, agent=self.name, blocked=blocked)
        summary = tail or f"`{self.name}` finished"
        return AgentResult(status="finished", summary=summary, agent=self.name, blocked=blocked)


_SHELL_SIGNS = re.compile(r"[$`\\;&|<>()*?\[\]{}~#!\n\r]")
"""What makes a shell do more than split a line into words: expansions, escapes, operators,
redirections, groups, globs, `~`, comments, history and line breaks."""
_SHELL_WORDS = frozenset({"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while",
                          "until", "do", "done", "in", "function", "time", "coproc", "[[", "]]"})  # fmt: skip


def shell_free(command: str, *, path: str | None) -> list[str] | None:
    """`command` as the words `bash -c` would run, when splitting it is all `bash` would do (only
    words, blanks and quotes, no assignment or keyword first) and its program is found on `path`:
    one process less a start. None when it needs a shell (or bash should say what is missing)."""
    if _SHELL_SIGNS.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0] or words[0] in _SHELL_WORDS or shutil.which(words[0], path=path) is None:
        return None
    return words


def _write_prompt(prompt_file: Path, prompt: str) -> None:
    prompt_file.parent.mkdir(parents=True, exist_ok=True)
    prompt_file.write_text(prompt, encoding="utf-8")


@contextlib.asynccontextmanager
async def _egress(task: AgentTask, confinement: Confinement) -> AsyncIterator[EgressRoute | None]:
    """The agent's way out for one run: a proxy of its own when it is confined and may go out;
    None when it may not (no network at all) or runs unconfined (the host's network)."""
    if not (task.sandbox.agent_network and confinement.confined):
        yield None
        return
    hook = task.sandbox.on_blocked
    async with agent_route(
        task.sandbox.agent_egress,
        narrowed=task.egress,
        on_blocked=(lambda: hook("agent")) if hook is not None else None,
    ) as route:
        yield route


def preset_agent(name: str) -> CommandAgent:
    """The preset command agent ``name`` (claude-code, aider or codex); KeyError if there is none."""
    template, binary = PRESETS[name]
    return CommandAgent(name, template, binary=binary)
