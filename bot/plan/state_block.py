"""The plan's hidden state block in its comment: encoding, signature, continuation parts. Pure.

Anyone with write access can edit anyone's comment, the bot's plan comment included, so
the block is tamper-evident: `v3` blocks carry an HMAC-SHA256 under a key only the server
holds (`sig=<hex>`) of their payload AND the id of the comment they were written into
(`c=<id>`), so a signed state copied into another comment does not verify; the payload holds
the state's `version`, which only grows, so the caller can refuse an older signed state pasted
back (see `bot.store.plans`). `sig=-` when there is no key (the Action without a state key: trust
then rests on the comment's edit history, checked by the caller). `v2` blocks are signed but
not bound to a comment (written before v3; re-signed as v3 by the next write), `v1` blocks
predate signatures.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import zlib
from dataclasses import dataclass

from pydantic import ValidationError

from bot.plan import revision_hash
from bot.plan.state import PlanState

STATE_MARKER = "plan-cascade:state"
PLAN_MARKER = "<!-- plan-cascade:plan -->"
PENDING_BLOCK = "<!-- plan-cascade:state-pending -->"
"""What a new plan comment holds until its state, signed for its id, is written into it."""
UNSIGNED = "-"
BOUND = 3
"""The block format whose signature covers the comment id as well as the payload."""
_BLOCK = re.compile(
    r"<!--\s*plan-cascade:state v(\d+)\s+(?:c=(\d+)\s+)?(?:sig=([0-9a-f]{64}|-)\s+)?"
    r"([A-Za-z0-9+/=\s]+?)\s*-->"
)
# A plan comment may hold 65,536 characters. A large plan's state moves into hidden part
# comments written by the bot; the plan comment then carries a reference naming the part
# comments, the sha256 of the whole payload and its signature.
INLINE_STATE_LIMIT = 40_000
PART_SIZE = 60_000
_REF = re.compile(
    r"<!--\s*plan-cascade:state-ref v(\d+)(?: c=(\d+))? parts=([0-9,]+) sha256=([0-9a-f]{64})"
    r"(?: sig=([0-9a-f]{64}|-))?\s*-->"
)
_PART = re.compile(
    r"<!--\s*plan-cascade:state-part (\d+)/(\d+) (\S+)#(\d+)\s*-->\s*"
    r"<!--\s*plan-cascade:state-data ([A-Za-z0-9+/=\s]+?)\s*-->"
)


@dataclass(frozen=True)
class Block:
    """A state block as found in a comment: its format version, signature and payload."""

    version: int
    signature: str | None
    """The hex HMAC, `-` for an unsigned block, None for a v1 block."""
    payload: str
    comment: int | None = None
    """The comment id a v3 block's signature covers (None before v3)."""


# -- payload and signature ---------------------------------------------------------------
def state_payload(state: PlanState) -> str:
    """The state as zlib-compressed JSON in base64 (what the hidden block carries)."""
    # A PRD without features is written as before features existed (older servers can read it).
    unused = {"prd": {"features"}} if not state.prd.features else None
    raw = json.dumps(state.model_dump(mode="json", exclude=unused), separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(zlib.compress(raw.encode(), 9)).decode()


def sign(payload: str, key: bytes | None, *, comment: int | None = None) -> str:
    """HMAC-SHA256 under `key` of the payload (and, for a v3 block, the comment id); `-` without a key."""
    if not key:
        return UNSIGNED
    message = "".join(payload.split())
    if comment is not None:
        message = f"{STATE_MARKER} v{BOUND} comment={comment}\n{message}"
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def signature_valid(
    payload: str, signature: str | None, key: bytes | None, *, comment: int | None = None
) -> bool:
    """Whether `signature` is the HMAC of the payload (bound to `comment`) under `key` (constant time)."""
    if not key or not signature or signature == UNSIGNED:
        return False
    return hmac.compare_digest(sign(payload, key, comment=comment), signature)


def _binding(comment: int | None) -> str:
    return f"v{BOUND} c={comment}" if comment is not None else "v2"


def encode_state(state: PlanState, *, key: bytes | None, comment: int | None = None) -> str:
    """The state as one signed hidden HTML comment, bound to `comment` when it is given."""
    payload = state_payload(state)
    return f"<!-- {STATE_MARKER} {_binding(comment)} sig={sign(payload, key, comment=comment)} {payload} -->"


def decode_payload(payload: str) -> PlanState | None:
    """A state from its base64 payload, or None when it is unreadable."""
    try:
        raw = zlib.decompress(base64.b64decode("".join(payload.split()), validate=True))
        return PlanState.model_validate_json(raw)
    except (binascii.Error, zlib.error, ValueError, ValidationError):
        return None


def find_block(body: str | None) -> Block | None:
    """The inline state block of a comment body, or None."""
    match = _BLOCK.search(body or "")
    if not match or match.group(1) not in ("1", "2", str(BOUND)):
        return None
    version = int(match.group(1))
    signature = match.group(3) if version >= 2 else None
    comment = int(match.group(2)) if version == BOUND and match.group(2) else None
    if (version >= 2 and signature is None) or (version == BOUND and comment is None):
        return None
    return Block(version, signature, match.group(4), comment)


def decode_state(body: str | None) -> PlanState | None:
    """The state a comment body carries inline, WITHOUT any trust check (tests, diagnostics)."""
    block = find_block(body)
    return decode_payload(block.payload) if block else None


def integrity_problem(state: PlanState, *, repo: str, issue: int) -> str | None:
    """Why a decoded state cannot be this issue's plan (None when it can)."""
    if state.repo.lower() != repo.lower() or state.issue != issue:
        return f"it names {state.repo}#{state.issue}, not {repo}#{issue}"
    if revision_hash(state.prd) != state.plan_hash:
        return "its plan_hash is not the hash of its PRD"
    return None


# -- state too big for one comment: continuation parts ------------------------------------
def payload_digest(payload: str) -> str:
    """sha256 of a state payload."""
    return hashlib.sha256(payload.encode()).hexdigest()


def state_reference(
    part_ids: list[int], payload: str, *, key: bytes | None, comment: int | None = None
) -> str:
    """The hidden block that points at continuation comments (signed like an inline block)."""
    parts = ",".join(map(str, part_ids))
    return (
        f"<!-- plan-cascade:state-ref {_binding(comment)} parts={parts} "
        f"sha256={payload_digest(payload)} sig={sign(payload, key, comment=comment)} -->"
    )


def parse_reference(body: str | None) -> tuple[list[int], str, Block] | None:
    """(part comment ids, sha256, the signature as a Block without payload) of a split state."""
    match = _REF.search(body or "")
    if not match:
        return None
    version = int(match.group(1))
    signature = match.group(5) if version >= 2 else None
    comment = int(match.group(2)) if version == BOUND and match.group(2) else None
    if (version >= 2 and signature is None) or (version == BOUND and comment is None):
        return None
    ids = [int(i) for i in match.group(3).split(",") if i]
    return ids, match.group(4), Block(version, signature, "", comment)


def split_payload(payload: str, size: int = PART_SIZE) -> list[str]:
    """The payload in chunks that each fit a comment."""
    return [payload[i : i + size] for i in range(0, len(payload), size)] or [""]


def part_body(*, index: int, total: int, repo: str, issue: int, chunk: str) -> str:
    """A continuation comment: one chunk of the state, hidden, with a visible line."""
    return (
        f"<!-- plan-cascade:state-part {index}/{total} {repo}#{issue} -->\n"
        f"<!-- plan-cascade:state-data {chunk} -->\n"
        f"_Plan Cascade plan data, part {index} of {total}: the plan above is too large for one "
        "comment. Please leave this comment as it is._\n"
    )


def parse_part(body: str | None) -> tuple[int, int, str, int, str] | None:
    """(index, total, repo, issue, chunk) of a continuation comment."""
    match = _PART.search(body or "")
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), match.group(3), int(match.group(4)), match.group(5)


def join_parts(chunks: list[str], digest: str) -> str | None:
    """The payload from its parts, or None when a part is missing or was changed."""
    payload = "".join("".join(c.split()) for c in chunks)
    return payload if payload_digest(payload) == digest else None


def is_plan_comment(body: str | None) -> bool:
    """Whether a comment is a Plan Cascade plan comment."""
    return bool(body) and PLAN_MARKER in body  # type: ignore[operator]
