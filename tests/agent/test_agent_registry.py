"""Agents by name and the fallthrough of a chain to the first available one."""

from __future__ import annotations

import pytest

from bot.agent import AgentRegistry, BuiltinAgent, CommandAgent
from bot.errors import AgentError, ConfigurationError
from bot.llm import LLM, ScriptedLLM

MISSING = "definitely-not-installed-xyz"


def scripted() -> LLM:
    return ScriptedLLM([])


def test_get_builds_each_kind_of_agent() -> None:
    registry = AgentRegistry(scripted, {"mine": "sh -c 'echo {story_id}'"})
    assert isinstance(registry.get("builtin"), BuiltinAgent)
    claude = registry.get("claude-code")
    assert isinstance(claude, CommandAgent) and claude.binary == "claude"
    mine = registry.get("mine")
    assert isinstance(mine, CommandAgent) and mine.binary == "sh" and mine.name == "mine"
    alias = registry.get("command")
    assert isinstance(alias, CommandAgent) and alias.name == "mine"


def test_get_refuses_unknown_and_unbuildable_agents() -> None:
    with pytest.raises(AgentError, match="nope: unknown agent"):
        AgentRegistry(scripted, {}).get("nope")
    with pytest.raises(AgentError, match="no LLM is configured"):
        AgentRegistry(None, {}).get("builtin")
    with pytest.raises(AgentError, match="defines 2 commands"):
        AgentRegistry(None, {"a": "true", "b": "true"}).get("command")


def test_select_falls_through_missing_binaries() -> None:
    registry = AgentRegistry(None, {"ghost": f"{MISSING} --prompt {{prompt_file}}", "local": "sh -c true"})
    agent, notes = registry.select(["ghost", "builtin", "local"])
    assert agent.name == "local"
    assert notes == [
        f"ghost: binary `{MISSING}` not installed, falling through",
        "builtin: no LLM is configured for the built-in agent, falling through",
    ]


def test_select_ends_at_builtin_with_a_model() -> None:
    registry = AgentRegistry(scripted, {"ghost": MISSING})
    agent, notes = registry.select(["ghost", "builtin"])
    assert isinstance(agent, BuiltinAgent)
    assert notes == [f"ghost: binary `{MISSING}` not installed, falling through"]


def test_select_raises_when_nothing_is_available() -> None:
    def broken() -> LLM:
        raise ConfigurationError("The anthropic LLM provider needs an API key: set ANTHROPIC_API_KEY.")

    registry = AgentRegistry(broken, {"ghost": MISSING})
    with pytest.raises(AgentError) as raised:
        registry.select(["ghost", "builtin"])
    message = raised.value.message
    assert message.startswith("no coding agent is available (tried ghost, builtin)")
    assert f"binary `{MISSING}` not installed" in message and "set ANTHROPIC_API_KEY" in message
