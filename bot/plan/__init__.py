"""The plan core: the PRD model, its validation, dependency graph, revisions and changelog.

Everything here is pure: no network, no files, no clock.
"""

from bot.plan.changelog import Changelog, changelog_lines, diff_prds
from bot.plan.graph import (
    batch_of,
    compute_batches,
    dependency_problems,
    find_cycle,
    find_cycles,
    longest_chain,
    transitive_dependents,
)
from bot.plan.model import (
    PRD,
    PRD_SCHEMA_ID,
    STORY_ID_PATTERN,
    Level,
    Priority,
    Story,
    StoryType,
    Strategy,
    prd_json_schema,
    prd_to_json,
    prd_to_yaml,
)
from bot.plan.prdblock import extract_prd_block
from bot.plan.revision import canonical_json, revision_hash, short_hash
from bot.plan.validate import DEFAULT_MAX_STORIES, is_vague, parse_prd, vague_criteria, validate_prd

__all__ = [
    "DEFAULT_MAX_STORIES",
    "PRD",
    "PRD_SCHEMA_ID",
    "STORY_ID_PATTERN",
    "Changelog",
    "Level",
    "Priority",
    "Story",
    "StoryType",
    "Strategy",
    "batch_of",
    "canonical_json",
    "changelog_lines",
    "compute_batches",
    "dependency_problems",
    "diff_prds",
    "extract_prd_block",
    "find_cycle",
    "find_cycles",
    "is_vague",
    "longest_chain",
    "parse_prd",
    "prd_json_schema",
    "prd_to_json",
    "prd_to_yaml",
    "revision_hash",
    "short_hash",
    "transitive_dependents",
    "vague_criteria",
    "validate_prd",
]
