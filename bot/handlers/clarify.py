"""Before a first plan: an issue that is a question gets an answer, an unclear one gets questions.

The questions comment carries a hidden marker. The next comment on the issue by a user with
write access, while the issue has no plan, is taken as the answers: planning resumes with the
questions and that answer in its notes, and both are kept in the plan's state (provenance).
Anyone else's reply changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.github.models import Comment
from bot.handlers.approval import poll_reactions
from bot.handlers.planning import plan_issue
from bot.handlers.session import Session
from bot.planning.answers import QUESTIONS_MARKER
from bot.store.plans import same_login

log = logging.getLogger(__name__)


async def on_plain_comment(
    session: Session, *, login: str, association: str | None, user_type: str | None, body: str
) -> None:
    """A comment with no command on an issue: the answers to the bot's questions, or a moment to
    look for 👍 on the plan. The issue's comments are listed at most once (none when a plan is
    cached: it is read by id), since every comment on every issue of the repository comes here."""
    comments = None
    if await session.store.cached(session.repo, session.issue) is None:
        comments = await session.port.list_issue_comments(session.repo, session.issue)
    loaded = await session.load_plan(comments=comments)
    if loaded is not None:
        await poll_reactions(session, loaded)
        return
    if session.config_error is not None:
        return
    if comments is None:  # a cached plan that no longer verifies: look for questions all the same
        comments = await session.port.list_issue_comments(session.repo, session.issue)
    await resume_with_answers(
        session, comments, login=login, association=association, user_type=user_type, body=body
    )


async def resume_with_answers(
    session: Session,
    comments: Sequence[Comment],
    *,
    login: str,
    association: str | None,
    user_type: str | None,
    body: str,
) -> bool:
    """Plan with `body` as the answers, when the issue (which has no plan) waits for answers and
    `login` may give them."""
    asked = [
        c
        for c in comments
        if c.body.rstrip().endswith(QUESTIONS_MARKER) and same_login(c.user_login, session.bot_login)
    ]
    if not asked:
        return False
    verdict = await session.may_act(login, association, user_type)
    if not verdict.allowed:
        log.info("@%s answered the questions without write access: not planning on it", login)
        return False
    questions = asked[-1].body.split(QUESTIONS_MARKER)[0]
    questions = "\n".join(line for line in questions.splitlines() if line[:1].isdigit())
    answers = f"The questions asked before planning:\n{questions}\n\nAnswers by @{login}:\n{body.strip()}"
    await plan_issue(session, actor=login, text=answers, clarifications=answers)
    return True
