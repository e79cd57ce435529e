"""Render the planner's prompts from `templates/prompts/*.md.j2`.

One system prompt serves every call of a planning run (so providers can cache it);
each user prompt says what to answer. Text that came from people or from a model
reading their words is fenced as untrusted data by the templates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.llm.sanitize import fence_untrusted
from bot.plan import PRD, prd_json_schema, prd_to_json
from bot.planning.strategy import StrategyHint
from bot.planning.templates import prompt_env

PERSPECTIVE_NAMES = ("strategic", "code", "operations")


def _render(name: str, **values: Any) -> str:
    return prompt_env().get_template(f"prompts/{name}.md.j2").render(fence=fence_untrusted, **values)


def system_prompt() -> str:
    """The planner's role, rules and the PRD JSON schema."""
    return _render("planner_system", prd_schema=json.dumps(prd_json_schema(), indent=2))


def planner_user_prompt(
    *, context: str, hint: StrategyHint, max_stories: int, perspectives: Mapping[str, str] | None = None
) -> str:
    """Ask for the PRD of the issue in `context` (with analyses, when there are some)."""
    return _render(
        "planner_user",
        context=context,
        hint=hint,
        max_stories=max_stories,
        perspectives=dict(perspectives or {}),
    )


def perspective_prompt(name: str, *, context: str, hint: StrategyHint) -> str:
    """Ask for a Markdown analysis from perspective `name` (one of PERSPECTIVE_NAMES)."""
    if name not in PERSPECTIVE_NAMES:
        raise ValueError(f"unknown perspective {name!r}; expected one of {', '.join(PERSPECTIVE_NAMES)}")
    return _render(f"perspective_{name}", context=context, hint=hint)


def synthesis_prompt(
    *,
    context: str,
    hint: StrategyHint,
    max_stories: int,
    perspectives: Mapping[str, str] | None = None,
    proposals: Sequence[tuple[str, PRD]] = (),
) -> str:
    """Ask for the final PRD from analyses, or for a Synthesis of several proposed PRDs."""
    return _render(
        "synthesis",
        context=context,
        hint=hint,
        max_stories=max_stories,
        perspectives=dict(perspectives or {}),
        proposals=[(label, prd_to_json(prd)) for label, prd in proposals],
    )


def quality_review_prompt(*, context: str, prd: PRD, warnings: Sequence[str] = ()) -> str:
    """Ask for a QualityReview of `prd`, listing the deterministic warnings already found."""
    return _render("quality_review", context=context, prd_json=prd_to_json(prd), warnings=list(warnings))


def epic_prompt(
    *, context: str, prd: PRD, own: str | None = None, repositories: Sequence[Mapping[str, Any]] = ()
) -> str:
    """Ask for the Epic (features, their dependencies, stories and repositories) of a mega plan;
    `repositories`: the candidates (`repo`, `description`, `tree`) besides `own`, the epic's."""
    return _render(
        "epic", context=context, prd_json=prd_to_json(prd), own=own, repositories=list(repositories)
    )
