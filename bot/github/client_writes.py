"""The port's writes that take their turn in the installation's write queue (a part of `GitHubKitPort`).

Comments are answers and go first; a 👀 (`acknowledge`) is sent from a task of its own and dropped
when the answer on its issue goes first; an edit nobody awaits (`update_issue_comment_later`) goes
last and is replaced by a newer edit of the same comment queued before it went. Two edits of one
comment never overlap. See :mod:`bot.github.throttle`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from githubkit import GitHub

from bot.errors import GitHubError, Throttled
from bot.github.client_base import github_errors, json_object, split_repo
from bot.github.models import Comment, Reaction
from bot.github.pause import RateLimitGate
from bot.github.throttle import PATIENCE, Priority, Throttle
from bot.redaction import redact

log = logging.getLogger(__name__)

ACK_PATIENCE = 60.0
"""A 👀 that could not go within this many seconds is not sent at all (it would say nothing)."""


def issue_key(repo: str, number: int) -> tuple[str, str, int]:
    """What an answer and the 👀 it makes unnecessary share in the write queue."""
    return ("issue", repo.lower(), number)


def comment_key(repo: str, comment_id: int) -> tuple[str, str, int]:
    """One comment's edits in the write queue (never two at once; a newer one replaces a queued one)."""
    return ("comment", repo.lower(), comment_id)


class QueuedWrites:
    """Comment edits and reactions over the port's githubkit client, in the write queue's order."""

    _github: GitHub[Any]
    _headers: dict[str, str]
    _throttle: Throttle | None
    _gate: RateLimitGate | None

    async def _pace(
        self, *, creates: bool = True, priority: int = Priority.WORK, answers: object = None
    ) -> None:
        """Wait for the installation's throttle; `creates=False` for an edit of what exists;
        `answers`: the issue a comment answers on (its queued 👀 are dropped)."""
        if self._throttle is not None:
            await self._throttle.wait(creates=creates, priority=priority, answers=answers)

    @contextlib.asynccontextmanager
    async def _editing(self, repo: str, comment_id: int) -> AsyncIterator[None]:
        """A turn to edit a comment: none of its other edits goes meanwhile, a queued one nobody
        awaits is replaced (this edit is newer)."""
        if self._throttle is None:
            yield
            return
        async with self._throttle.turn(creates=False, key=comment_key(repo, comment_id)):
            yield

    async def ready_to_write(self) -> None:
        """Raise Throttled now, before costly work, when an answer could not be written within the
        task's patience (GitHub's pacing, the hour's creations, a rate-limit pause)."""
        bound = PATIENCE.get()
        if bound is None:
            return
        due = max(
            self._throttle.estimate(priority=Priority.ANSWER) if self._throttle is not None else 0.0,
            self._gate.remaining() if self._gate is not None else 0.0,
        )
        if due > bound:
            raise Throttled(f"this installation's writes must wait {due:.0f} s", seconds=due)

    async def _edit(self, repo: str, comment_id: int, body: str) -> Comment:
        """The edit itself, unpaced (the caller has its turn)."""
        owner, name = split_repo(repo)
        with github_errors(f"edit comment {comment_id} in {repo}"):
            resp = await self._github.rest.issues.async_update_comment(
                owner, name, comment_id, body=redact(body), headers=self._headers
            )
        return Comment.from_api(json_object(resp))

    async def _react(
        self, repo: str, content: str, *, issue: int = 0, comment_id: int | None = None
    ) -> Reaction:
        """The reaction itself, unpaced: on the comment `comment_id` when given, else on issue `issue`."""
        owner, name = split_repo(repo)
        on = f"comment {comment_id} in {repo}" if comment_id is not None else f"{repo}#{issue}"
        with github_errors(f"react to {on}"):
            if comment_id is None:
                resp = await self._github.rest.reactions.async_create_for_issue(
                    owner, name, issue, content=cast(Any, content), headers=self._headers
                )
            else:
                resp = await self._github.rest.reactions.async_create_for_issue_comment(
                    owner, name, comment_id, content=cast(Any, content), headers=self._headers
                )
        return Reaction.from_api(json_object(resp))

    async def update_issue_comment(self, repo: str, comment_id: int, *, body: str) -> Comment:
        async with self._editing(repo, comment_id):
            return await self._edit(repo, comment_id, body)

    async def update_issue_comment_later(self, repo: str, comment_id: int, *, body: str) -> None:
        """Edit a comment when the write queue has room (after answers, 👀 and other work), from a
        task of its own: the caller goes on at once. A newer edit of the comment queued before
        this one went replaces it. Without a write queue, the edit is made now."""
        if self._throttle is None:
            await self.update_issue_comment(repo, comment_id, body=body)
            return

        async def send() -> None:
            await self._edit(repo, comment_id, body)

        doing = f"edit comment {comment_id} in {repo}"
        key = comment_key(repo, comment_id)
        self._throttle.submit(send, what=doing, creates=False, priority=Priority.EDIT, key=key)

    async def acknowledge(self, repo: str, issue: int, *, comment_id: int | None = None) -> None:
        """👀 on issue `issue` (or on its comment `comment_id`): "seen". Sent from a task of its own
        when the write queue has room, dropped when the answer on `issue` goes first or when it
        could not go within ACK_PATIENCE; failures are logged. Without a write queue, sent now."""
        on = f"comment {comment_id} in {repo}" if comment_id is not None else f"{repo}#{issue}"

        async def send() -> None:
            await self._react(repo, "eyes", issue=issue, comment_id=comment_id)

        if self._throttle is None:
            try:
                await send()
            except GitHubError as exc:
                log.warning("could not react 👀 to %s: %s", on, exc.message)
            return
        self._throttle.submit(
            send,
            what=f"react 👀 to {on}",
            creates=True,
            priority=Priority.ACK,
            acks=issue_key(repo, issue),
            patience=ACK_PATIENCE,
        )

    async def add_issue_reaction(self, repo: str, number: int, content: str) -> Reaction:
        await self._pace()
        return await self._react(repo, content, issue=number)

    async def add_comment_reaction(self, repo: str, comment_id: int, content: str) -> Reaction:
        await self._pace()
        return await self._react(repo, content, comment_id=comment_id)
