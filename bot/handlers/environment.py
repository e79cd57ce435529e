"""The setup a plan will run, chosen when it is planned: configured, or detected from the repository."""

from __future__ import annotations

from bot.envsetup import SetupSource
from bot.envsetup import planned_setup as choose_setup
from bot.errors import GitHubError
from bot.handlers.session import Session
from bot.workspace.process import uv_program


async def planned_setup(session: Session) -> tuple[list[str], SetupSource]:
    """The setup commands for a new plan revision: `setup:` when configured, else detected."""
    assert session.config is not None

    async def top_level() -> list[str]:
        try:
            tree = await session.tree()
        except GitHubError:
            return []  # no tree (an empty repository): nothing to install
        return [p for p in tree if "/" not in p]

    async def read(name: str) -> str | None:
        return await session.port.get_file_text(session.repo, name, ref=session.default_branch)

    uv = uv_program(session.services.settings.tool_path) is not None
    return await choose_setup(session.config.setup, top_level, read, uv=uv)
