"""The setup a plan will run, chosen when it is planned: configured, or detected from the repository."""

from __future__ import annotations

from typing import Literal

from bot.envsetup import MANIFESTS, detect_setup
from bot.errors import GitHubError
from bot.handlers.session import Session
from bot.workspace.process import uv_program

SetupSource = Literal["configured", "detected", "none"]


async def planned_setup(session: Session) -> tuple[list[str], SetupSource]:
    """The setup commands for a new plan revision: `setup:` when configured, else detected."""
    assert session.config is not None
    if session.config.setup is not None:
        commands = list(session.config.setup)
        return commands, "configured" if commands else "none"
    try:
        paths = [
            p for p in await session.port.list_tree(session.repo, session.default_branch) if "/" not in p
        ]
    except GitHubError:
        return [], "none"  # no tree (an empty repository): nothing to install
    texts: dict[str, str | None] = {}
    for name in MANIFESTS:
        if name in paths:
            texts[name] = await session.port.get_file_text(session.repo, name, ref=session.default_branch)
    uv = uv_program(session.services.settings.tool_path) is not None
    commands = detect_setup(paths, texts.get, uv=uv)
    return commands, "detected" if commands else "none"
