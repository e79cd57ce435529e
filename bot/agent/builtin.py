"""The built-in coding agent: a ReAct loop over the `LLM` port and the tools (mini-swe-agent style).

One linear message list. Each step calls the model with the stable system prompt and tools
(a cacheable prefix), runs every tool call it asked for and answers each with a ``tool``
message carrying the call's id. Limits are checked before every model call; the loop ends
through :class:`Submitted`, :class:`LimitsExceeded` or :class:`AgentFailed`, and the
transcript is saved in ``finally``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import NoReturn

from bot.agent.base import (
    AgentFailed,
    AgentResult,
    AgentStatus,
    AgentTask,
    LimitsExceeded,
    Submitted,
    open_task_mcp,
)
from bot.agent.prompt import task_prompt
from bot.agent.tools import TOOL_SPECS, ToolContext, run_tool
from bot.agent.transcript import Transcript
from bot.errors import LLMError
from bot.llm import LLM, Message, Usage
from bot.mcp.tools import McpTools, mcp_notes

SYSTEM_PROMPT = """\
You are a careful software engineer working alone in a git checkout of a repository, through \
tools: read, write, edit, glob, grep, bash and finish. The user message describes one story of \
an approved plan. Explore the code you need, make the change, add tests, and run the tests and \
linters with bash until they pass. Paths are relative to the repository root. Commands run in a \
fresh shell without network access and are killed when they take too long. Never commit: the \
harness commits your work. When the story is done and verified, call finish with a short \
summary of what you changed and how you checked it."""

NUDGE = "Use the tools; call finish(summary) when done."


@dataclasses.dataclass
class _Run:
    """Counters of one run."""

    started: float
    iterations: int = 0
    usage: Usage = dataclasses.field(default_factory=Usage)
    cost_usd: float = 0.0
    model: str | None = None

    def check(self, task: AgentTask, now: float) -> None:
        """Raise :class:`LimitsExceeded` naming the first limit reached, with the numbers."""
        limits = task.limits
        tokens = self.usage.total_input_tokens + self.usage.output_tokens
        elapsed = now - self.started
        if self.iterations >= limits.max_iterations:
            raise LimitsExceeded(
                f"iteration limit reached: {self.iterations} model calls of {limits.max_iterations}",
                limit="iterations",
            )
        if tokens >= limits.max_tokens:
            raise LimitsExceeded(
                f"token limit reached: {tokens} tokens used of {limits.max_tokens}", limit="tokens"
            )
        if self.cost_usd >= limits.max_cost_usd:
            raise LimitsExceeded(
                f"cost limit reached: ${self.cost_usd:.4f} spent of ${limits.max_cost_usd:.2f}", limit="cost"
            )
        if elapsed >= limits.max_wall_seconds:
            raise LimitsExceeded(
                f"time limit reached: {elapsed:.0f}s elapsed of {limits.max_wall_seconds}s", limit="wall_time"
            )

    def result(
        self, agent: str, status: AgentStatus, *, summary: str = "", reason: str | None = None
    ) -> AgentResult:
        """The run's result with its counters."""
        return AgentResult(
            status=status,
            summary=summary,
            reason=reason,
            usage=self.usage,
            cost_usd=round(self.cost_usd, 6),
            iterations=self.iterations,
            model=self.model,
            agent=agent,
        )


class BuiltinAgent:
    """Our own agent: any `LLM` plus the tools of :mod:`bot.agent.tools`."""

    def __init__(
        self, llm: LLM, *, name: str = "builtin", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.llm = llm
        self.name = name
        self._clock = clock

    def available(self) -> bool:
        """Always: the registry only builds a builtin agent when it has a model."""
        return True

    async def run(self, task: AgentTask) -> AgentResult:
        transcript = Transcript(task.transcript_path, clock=self._clock)
        transcript.record("task", agent=self.name, story=task.story.id, phase=task.phase)
        run = _Run(started=self._clock())
        try:
            async with open_task_mcp(task, record=transcript.record) as mcp:
                result = await self._attempt(task, run, transcript, mcp)
            result = result.model_copy(update={"mcp_tools": dict(mcp.used)})
            transcript.record("result", **result.model_dump(mode="json"))
            return result
        finally:
            transcript.save()

    async def _attempt(
        self, task: AgentTask, run: _Run, transcript: Transcript, mcp: McpTools
    ) -> AgentResult:
        try:
            await self._loop(task, run, transcript, mcp)
        except Submitted as done:
            return run.result(self.name, "finished", summary=done.message)
        except LimitsExceeded as stop:
            return run.result(self.name, "limits_exceeded", reason=stop.message)
        except AgentFailed as failure:
            return run.result(self.name, "failed", reason=failure.message)

    async def _loop(self, task: AgentTask, run: _Run, transcript: Transcript, mcp: McpTools) -> NoReturn:
        base = await ToolContext.for_task(task)
        about, failed = mcp_notes(mcp)
        system = f"{SYSTEM_PROMPT}\n\n{about}" if about else SYSTEM_PROMPT
        prompt = f"{task_prompt(task)}\n{failed}" if failed else task_prompt(task)
        messages = [Message(role="user", content=prompt)]
        transcript.message(messages[0])
        while True:
            run.check(task, self._clock())
            try:
                completion = await self.llm.complete(
                    system=system,
                    messages=messages,
                    tools=[*TOOL_SPECS, *mcp.specs],
                    cache_prefix=True,
                    cache_conversation=True,
                )
            except LLMError as exc:
                raise AgentFailed(f"the model call failed: {exc.message}") from exc
            run.iterations += 1
            run.usage += completion.usage
            run.cost_usd += completion.cost_usd
            run.model = completion.model or run.model
            transcript.usage(completion.usage, cost_usd=completion.cost_usd, model=completion.model)
            reply = Message(role="assistant", content=completion.text, tool_calls=completion.tool_calls)
            messages.append(reply)
            transcript.message(reply)
            if not completion.tool_calls:
                messages.append(Message(role="user", content=NUDGE))
                transcript.message(messages[-1])
                continue
            for call in completion.tool_calls:
                remaining = task.limits.max_wall_seconds - (self._clock() - run.started)
                ctx = dataclasses.replace(base, timeout_s=max(1.0, min(base.timeout_s, remaining)))
                if mcp.offers(call.name):
                    observation = await mcp.call(call.name, call.arguments)
                else:
                    observation = await run_tool(ctx, call)
                messages.append(Message(role="tool", content=observation, tool_call_id=call.id))
                transcript.message(messages[-1])
