"""Where a plan lives: its comment on the issue (canonical) and a database row (cache).

`PlanStore.load` prefers the comment the cache points at and falls back to scanning the
issue's comments, so a wiped database loses nothing: the next event rebuilds the row
from the comment's hidden state block. Only comments written by a bot account are
trusted: a human pasting a copy of a plan comment cannot forge plan state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from bot.db.engine import Database
from bot.db.models import PlanRecord
from bot.db.queue import utcnow
from bot.errors import GitHubError
from bot.github.models import Comment
from bot.github.port import GitHubPort
from bot.state import PlanState, PlanStatus, decode_state, is_plan_comment

log = logging.getLogger(__name__)


@dataclass
class LoadedPlan:
    """A plan and the comment that carries it."""

    state: PlanState
    comment_id: int
    reactions_etag: str | None = None


def trusted_author(comment: Comment, bot_login: str | None) -> bool:
    """Only our own (bot) comments carry plan state we believe."""
    if bot_login:
        return comment.user_login.lower() == bot_login.lower()
    return comment.user_type == "Bot"


class PlanStore:
    """Read and write plans on GitHub, with the database as a cache (optional)."""

    def __init__(self, db: Database | None = None, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.db = db
        self.clock = clock

    async def load(
        self, port: GitHubPort, repo: str, issue: int, *, bot_login: str | None
    ) -> LoadedPlan | None:
        """The plan of an issue, or None when the issue has no plan comment yet."""
        record = await self._record(repo, issue)
        if record is not None and record.plan_comment_id:
            try:
                comment = await port.get_issue_comment(repo, record.plan_comment_id)
            except GitHubError as exc:
                if getattr(exc, "status", None) != 404:
                    raise
                comment = None
            if comment is not None and trusted_author(comment, bot_login):
                state = decode_state(comment.body or "")
                if state is not None:
                    return LoadedPlan(state, comment.id, record.reactions_etag)
        loaded = await self.find_on_github(port, repo, issue, bot_login=bot_login)
        if loaded is not None:
            log.info("rebuilt plan state of %s#%s from comment %s", repo, issue, loaded.comment_id)
            await self.cache(loaded)
        return loaded

    async def find_on_github(
        self, port: GitHubPort, repo: str, issue: int, *, bot_login: str | None
    ) -> LoadedPlan | None:
        """Scan the issue's comments for the newest plan comment we wrote."""
        found: LoadedPlan | None = None
        for comment in await port.list_issue_comments(repo, issue):
            if not is_plan_comment(comment.body) or not trusted_author(comment, bot_login):
                continue
            state = decode_state(comment.body or "")
            if state is not None and state.repo.lower() == repo.lower() and state.issue == issue:
                found = LoadedPlan(state, comment.id)
        return found

    async def cache(self, loaded: LoadedPlan, *, installation_id: int | None = None) -> None:
        """Upsert the database row of a plan (no-op without a database)."""
        if self.db is None:
            return
        state = loaded.state
        async with self.db.write() as session:
            row = await session.get(PlanRecord, (state.repo, state.issue))
            data: dict[str, Any] = state.model_dump(mode="json")
            if row is None:
                session.add(
                    PlanRecord(
                        repo=state.repo,
                        issue_number=state.issue,
                        status=state.status.value,
                        installation_id=installation_id,
                        plan_comment_id=loaded.comment_id,
                        reactions_etag=loaded.reactions_etag,
                        state=data,
                        updated_at=self.clock(),
                    )
                )
            else:
                row.status = state.status.value
                row.plan_comment_id = loaded.comment_id
                row.reactions_etag = loaded.reactions_etag
                row.state = data
                row.updated_at = self.clock()
                if installation_id is not None:
                    row.installation_id = installation_id

    async def _record(self, repo: str, issue: int) -> PlanRecord | None:
        if self.db is None:
            return None
        async with self.db.read() as session:
            return await session.get(PlanRecord, (repo, issue))

    async def installation_of(self, repo: str, issue: int) -> int | None:
        """The installation a cached plan was seen through."""
        record = await self._record(repo, issue)
        return record.installation_id if record else None

    async def with_status(self, *statuses: PlanStatus) -> list[PlanRecord]:
        """Cached plans in the given statuses (the approval poller's work list)."""
        if self.db is None:
            return []
        async with self.db.read() as session:
            rows = await session.execute(
                select(PlanRecord).where(PlanRecord.status.in_([s.value for s in statuses]))
            )
            return list(rows.scalars())
