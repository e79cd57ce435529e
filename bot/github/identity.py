"""Who a port writes as, so that a create adopts only what this App made.

After a 5xx a create looks for what GitHub may have made anyway (see `bot.github.idempotent`).
Anything with `checks: write` (a workflow's `GITHUB_TOKEN`, another App) can make a check run
with our name, commit and `external_id`, and any bot can write a comment with our body: only
a check run whose `app.id` is this App's (its slug, where the id is unknown: the Action's
token), and a comment, review or issue whose author is this App's bot (or, for a comment,
that this App's token wrote as a bot: `performed_via_github_app`), counts as ours. When the
port cannot tell who it is, it adopts nothing and sends again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.github.models import CheckRun, Comment

ACTIONS_APP_SLUG = "github-actions"
"""The App behind every workflow's `GITHUB_TOKEN` (on github.com its id is 15368)."""


@dataclass(frozen=True)
class Identity:
    """This App as GitHub names it on what it makes: its id, slug and bot login (each if known)."""

    app_id: int | None = None
    app_slug: str | None = None
    bot_login: str | None = None

    def made_run(self, run: CheckRun) -> bool:
        """Whether this App made the check run (by its id; by its slug only where the id is unknown)."""
        if self.app_id is not None:
            return run.app_id == self.app_id
        return _same(run.app_slug, self.app_slug)

    def wrote(self, login: str, *, via_app_id: int | None = None, user_type: str = "") -> bool:
        """Whether this App's bot is the author: its login, or a bot writing through this App's token."""
        if _same(login, self.bot_login):
            return True
        is_bot = user_type == "Bot" or login.endswith("[bot]")
        return is_bot and self.app_id is not None and via_app_id == self.app_id

    def wrote_comment(self, comment: Comment) -> bool:
        return self.wrote(comment.user_login, via_app_id=comment.via_app_id, user_type=comment.user_type)


def _same(a: str | None, b: str | None) -> bool:
    """Logins and slugs compare case-insensitively; an unknown one matches nothing."""
    return bool(a) and bool(b) and a.lower() == b.lower()  # type: ignore[union-attr]


IdentitySource = Callable[[], Awaitable[Identity]]
"""How a port learns who it is (once it needs to: after a 5xx); may raise `PlanCascadeError`."""


def known(identity: Identity) -> IdentitySource:
    """An identity known up front (the Action's token, a test)."""

    async def source() -> Identity:
        return identity

    return source
