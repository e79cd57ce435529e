"""The App's identity as GitHub knows it, learned once per process: the links and commit
addresses the bot writes come from here, never from a hard-coded github.com.

- the web root: `GITHUB_SERVER_URL` when set, else derived from the REST root (`bot.github.urls`);
- the App's page: `GET /app` → `html_url` (the server asks it with the App's JWT when it
  learns the slug), else `<web root>/apps/<slug>`;
- the App's bot as a commit author: `<slug>[bot]` (or the configured bot login) and its
  noreply address `<id>+<login>@users.noreply.<host>`, the id from `GET /users/<login>`;
- the approvers of a revision as co-authors, by the same noreply addresses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.config.identity import CommitIdentity, commit_identity
from bot.config.repo import AgentConfig
from bot.errors import GitHubError
from bot.github.port import GitHubPort
from bot.github.urls import app_page, co_author, noreply_email, web_url

log = logging.getLogger(__name__)


@dataclass
class AppIdentity:
    """What the process learned about its App and the people it credits (kept in `Services`)."""

    api_url: str
    server_url: str | None = None
    """`GITHUB_SERVER_URL`, when the environment names the web root."""
    page: str | None = None
    """The App's page as `GET /app` named it."""
    user_ids: dict[str, int | None] = field(default_factory=dict)
    """Login → account id (None: GitHub has no such account), asked once each."""

    @property
    def web(self) -> str:
        """The server's web root (`https://github.com`, `https://HOST` for an Enterprise Server)."""
        return (self.server_url or "").rstrip("/") or web_url(self.api_url)

    def app_url(self, slug: str | None) -> str | None:
        """The App's page: GitHub's `html_url`, else derived from the web root and the slug."""
        return self.page or (app_page(self.web, slug) if slug else None)

    async def user_id(self, port: GitHubPort, login: str) -> int | None:
        """`login`'s account id, asked once (a failure is not kept: asked again next time)."""
        if login not in self.user_ids:
            try:
                self.user_ids[login] = await port.get_user_id(login)
            except GitHubError as exc:
                log.warning("could not read the account %s: %s", login, exc.message)
                return None
        return self.user_ids[login]

    async def address(self, port: GitHubPort, login: str) -> str | None:
        """The noreply address GitHub links to `login`'s account, or None when unknown."""
        user_id = await self.user_id(port, login)
        return noreply_email(user_id, login, self.web) if user_id is not None else None

    async def commits(
        self, port: GitHubPort, agent: AgentConfig, *, bot_login: str | None, approvers: Iterable[str] = ()
    ) -> CommitIdentity:
        """Who the bot's commits are by (the App's bot unless `agent` names an author) and the
        approvers they credit (those whose account GitHub knows)."""
        app_email = await self.address(port, bot_login) if bot_login else None
        credited = []
        for login in dict.fromkeys(approvers):
            email = await self.address(port, login)
            if email is not None:
                credited.append(co_author(login, email))
        return commit_identity(agent, app_name=bot_login, app_email=app_email, co_authors=tuple(credited))
