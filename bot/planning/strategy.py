"""A deterministic first guess at the plan's strategy, given to the model as a hint.

direct: one short, single-concern change. mega: an epic (many task-list items,
several sections, "epic"/"roadmap"). hybrid: everything in between. The model may
still choose differently; the reasons go into the prompt so it can judge.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from bot.plan import Strategy
from bot.planning.context import IssueContext, RepoContext

MEGA_TASK_ITEMS = 6
MEGA_H2_HEADINGS = 3
DIRECT_MAX_WORDS = 120
DIRECT_MAX_LIST_ITEMS = 3
LONG_ISSUE_WORDS = 500
LARGE_REPO_FILES = 2000

_TASK_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[[ xX]\]", re.MULTILINE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)
_H2 = re.compile(r"^##[ \t]+\S", re.MULTILINE)
_MEGA_WORDS = re.compile(r"\b(?:epic|roadmap|milestones?)\b", re.IGNORECASE)
_OPS_WORDS = re.compile(
    r"\b(?:deploy\w*|migrations?|infrastructure|ci|cd|pipelines?|databases?|terraform|kubernetes|k8s|"
    r"helm|rollouts?|rollback|docker\w*)\b",
    re.IGNORECASE,
)
_CODE_WORDS = re.compile(
    r"\b(?:functions?|class(?:es)?|modules?|endpoints?|api|refactor\w*|bugs?|implement\w*|tests?|"
    r"handlers?|parsers?|ui|cli|code|library|methods?)\b",
    re.IGNORECASE,
)


class StrategyHint(BaseModel):
    """The heuristic strategy suggestion and why."""

    strategy: Strategy = Field(description="Suggested strategy: direct, hybrid or mega.")
    reasons: list[str] = Field(description="Why, one short line each, shown to the model.")
    multi_perspective: bool = Field(
        description="Whether planning from several perspectives first is worth its cost."
    )


def _found(pattern: re.Pattern[str], text: str) -> list[str]:
    return sorted({match.lower() for match in pattern.findall(text)})


def analyse_strategy(issue: IssueContext, repo: RepoContext) -> StrategyHint:
    """Suggest a strategy from the issue's shape and words (pure, deterministic)."""
    text = "\n".join([issue.title, issue.body, issue.notes])
    words = len(text.split())
    tasks = len(_TASK_ITEM.findall(text))
    items = len(_LIST_ITEM.findall(text))
    headings = len(_H2.findall(text))
    mega_words = _found(_MEGA_WORDS, " ".join([text, *issue.labels]))
    ops, code = _found(_OPS_WORDS, text), _found(_CODE_WORDS, text)

    reasons: list[str] = []
    if tasks >= MEGA_TASK_ITEMS:
        reasons.append(f"{tasks} task-list items")
    if headings >= MEGA_H2_HEADINGS:
        reasons.append(f"{headings} level-2 sections")
    if mega_words:
        reasons.append(f"mentions {', '.join(mega_words)}")
    if reasons:
        strategy = Strategy.MEGA
    elif words <= DIRECT_MAX_WORDS and items <= DIRECT_MAX_LIST_ITEMS and headings < 2:
        strategy = Strategy.DIRECT
        reasons.append(f"short single-concern issue ({words} words, {items} list items)")
    else:
        strategy = Strategy.HYBRID
        reasons.append(f"medium-sized issue ({words} words, {items} list items, {headings} sections)")

    signals = 0
    if words > LONG_ISSUE_WORDS:
        signals += 1
        reasons.append(f"long issue ({words} words)")
    if items >= 2 * MEGA_TASK_ITEMS:
        signals += 1
        reasons.append(f"{items} list items")
    if len(repo.file_tree) > LARGE_REPO_FILES:
        signals += 1
        reasons.append(f"large repository ({len(repo.file_tree)} files)")
    mixed = bool(ops and code)
    if mixed:
        reasons.append(f"mixes code and operations ({', '.join(ops)})")
    multi = strategy is Strategy.MEGA or mixed or signals >= 2
    return StrategyHint(strategy=strategy, reasons=reasons, multi_perspective=multi)
