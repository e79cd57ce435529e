"""The `Agent` port: what a coding agent is given, what it returns, and how its loop ends.

An agent gets an :class:`AgentTask` (one story in one worktree) and returns an
:class:`AgentResult`; it never commits, pushes or talks to GitHub. Inside an agent, control
leaves the loop through the small :class:`AgentExit` tree (STYLE.md §9); these exceptions
never escape :meth:`Agent.run`, which turns them into a result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from bot.config.mcp import McpServer
from bot.config.repo import AgentLimits
from bot.environment.setup import with_env_path
from bot.llm import Usage
from bot.mcp.servers import McpPlace
from bot.mcp.tools import McpTools, Record, open_mcp
from bot.plan import PRD, Story
from bot.plan.blocked import BlockedRequest
from bot.plan.records import ToolUse
from bot.sandbox.confinement import Confinement, Sandbox
from bot.sandbox.process import scrubbed_env
from bot.workspace.gitview import GitView

Phase = Literal["implementation", "retry", "refactor", "review", "ci"]
"""`ci`: the repository's own CI failed on a batch; it runs the `review` phase's agents."""
AgentStatus = Literal["finished", "failed", "limits_exceeded"]


class AgentTask(BaseModel):
    """One story for one agent run, in one worktree."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    story: Story = Field(description="The story to implement.")
    prd: PRD = Field(description="The approved plan the story belongs to.")
    phase: Phase = Field(description="Why the agent runs: implementation, retry, refactor, review or ci.")
    worktree: Path = Field(description="Checkout the agent works in; the only tree it may change.")
    home: Path = Field(description="An empty directory outside the worktree, used as HOME.")
    prompt: str = Field(description="The full story prompt, built by bot.agent.prompt.story_prompt.")
    feedback: str | None = Field(default=None, description="Gate failure output or review comments.")
    deny: list[str] = Field(default_factory=list, description="Globs of paths the agent may not write.")
    limits: AgentLimits = Field(default_factory=AgentLimits, description="Step, token, cost and time limits.")
    sandbox: InstanceOf[Sandbox] = Field(
        default_factory=Sandbox, description="The operator's sandbox policy (PLAN_CASCADE_SANDBOX)."
    )
    sandbox_setting: Literal["auto", "required", "none"] = Field(
        default="auto",
        description="The repository's `agent.sandbox`: it may tighten the policy, never loosen it.",
    )
    protected: list[Path] = Field(
        default_factory=list, description="Paths inside the worktree bound read-only (.git, paths.deny)."
    )
    transcript_path: Path = Field(description="Where the run's JSON-lines transcript is written.")
    path: str | None = Field(
        default=None,
        description="PATH for tool commands (PLAN_CASCADE_TOOL_PATH); None means the safe default.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The worktree's environment from setup (its PATH entries go first, caches).",
    )
    shared: list[Path] = Field(
        default_factory=list,
        description="Directories outside the worktree bound read-only (the repository's package caches).",
    )
    git: InstanceOf[GitView] | None = Field(
        default=None, description="The worktree's git as the sandbox shows it (history read-only)."
    )
    egress: tuple[str, ...] | None = Field(
        default=None,
        description="The repository's `agent.egress`: it narrows the operator's list, never widens "
        "it; None: the operator's list as it is.",
    )
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict,
        description="The repository's `agent.mcp_servers`: their allowed tools are offered.",
    )


async def confinement_for(
    task: AgentTask,
    *,
    network: bool = False,
    tools: Sequence[Path] = (),
    git_session: bool = False,
    before: Callable[[], object] | None = None,
) -> Confinement:
    """How this task's processes start (raises SandboxUnavailable when they must not start at all);
    made once per agent run, with its git read again in a thread, off the event loop, after
    `before` (the agent's own file work, in the same thread: one hand-off, not two). `git_session`:
    its processes are one session and share one copy of that git (see `Sandbox.confinement`)."""

    def made() -> Confinement:
        if before is not None:
            before()
        return task.sandbox.confinement(
            worktree=task.worktree,
            home=task.home,
            repo_setting=task.sandbox_setting,
            network=network,
            readonly=[*task.protected, *task.shared],
            tools=tools,
            git=task.git,
            git_session=git_session,
        )

    return await asyncio.to_thread(made)


def task_place(task: AgentTask) -> McpPlace:
    """Where `task`'s local servers start: its worktree (read-only to them), its tools' PATH and
    setup's variables, its sandbox and the repository's package caches."""
    base = scrubbed_env(home=task.home, extra={"PATH": task.path} if task.path else None)
    return McpPlace(
        worktree=task.worktree,
        env=with_env_path(base, dict(task.env)),
        sandbox=task.sandbox,
        repo_setting=task.sandbox_setting,
        readonly=tuple(task.shared),
    )


def open_task_mcp(
    task: AgentTask, *, record: Record | None = None
) -> contextlib.AbstractAsyncContextManager[McpTools]:
    """`open_mcp` for one agent run on `task`: its servers, the operator's policy, its limits."""
    return open_mcp(
        task.mcp_servers,
        policy=task.sandbox.mcp,
        place=task_place(task),
        call_seconds=float(task.limits.tool_timeout_seconds),
        output_limit=task.limits.output_limit_chars,
        record=record,
    )


class AgentResult(BaseModel):
    """How an agent run ended."""

    status: AgentStatus = Field(description="finished, failed or limits_exceeded.")
    summary: str = Field(default="", description="The agent's own summary of what it changed.")
    reason: str | None = Field(default=None, description="Why the run failed or stopped; None when finished.")
    usage: Usage = Field(default_factory=Usage, description="Tokens used by all model calls of the run.")
    cost_usd: float = Field(default=0.0, description="Estimated model cost of the run in US dollars.")
    iterations: int = Field(default=0, description="Model calls made (0 when the agent does not report it).")
    model: str | None = Field(default=None, description="Model that answered, when known.")
    agent: str = Field(description="Name of the agent that ran.")
    blocked: list[BlockedRequest] = Field(
        default_factory=list, description="Its network requests the egress proxy refused, per destination."
    )
    mcp_tools: dict[str, ToolUse] = Field(
        default_factory=dict, description="MCP tools the agent called (`<server>__<tool>`), with counts."
    )


@runtime_checkable
class Agent(Protocol):
    """A coding agent picked by name from the registry."""

    name: str

    def available(self) -> bool:
        """True when the agent can run here (its binary is installed, it has a model)."""
        ...

    async def run(self, task: AgentTask) -> AgentResult:
        """Work on ``task`` in its worktree and say how it ended; never raises AgentExit."""
        ...


class AgentExit(Exception):
    """Leaves an agent's loop; ``message`` says why, for the result and the transcript."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Submitted(AgentExit):
    """The agent called ``finish``; ``message`` is its summary."""


class LimitsExceeded(AgentExit):
    """A step, token, cost or time limit was reached; ``limit`` names which."""

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class AgentFailed(AgentExit):
    """The agent cannot go on (the model call failed, the command exited non-zero)."""
