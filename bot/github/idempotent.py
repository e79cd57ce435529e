"""Creating on GitHub exactly once, when GitHub may have done the work and still failed.

GitHub answers some creating requests 502/503/504 *after* making the comment, check run or
pull request; a timeout or a dropped connection leaves the same doubt. Sending the POST
again would make a second one. So a create that fails that way first looks for what it
may already have made (a `find` the caller gives: a check run of this App by `external_id`,
name and `head_sha`; a comment, review or issue of this App's bot by its exact body, lately)
and adopts it; only when nothing is found is it sent again, a few times with backoff. What
another App or bot made is never adopted, however alike (see `bot.github.identity`).
githubkit's own retry never re-sends these POSTs (see :func:`replays_safely`).

Each module's finder lives here as a pure predicate so it is tested on literal records.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from bot.errors import GitHubError
from bot.github.identity import Identity
from bot.github.models import CheckRun, Comment, Issue, PullRequest, Review

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_DELAYS = (1.0, 4.0)
"""Seconds before each re-send of a create that found nothing made (GitHub's own 1 s, 4 s)."""
RECENT = timedelta(minutes=10)
"""A found comment, review or issue counts as ours from this attempt when made this recently."""
SAFE_POSTS = re.compile(r".*/(labels|reactions|requested_reviewers|graphql|access_tokens|attempts)")
"""POSTs whose repetition changes nothing (labels and reactions are sets, GraphQL mutations we
send set a state) or is harmless (a second token, a second redelivery of a recorded GUID)."""


def replays_safely(method: str, path: str) -> bool:
    """Whether githubkit may send this request again after a 5xx (every creating POST may not)."""
    return method.upper() != "POST" or bool(SAFE_POSTS.fullmatch(path))


def may_have_happened(exc: GitHubError) -> bool:
    """A 5xx, a timeout or a dropped connection: GitHub may have done the work anyway."""
    return exc.status is None or exc.status >= 500


async def create_once(
    send: Callable[[], Awaitable[T]],
    find: Callable[[], Awaitable[T | None]],
    *,
    kind: str,
    doing: str,
    metrics: Metrics | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    delays: Sequence[float] = RETRY_DELAYS,
    after_resend: Callable[[T], Awaitable[object]] | None = None,
) -> T:
    """`send()` once; after an error that may hide a success, adopt what `find()` finds, else
    send again (after each of `delays`). Other errors, and the last one, are raised.

    When a re-sent create succeeds, `after_resend(made)` may clean up a copy the earlier
    attempt made that `find` could not see (GitHub was failing reads too)."""
    attempt = 0
    while True:
        try:
            made = await send()
        except GitHubError as exc:
            if not may_have_happened(exc):
                raise
            error = exc
        else:
            if attempt and after_resend is not None:
                try:
                    await after_resend(made)
                except GitHubError as exc:
                    log.warning("could not look for copies of the %s just made: %s", kind, exc.message)
            return made
        try:
            found = await find()
        except GitHubError as exc:
            log.warning("could not look for a %s GitHub may have made (%s): %s", kind, doing, exc.message)
            found = None
        if found is not None:
            log.warning("GitHub failed to %s but did it: adopting the %s it made", doing, kind)
            if metrics is not None:
                metrics.github_adopted.labels(kind).inc()
            return found
        if attempt >= len(delays):
            raise error
        log.warning("GitHub failed to %s (%s): sending it again", doing, error.message)
        if metrics is not None:
            metrics.github_server_retries.labels(kind).inc()
        await sleep(delays[attempt])
        attempt += 1


def since(now: datetime | None = None) -> datetime:
    """The earliest creation time a found comment, review or issue may have to be this attempt's."""
    return (now or datetime.now(UTC)) - RECENT


def matching_check_runs(
    runs: Sequence[CheckRun], *, name: str, head_sha: str, external_id: str | None, own: Identity
) -> list[CheckRun]:
    """This App's runs that are the one being created: same name, commit and `external_id`
    (newest first). Another App's run (a workflow token's) never is, however alike."""
    if external_id is None:
        return []
    same = [
        r
        for r in runs
        if r.name == name and r.head_sha == head_sha and r.external_id == external_id and own.made_run(r)
    ]
    return sorted(same, key=lambda r: -r.id)


def matching_comment(
    comments: Sequence[Comment], *, body: str, after: datetime, own: Identity
) -> Comment | None:
    """This App's bot's comment with exactly this body, made since `after` (the newest)."""
    for comment in sorted(comments, key=lambda c: -c.id):
        recent = comment.created_at is None or comment.created_at >= after
        if recent and own.wrote_comment(comment) and comment.body.strip() == body.strip():
            return comment
    return None


def matching_review(reviews: Sequence[Review], *, commit_id: str, body: str, own: Identity) -> Review | None:
    """This App's bot's review of `commit_id` with exactly this body."""
    for review in sorted(reviews, key=lambda r: -r.id):
        same = review.commit_id == commit_id and review.body.strip() == body.strip()
        if same and own.wrote(review.user_login):
            return review
    return None


def matching_issue(issues: Sequence[Issue], *, title: str, body: str, own: Identity) -> Issue | None:
    """This App's bot's open issue with exactly this title and body."""
    for issue in sorted(issues, key=lambda i: -i.number):
        if issue.title == title and issue.body.strip() == body.strip() and own.wrote(issue.user_login):
            return issue
    return None


def matching_pull(pulls: Sequence[PullRequest], *, head: str, base: str) -> PullRequest | None:
    """The open pull request from `head` into `base`."""
    return next((p for p in pulls if p.head_ref == head and p.base_ref == base and p.state == "open"), None)


def already_exists(exc: GitHubError) -> bool:
    """GitHub's 422 for a pull request whose head and base already have one: an answer, not a failure."""
    return exc.status == 422 and "already exists" in exc.message
