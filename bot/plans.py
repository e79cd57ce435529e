"""Where a plan lives: its comment on the issue (canonical) and a database row (cache).

`PlanStore.load` prefers the comment the cache points at and falls back to scanning the
issue's comments, so a wiped database loses nothing: the next event rebuilds the row
from the comment's hidden state block. Only comments written by a bot account are
trusted: a human pasting a copy of a plan comment cannot forge plan state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from bot.db.engine import Database
from bot.db.models import PlanRecord
from bot.db.queue import utcnow
from bot.errors import GitHubError
from bot.github.models import Comment
from bot.github.port import GitHubPort
from bot.state import (
    INLINE_STATE_LIMIT,
    PART_SIZE,
    STATE_MARKER,
    PlanState,
    PlanStatus,
    decode_state,
    is_plan_comment,
    join_parts,
    parse_part,
    parse_reference,
    part_body,
    split_payload,
    state_payload,
    state_reference,
)

log = logging.getLogger(__name__)


@dataclass
class LoadedPlan:
    """A plan and the comment that carries it (plus its continuation comments, if any)."""

    state: PlanState
    comment_id: int
    reactions_etag: str | None = None
    parts: dict[int, str] = field(default_factory=dict)
    """Continuation comment id → body last read or written, for a state too big for one comment."""


RETIRED_PART = "_Plan Cascade plan data: no longer used._"


async def read_state(
    port: GitHubPort, repo: str, comment: Comment, *, bot_login: str | None
) -> tuple[PlanState, dict[int, str]] | None:
    """The state a plan comment carries, inline or in its continuation comments."""
    state = decode_state(comment.body or "")
    if state is not None:
        return state, {}
    reference = parse_reference(comment.body)
    if reference is None:
        return None
    ids, digest = reference
    parts: dict[int, str] = {}
    chunks = []
    for part_id in ids:
        try:
            part = await port.get_issue_comment(repo, part_id)
        except GitHubError as exc:
            log.warning("plan state part %s unreadable: %s", part_id, exc.message)
            return None
        parsed = parse_part(part.body)
        if parsed is None or not trusted_author(part, bot_login):
            return None
        parts[part_id] = part.body or ""
        chunks.append(parsed[4])
    joined = join_parts(chunks, digest)
    return (joined, parts) if joined is not None else None


async def write_state(
    port: GitHubPort, state: PlanState, *, existing: dict[int, str]
) -> tuple[str, dict[int, str]]:
    """The hidden block for the plan comment; writes continuation comments when needed."""
    payload = state_payload(state)
    old_ids = list(existing)
    if len(payload) <= INLINE_STATE_LIMIT:
        block, parts = f"<!-- {STATE_MARKER} v1 {payload} -->", dict[int, str]()
    else:
        chunks = split_payload(payload, PART_SIZE)
        parts = {}
        for index, chunk in enumerate(chunks, start=1):
            body = part_body(index=index, total=len(chunks), repo=state.repo, issue=state.issue, chunk=chunk)
            if index <= len(old_ids):
                part_id = old_ids[index - 1]
                if existing[part_id] != body:
                    await port.update_issue_comment(state.repo, part_id, body=body)
            else:
                part_id = (await port.create_issue_comment(state.repo, state.issue, body=body)).id
            parts[part_id] = body
        block = state_reference(list(parts), payload)
    for part_id in old_ids:
        if part_id not in parts and existing[part_id] != RETIRED_PART:
            await port.update_issue_comment(state.repo, part_id, body=RETIRED_PART)
    return block, parts


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
                found = await read_state(port, repo, comment, bot_login=bot_login)
                if found is not None:
                    return LoadedPlan(found[0], comment.id, record.reactions_etag, found[1])
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
            read = await read_state(port, repo, comment, bot_login=bot_login)
            if read is not None and read[0].repo.lower() == repo.lower() and read[0].issue == issue:
                found = LoadedPlan(read[0], comment.id, parts=read[1])
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
