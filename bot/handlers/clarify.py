"""Before a first plan: an issue that is a question gets an answer, an unclear one gets questions.

The questions comment carries a hidden marker. The next comment on the issue by a user with
write access, while the issue has no plan, is taken as the answers: planning resumes with the
questions and that answer in its notes, and both are kept in the plan's state (provenance).
Anyone else's reply changes nothing.
"""

from __future__ import annotations

import logging

from bot.handlers.session import Session
from bot.plans import same_login
from bot.rendering.answers import QUESTIONS_MARKER

log = logging.getLogger(__name__)


async def resume_with_answers(
    session: Session, *, login: str, association: str | None, user_type: str | None, body: str
) -> bool:
    """Plan with `body` as the answers, when the issue waits for answers and `login` may give them."""
    if await session.load_plan() is not None:
        return False
    comments = await session.port.list_issue_comments(session.repo, session.issue)
    asked = [
        c for c in comments if QUESTIONS_MARKER in c.body and same_login(c.user_login, session.bot_login)
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
    from bot.handlers.planning import plan_issue

    await plan_issue(session, actor=login, text=answers, clarifications=answers)
    return True
