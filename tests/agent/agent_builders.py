"""Types shared by the agent tests (the fixtures themselves live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from bot.agent import AgentTask

MakeTask = Callable[..., AgentTask]
"""The `make_task` fixture: builds an AgentTask; keyword arguments override its fields."""
