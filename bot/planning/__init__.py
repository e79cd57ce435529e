"""The planning pipeline: issue and repository data in, a validated PRD out.

Pure orchestration over an injected `LLM`: no GitHub calls and no files besides the
prompt templates. The caller reads the issue (keeping only comments by users with
write access), the repository files, runs `plan_issue` and posts the result.
"""

from bot.llm.sanitize import fence_untrusted, sanitize_untrusted
from bot.planning.context import IssueContext, RepoContext, build_context, select_manifests
from bot.planning.epic import Epic, EpicFeature, plan_epic, validate_epic
from bot.planning.meter import UsageMeter
from bot.planning.perspectives import Synthesis, cross_check_markdown
from bot.planning.planner import PlanningResult, plan_issue
from bot.planning.quality import (
    QualityReview,
    StoryFix,
    apply_fixes,
    llm_quality_review,
    quality_warnings,
)
from bot.planning.strategy import StrategyHint, analyse_strategy

__all__ = [
    "Epic",
    "EpicFeature",
    "IssueContext",
    "PlanningResult",
    "QualityReview",
    "RepoContext",
    "StoryFix",
    "StrategyHint",
    "Synthesis",
    "UsageMeter",
    "analyse_strategy",
    "apply_fixes",
    "build_context",
    "cross_check_markdown",
    "fence_untrusted",
    "llm_quality_review",
    "plan_epic",
    "plan_issue",
    "quality_warnings",
    "sanitize_untrusted",
    "select_manifests",
    "validate_epic",
]
