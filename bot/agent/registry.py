"""Agents by name, and the first available agent of a fallback chain.

Names: ``builtin`` (our loop over the server's LLM), the presets ``claude-code``, ``aider`` and
``codex``, every name under ``agent.commands``, and ``command``, which means the one entry of
``agent.commands`` when there is exactly one.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping

from bot.agent.base import Agent
from bot.agent.builtin import BuiltinAgent
from bot.agent.external import PRESETS, CommandAgent, preset_agent
from bot.errors import AgentError, ConfigurationError
from bot.llm import LLM


def command_binary(template: str) -> str | None:
    """The program a command template starts, when it names one plainly (else None)."""
    try:
        words = shlex.split(template)
    except ValueError:
        return None
    first = words[0] if words else ""
    return first if first and "{" not in first and "=" not in first else None


class AgentRegistry:
    """Builds agents by name; ``builtin`` needs ``llm_factory`` (called when the agent is built)."""

    def __init__(self, llm_factory: Callable[[], LLM] | None, commands: Mapping[str, str]) -> None:
        self.llm_factory = llm_factory
        self.commands = dict(commands)

    def names(self) -> list[str]:
        """Every name :meth:`get` knows."""
        return ["builtin", *PRESETS, "command", *(n for n in self.commands if n not in PRESETS)]

    def get(self, name: str) -> Agent:
        """The agent called ``name``; :class:`AgentError` when it is unknown or cannot be built."""
        if name == "builtin":
            if self.llm_factory is None:
                raise AgentError("builtin: no LLM is configured for the built-in agent")
            try:
                return BuiltinAgent(self.llm_factory())
            except ConfigurationError as exc:
                raise AgentError(f"builtin: {exc.message}") from exc
        if name in PRESETS:
            return preset_agent(name)
        if name in self.commands:
            template = self.commands[name]
            return CommandAgent(name, template, binary=command_binary(template))
        if name == "command":
            if len(self.commands) != 1:
                raise AgentError(
                    f"command: agent.commands defines {len(self.commands)} commands; name the one to use"
                )
            (only,) = self.commands
            return self.get(only)
        raise AgentError(f"{name}: unknown agent; the agents are {', '.join(self.names())}")

    def select(self, chain: list[str]) -> tuple[Agent, list[str]]:
        """The first available agent of ``chain``, and one note per agent skipped before it."""
        notes: list[str] = []
        for name in chain:
            try:
                agent = self.get(name)
            except AgentError as exc:
                notes.append(f"{exc.message}, falling through")
                continue
            if agent.available():
                return agent, notes
            binary = agent.binary if isinstance(agent, CommandAgent) else None
            why = f"binary `{binary}` not installed" if binary else "not available"
            notes.append(f"{name}: {why}, falling through")
        tried = ", ".join(chain) or "(empty chain)"
        raise AgentError(f"no coding agent is available (tried {tried}): " + "; ".join(notes))
