"""Who the bot's commits are by, and whom they credit.

By default the App's own bot account: `<slug>[bot]` with its noreply address
`<bot user id>+<slug>[bot]@users.noreply.<host>`, which GitHub links to the App (the id and the
host are learned from GitHub, see `bot.runtime.identity`). `agent.author_name`/`author_email`
in the repository's config override it for the commits the bot makes with git (GitHub signs
nothing with a custom author, so commits it makes through its API are always the App's). The
people who approved the revision are credited on story commits with `Co-authored-by:`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config.repo import AgentConfig

DEFAULT_NAME = "Plan Cascade"
LEGACY_EMAIL = "plan-cascade[bot]@users.noreply.github.com"
"""The address the bot's commits carried before it learned the App's own (still recognised)."""


@dataclass(frozen=True)
class CommitIdentity:
    """The author (and committer) of the bot's commits, and the co-authors of story commits."""

    name: str = DEFAULT_NAME
    email: str = LEGACY_EMAIL
    co_authors: tuple[str, ...] = ()
    """`Name <address>` of each approver of the revision."""


def commit_identity(
    agent: AgentConfig,
    *,
    app_name: str | None = None,
    app_email: str | None = None,
    co_authors: tuple[str, ...] = (),
) -> CommitIdentity:
    """The configured author if any, else the App's bot (`app_name`, `app_email`), else the defaults."""
    name = agent.author_name or app_name or DEFAULT_NAME
    email = agent.author_email or app_email or LEGACY_EMAIL
    return CommitIdentity(name=name, email=email, co_authors=co_authors)
