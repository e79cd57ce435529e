"""The setup a plan will run, chosen when it is planned: configured, or detected from the repository."""

from __future__ import annotations

from bot.environment.node import NODE_TOOLS
from bot.environment.setup import PlannedSetup
from bot.environment.setup import planned_setup as choose_setup
from bot.errors import GitHubError
from bot.handlers.session import Session
from bot.sandbox.process import tools_on_path, uv_program


async def planned_setup(session: Session) -> PlannedSetup:
    """The setup commands for a new plan revision: `setup:` when configured, else detected from
    the default branch's tree (read once per session), reading only the files detection needs."""
    assert session.config is not None

    async def tree() -> list[str]:
        try:
            return await session.tree()
        except GitHubError:
            return []  # no tree (an empty repository): nothing to install

    async def read(name: str) -> str | None:
        return await session.file_text(name)  # the prefetch has read the usual manifests

    tool_path = session.services.settings.tool_path
    return await choose_setup(
        session.config.setup,
        tree,
        read,
        uv=uv_program(tool_path) is not None,
        node_tools=tools_on_path(NODE_TOOLS, tool_path),
    )
