"""Whether the state in a plan comment is the bot's own, and the newest it wrote.

Anyone with write access can edit the bot's plan comment. A state block is believed when
its signature verifies (bound to this comment's id for v3 blocks: `bot.plan.state_block`), and
when something an editor cannot roll back vouches that it is not an older state pasted back:

- on the server, the database row's `version` (the newest the bot wrote; `PlanStore.load`
  compares it, and believes the row when the comment is older);
- without a database (the Action), the comment's edit history: its most recent edit must be
  the bot's. GitHub records who edited a comment; nobody can make an edit look like the bot's.

Without a state key (an Action without the secret), nobody but the bot may ever have edited it.
"""

from __future__ import annotations

from typing import Any

from bot.db.models import PlanRecord
from bot.github.models import Comment
from bot.github.port import GitHubPort
from bot.plan.state import PlanState
from bot.plan.state_block import BOUND, signature_valid


def same_login(a: str | None, b: str | None) -> bool:
    """GitHub logins compare case-insensitively."""
    return bool(a) and bool(b) and a.lower() == b.lower()  # type: ignore[union-attr]


def same_actor(editor: str | None, bot_login: str) -> bool:
    """Whether an editor named by GraphQL is the bot: GraphQL names an App's bot `slug`, REST `slug[bot]`.

    A user account can have an App's bare name only when it owns the App (GitHub refuses App
    names that are other accounts' logins)."""
    return same_login(editor, bot_login) or (
        bot_login.lower().endswith("[bot]") and same_login(editor, bot_login[: -len("[bot]")])
    )


async def origin_problem(
    port: GitHubPort,
    comment: Comment,
    *,
    payload: str,
    signature: str | None,
    version: int,
    bound_to: int | None,
    state: PlanState,
    cached: PlanRecord | None,
    bot_login: str,
    key: bytes | None,
    anchored: bool,
) -> str | None:
    """Why the block's origin cannot be vouched for (None when it can).

    `anchored`: a database holds the newest version the bot wrote (the caller compares it);
    otherwise the comment's edit history is the anchor.
    """
    if version == BOUND and bound_to != comment.id:
        return f"its state was signed for comment {bound_to}, not for this one"
    signed_for = bound_to if version == BOUND else None
    if version >= 2 and signature_valid(payload, signature, key, comment=signed_for):
        return None if anchored else await last_edit_problem(port, comment, bot_login)
    if version == 1 and cached is not None and _same_state(cached.state, state):
        return None  # an unsigned block from before signatures, identical to our own copy
    if key is not None:
        return "its signature does not match" if version >= 2 else "it is an unsigned old-format block"
    editors = await port.comment_editors(comment)
    if editors is None:
        return "it is unsigned and its edit history could not be read"
    others = sorted({e or "an unknown user" for e in editors if not same_actor(e, bot_login)})
    return f"it was edited by {', '.join(others)}" if others else None


async def last_edit_problem(port: GitHubPort, comment: Comment, bot_login: str) -> str | None:
    """Why the comment may not hold what the bot last wrote: someone else edited it last.

    A signed state from the comment's own edit history (an older version, a cancel undone)
    verifies; only who wrote it last tells it apart. `comment_editors` ends with the comment's
    `editor`, its most recent editor (whatever order the history comes in).
    """
    editors = await port.comment_editors(comment)
    if editors is None:
        return "its edit history could not be read, so an older state pasted back cannot be ruled out"
    if editors and not same_actor(editors[-1], bot_login):
        return f"it was last edited by {editors[-1] or 'an unknown user'}, not by the bot"
    return None


async def ever_edited(port: GitHubPort, comment: Comment) -> bool | None:
    """Whether anyone edited `comment`: no when GitHub's `updated_at` is its `created_at`, else as
    its edit history says (None when that cannot be read)."""
    if comment.updated_at is not None and comment.updated_at == comment.created_at:
        return False
    editors = await port.comment_editors(comment)
    return None if editors is None else bool(editors)


def _same_state(cached: dict[str, Any], state: PlanState) -> bool:
    try:
        return PlanState.model_validate(cached) == state
    except ValueError:
        return False
