"""Coding agents: the `Agent` port, the built-in ReAct agent, external CLI agents and their registry.

An agent works on one story in one worktree and returns an `AgentResult`; committing, pushing
and GitHub are someone else's job.
"""

from bot.agent.base import (
    Agent,
    AgentExit,
    AgentFailed,
    AgentResult,
    AgentStatus,
    AgentTask,
    LimitsExceeded,
    Phase,
    Submitted,
)
from bot.agent.builtin import BuiltinAgent
from bot.agent.external import PRESETS, CommandAgent, preset_agent
from bot.agent.prompt import story_prompt, task_prompt
from bot.agent.registry import AgentRegistry
from bot.agent.repomap import repo_map
from bot.agent.tools import TOOL_SPECS, ToolContext, run_tool
from bot.agent.transcript import Transcript, load_transcript

__all__ = [
    "PRESETS",
    "TOOL_SPECS",
    "Agent",
    "AgentExit",
    "AgentFailed",
    "AgentRegistry",
    "AgentResult",
    "AgentStatus",
    "AgentTask",
    "BuiltinAgent",
    "CommandAgent",
    "LimitsExceeded",
    "Phase",
    "Submitted",
    "ToolContext",
    "Transcript",
    "load_transcript",
    "preset_agent",
    "repo_map",
    "run_tool",
    "story_prompt",
    "task_prompt",
]
