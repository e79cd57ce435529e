"""Where a plan lives: its comment on the issue (canonical) and a database row (cache).

A plan comment is believed only when the bot wrote it AND its state block verifies: the
signature made with the server's state key over the state and the comment's id (or, without
a key, an edit history showing that nobody but the bot edited it) and the PRD's recomputed
hash. Anyone with write access can edit the bot's comments; a block that does not verify is
ignored, logged, and the bot says once on the issue that the plan comment was altered and
must be re-planned. A signed state older than the newest the bot wrote (one pasted back from
the comment's edit history, say after a cancel) is never believed: see `bot.store.trust`.

Writes are compare-and-swap on the state's `version` (the database row's `version`
column, or the comment itself without a database), so no write is lost to another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from bot.clock import utcnow
from bot.db.engine import Database
from bot.db.models import PlanRecord
from bot.errors import GitHubError, StalePlan, UnknownIdentity
from bot.github.models import Comment
from bot.github.port import GitHubPort
from bot.plan.state import PlanState, PlanStatus
from bot.plan.state_block import (
    PENDING_BLOCK,
    decode_payload,
    find_block,
    integrity_problem,
    is_plan_comment,
    join_parts,
    parse_part,
    parse_reference,
)
from bot.rendering import messages
from bot.store.trust import ever_edited, origin_problem, same_login

log = logging.getLogger(__name__)
ALTERED = "altered"
"""The cache row's status for a plan whose comment no longer verifies (not polled, not run)."""


Listed = Sequence[Comment] | None
"""An issue's comments, when a caller has listed them already."""


@dataclass
class LoadedPlan:
    """A plan and the comment that carries it (plus its continuation comments, if any)."""

    state: PlanState
    comment_id: int
    reactions_etag: str | None = None
    parts: dict[int, str] = field(default_factory=dict)
    """Continuation comment id → body last read or written, for a state too big for one comment."""
    pending_since: datetime | None = None
    """When set, the comment (written then) does not hold its signed state yet: the state is the
    bot's database row's (see `load`)."""


def require_identity(bot_login: str | None) -> str:
    """The bot's login, or UnknownIdentity: without it no plan comment can be believed."""
    if not bot_login:
        raise UnknownIdentity("the bot's own login is unknown: no plan state is trusted until it is")
    return bot_login


def altered_marker(comment_id: int) -> str:
    """The hidden line of the notice posted once for an altered plan comment."""
    return f"<!-- plan-cascade:altered comment={comment_id} -->"


class PlanStore:
    """Read and write plans on GitHub, with the database as a cache (optional)."""

    def __init__(
        self,
        db: Database | None = None,
        *,
        clock: Callable[[], datetime] = utcnow,
        key: bytes | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.key = key

    # -- reading ------------------------------------------------------------------------
    async def load(
        self, port: GitHubPort, repo: str, issue: int, *, bot_login: str | None, comments: Listed = None
    ) -> LoadedPlan | None:
        """The issue's plan, or None when it has none we can believe (an altered one is reported).
        `comments`: the issue's comments, when the caller has just listed them (not listed again)."""
        bot = require_identity(bot_login)
        record = await self._record(repo, issue)
        comment = None
        if record is not None and record.plan_comment_id:
            try:
                comment = await port.get_issue_comment(repo, record.plan_comment_id)
            except GitHubError as exc:
                if exc.status != 404:
                    raise
            if comment is not None and not same_login(comment.user_login, bot):
                comment = None
        if comment is None:
            comment = await self._newest_plan_comment(port, repo, issue, bot, comments)
        if comment is None:
            return None
        if PENDING_BLOCK in (comment.body or ""):
            if record is None or record.plan_comment_id != comment.id:
                return None  # a new plan comment, its state not written into it yet
            # The bot's own new plan comment, named by the bot's own row and never edited, its
            # signed state not written yet (that edit waits its turn): the row is the plan
            # meanwhile. An edited one (someone put the marker back) is judged as any other.
            edited = await ever_edited(port, comment)
            if edited is None:
                return None  # GitHub could not say: no plan for now, nothing reported
            if not edited:
                state = PlanState.model_validate(record.state)
                since = comment.created_at or self.clock()
                return LoadedPlan(state, comment.id, record.reactions_etag, pending_since=since)
        believed: tuple[PlanState, dict[int, str]] | str | None
        believed = await self.believe(port, repo, issue, comment, bot_login=bot, cached=record)
        if not isinstance(believed, str) and record is not None and record.version > believed[0].version:
            believed = self._newest(record, comment, believed)
        if believed is None:
            return None
        if isinstance(believed, str):
            await self._report_altered(port, repo, issue, comment, believed, bot_login=bot)
            return None
        same = record is not None and record.plan_comment_id == comment.id
        etag = record.reactions_etag if record is not None and same else None
        loaded = LoadedPlan(believed[0], comment.id, etag, believed[1])
        if not same or record is None or record.version < loaded.state.version:
            log.info("cached plan state of %s#%s from comment %s", repo, issue, comment.id)
            await self.cache(loaded)
        return loaded

    def _newest(
        self, record: PlanRecord, comment: Comment, believed: tuple[PlanState, dict[int, str]]
    ) -> tuple[PlanState, dict[int, str]] | str | None:
        """The comment holds an older version than the bot last wrote (the database's row).

        The same comment: a write in flight, or an older signed state pasted back (from the
        comment's edit history, say after a cancel): the bot's own newer state is the plan.
        Another comment: an older plan comment (the newer one deleted or hidden) is refused;
        none yet recorded (a new plan comment being written) is no plan for now.
        """
        older = believed[0].version
        if record.plan_comment_id == comment.id:
            log.warning(
                "plan comment %s of %s#%s holds version %s, older than version %s the bot wrote: "
                "the bot's own is the plan",
                comment.id,
                record.repo,
                record.issue_number,
                older,
                record.version,
            )
            return PlanState.model_validate(record.state), believed[1]
        if record.plan_comment_id is None:
            return None
        return f"its state is version {older}, older than version {record.version} the bot wrote last"

    async def find_on_github(
        self, port: GitHubPort, repo: str, issue: int, *, bot_login: str | None
    ) -> LoadedPlan | None:
        """The plan in the newest plan comment the bot wrote, if it verifies (no cache involved)."""
        bot = require_identity(bot_login)
        comment = await self._newest_plan_comment(port, repo, issue, bot, None)
        if comment is None:
            return None
        believed = await self.believe(port, repo, issue, comment, bot_login=bot, cached=None)
        if isinstance(believed, str):
            log.warning("plan comment %s of %s#%s is not trusted: %s", comment.id, repo, issue, believed)
            return None
        return LoadedPlan(believed[0], comment.id, parts=believed[1])

    async def _newest_plan_comment(
        self, port: GitHubPort, repo: str, issue: int, bot_login: str, comments: Listed
    ) -> Comment | None:
        found = None
        for comment in comments if comments is not None else await port.list_issue_comments(repo, issue):
            if is_plan_comment(comment.body) and same_login(comment.user_login, bot_login):
                found = comment
        return found

    async def believe(
        self,
        port: GitHubPort,
        repo: str,
        issue: int,
        comment: Comment,
        *,
        bot_login: str,
        cached: PlanRecord | None,
    ) -> tuple[PlanState, dict[int, str]] | str:
        """The state and parts a plan comment carries, or why it must not be believed."""
        if not same_login(comment.user_login, bot_login):
            return f"it was written by {comment.user_login}, not by {bot_login}"
        parts: dict[int, str] = {}
        block = find_block(comment.body)
        if block is not None:
            payload, signature, version, bound = block.payload, block.signature, block.version, block.comment
        else:
            reference = parse_reference(comment.body)
            if reference is None:
                return "it carries no readable plan state"
            ids, digest, ref = reference
            chunks = []
            for part_id in ids:
                part = await port.get_issue_comment(repo, part_id)
                parsed = parse_part(part.body)
                if parsed is None or not same_login(part.user_login, bot_login):
                    return f"its continuation comment {part_id} is not the bot's plan data"
                parts[part_id] = part.body or ""
                chunks.append(parsed[4])
            joined = join_parts(chunks, digest)
            if joined is None:
                return "a continuation comment of its state was changed or is missing"
            payload, signature, version, bound = joined, ref.signature, ref.version, ref.comment
        state = decode_payload(payload)
        if state is None:
            return "its state block is unreadable"
        distrust = await origin_problem(
            port,
            comment,
            payload=payload,
            signature=signature,
            version=version,
            bound_to=bound,
            state=state,
            cached=cached,
            bot_login=bot_login,
            key=self.key,
            anchored=self.db is not None,
        )
        return distrust or integrity_problem(state, repo=repo, issue=issue) or (state, parts)

    async def _report_altered(
        self, port: GitHubPort, repo: str, issue: int, comment: Comment, reason: str, *, bot_login: str
    ) -> None:
        """Log it, stop polling or running it, and say so on the issue once."""
        log.warning("plan comment %s of %s#%s is not trusted: %s", comment.id, repo, issue, reason)
        if self.db is not None:
            async with self.db.write() as session:
                await session.execute(
                    update(PlanRecord)
                    .where(PlanRecord.repo == repo, PlanRecord.issue_number == issue)
                    .values(status=ALTERED)
                )
        marker = altered_marker(comment.id)
        for existing in await port.list_issue_comments(repo, issue):
            if (existing.body or "").rstrip().endswith(marker) and same_login(existing.user_login, bot_login):
                return
        await port.create_issue_comment(
            repo, issue, body=messages.plan_altered(comment.html_url, reason) + "\n" + marker
        )

    # -- writing ------------------------------------------------------------------------
    async def next_version(self, repo: str, issue: int) -> int:
        """The version a new plan comment for the issue starts at (after any cached one)."""
        record = await self._record(repo, issue)
        return (record.version if record is not None else 0) + 1

    async def compare_and_set(
        self,
        port: GitHubPort,
        loaded: LoadedPlan,
        *,
        expected: int | None,
        installation_id: int | None,
        bot_login: str | None,
    ) -> None:
        """Claim the write of `loaded.state`, read at version `expected` (None: a new comment).

        Raises StalePlan, carrying the newest state, when someone else wrote in between.
        """
        state = loaded.state
        if self.db is None:
            if expected is None:
                return
            current = await self._comment_state(port, state.repo, state.issue, loaded.comment_id, bot_login)
            if current is not None and current.state.version != expected:
                current.parts = loaded.parts
                raise StalePlan(_stale_message(state, current.state.version), fresh=current)
            return
        values = self._row_values(loaded, installation_id)
        async with self.db.write() as session:
            key = (PlanRecord.repo == state.repo, PlanRecord.issue_number == state.issue)
            if expected is not None:
                done = await session.execute(
                    update(PlanRecord).where(*key, PlanRecord.version == expected).values(**values)
                )
                if getattr(done, "rowcount", 0) == 1:
                    return
            row = await session.get(PlanRecord, (state.repo, state.issue))
            if row is None or expected is None:
                if row is None:
                    session.add(PlanRecord(repo=state.repo, issue_number=state.issue, **values))
                else:
                    for name, value in values.items():
                        setattr(row, name, value)
                return
            fresh = LoadedPlan(
                PlanState.model_validate(row.state),
                row.plan_comment_id or loaded.comment_id,
                row.reactions_etag,
                loaded.parts,
            )
        raise StalePlan(_stale_message(state, fresh.state.version), fresh=fresh)

    async def _comment_state(
        self, port: GitHubPort, repo: str, issue: int, comment_id: int, bot_login: str | None
    ) -> LoadedPlan | None:
        """What the plan comment holds now (no database: the comment is the only record)."""
        comment = await port.get_issue_comment(repo, comment_id)
        believed = await self.believe(
            port, repo, issue, comment, bot_login=require_identity(bot_login), cached=None
        )
        return None if isinstance(believed, str) else LoadedPlan(believed[0], comment_id, parts=believed[1])

    async def cache(self, loaded: LoadedPlan, *, installation_id: int | None = None) -> None:
        """Upsert the database row of a plan, never replacing a newer version (no-op without a database)."""
        if self.db is None:
            return
        state = loaded.state
        values = self._row_values(loaded, installation_id)
        async with self.db.write() as session:
            row = await session.get(PlanRecord, (state.repo, state.issue))
            if row is None:
                session.add(PlanRecord(repo=state.repo, issue_number=state.issue, **values))
            elif row.version <= state.version:
                for name, value in values.items():
                    setattr(row, name, value)

    def _row_values(self, loaded: LoadedPlan, installation_id: int | None) -> dict[str, Any]:
        values: dict[str, Any] = {
            "status": loaded.state.status.value,
            "plan_comment_id": loaded.comment_id or None,
            "reactions_etag": loaded.reactions_etag,
            "state": loaded.state.model_dump(mode="json"),
            "updated_at": self.clock(),
            "version": loaded.state.version,
        }
        if installation_id is not None:
            values["installation_id"] = installation_id
        return values

    async def remember_etag(self, repo: str, issue: int, etag: str | None) -> None:
        """Keep the plan comment's reactions ETag (the next poll's If-None-Match)."""
        if self.db is None:
            return
        async with self.db.write() as session:
            await session.execute(
                update(PlanRecord)
                .where(PlanRecord.repo == repo, PlanRecord.issue_number == issue)
                .values(reactions_etag=etag)
            )

    async def cached(self, repo: str, issue: int) -> PlanRecord | None:
        """The database row of a plan (None without a database or row)."""
        return await self._record(repo, issue)

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


def _stale_message(state: PlanState, current: int) -> str:
    return (
        f"the plan of {state.repo}#{state.issue} changed while it was being written "
        f"(now version {current}): read it again"
    )
