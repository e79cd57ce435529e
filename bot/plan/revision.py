"""A content hash of a PRD that names one revision of the plan."""

from __future__ import annotations

import hashlib
import json

from bot.plan.model import PRD, prd_data


def canonical_json(prd: PRD) -> str:
    """The PRD as JSON with sorted keys and no whitespace; equal plans give equal text."""
    return json.dumps(prd_data(prd), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def revision_hash(prd: PRD) -> str:
    """SHA-256 (hex) of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(prd).encode("utf-8", "surrogatepass")).hexdigest()


def short_hash(revision: str) -> str:
    """The first 12 characters of a revision hash, for display."""
    return revision[:12]
