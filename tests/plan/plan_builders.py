"""Builders for plan tests: short stories and PRDs with valid defaults."""

from __future__ import annotations

from typing import Any

from bot.plan import PRD, Story

GOOD_CRITERION = "limiter.allow() returns False after 10 calls within 1 s"


def build_story(number: int, *deps: int, **fields: Any) -> Story:
    """STORY-<number> depending on STORY-<dep> for each dep, with a valid criterion."""
    values: dict[str, Any] = {
        "id": f"STORY-{number:03d}",
        "title": f"Story {number}",
        "depends_on": [f"STORY-{dep:03d}" for dep in deps],
        "acceptance_criteria": [GOOD_CRITERION],
    }
    values.update(fields)
    return Story(**values)


def build_prd(*stories: Story, **fields: Any) -> PRD:
    return PRD(title=fields.pop("title", "Add rate limiting"), stories=list(stories), **fields)
