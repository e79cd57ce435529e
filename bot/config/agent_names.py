"""Which agent names `agent` may use: the built-in ones and those it defines under `agent.commands`.

Pure; `bot.config.repo.AgentConfig` calls `agent_problems` when it validates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.config.errors import did_you_mean, format_key, template_problems

if TYPE_CHECKING:
    from bot.config.repo import AgentConfig

BUILTIN_AGENTS = ("builtin", "claude-code", "aider", "codex", "command")


def agent_problems(agent: AgentConfig, *, phases: Sequence[str]) -> list[str]:
    """Unknown agent names in default/phases/story_types, and bad command names or templates."""
    problems: list[str] = []
    custom = [name for name in agent.commands if name not in BUILTIN_AGENTS]
    more = (
        f"{', '.join(custom)} (from agent.commands)"
        if custom
        else "or a name you define under agent.commands"
    )
    valid = ", ".join([*BUILTIN_AGENTS, more])
    for name, template in agent.commands.items():
        key = format_key(("agent", "commands", name))
        if name in BUILTIN_AGENTS:
            problems.append(f'{key}: "{name}" is a built-in agent — pick another name')
        problems += template_problems(key, template)
    references: list[tuple[tuple[object, ...], str]] = [(("agent", "default"), agent.default)]
    for phase in phases:
        references += [
            (("agent", "phases", phase, i), name) for i, name in enumerate(getattr(agent.phases, phase))
        ]
    for story_type, chain in agent.story_types.items():
        references += [(("agent", "story_types", story_type, i), name) for i, name in enumerate(chain)]
    for loc, name in references:
        if name not in BUILTIN_AGENTS and name not in agent.commands:
            guess = did_you_mean(name, [*BUILTIN_AGENTS, *custom])
            fix = f'did you mean "{guess}"? Valid agents: {valid}' if guess else f"valid agents are {valid}"
            problems.append(f'{format_key(loc)}: unknown agent "{name}" — {fix}')
    return problems
