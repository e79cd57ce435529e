from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.plan import (
    PRD,
    Level,
    Priority,
    Story,
    StoryType,
    Strategy,
    parse_prd,
    prd_json_schema,
    prd_to_json,
    prd_to_yaml,
)
from bot.plan.load import load_document
from tests.plan.plan_builders import build_prd, build_story

SCHEMA_EXAMPLE = """\
version: 1
title: Add rate limiting to the public API
summary: one paragraph
strategy: hybrid
complexity: medium
risk: medium
stories:
  - id: STORY-001
    title: Add a token-bucket limiter
    description: what and why
    type: feature
    priority: high
    depends_on: []
    acceptance_criteria:
      - "limiter.allow() returns False after 10 calls within 1 s"
    files: [src/limiter.py]
    verification: pytest tests/test_limiter.py
    agent: null
"""


def test_schema_example_parses_with_every_field() -> None:
    prd = parse_prd(SCHEMA_EXAMPLE)
    story = prd.story("STORY-001")
    assert (prd.strategy, prd.complexity, prd.risk) == (Strategy.HYBRID, Level.MEDIUM, Level.MEDIUM)
    assert story.priority is Priority.HIGH
    assert story.files == ["src/limiter.py"]
    assert story.verification == "pytest tests/test_limiter.py"
    assert story.agent is None


def test_defaults() -> None:
    prd = PRD(title="t", stories=[Story(id="STORY-001", title="s")])
    story = prd.stories[0]
    assert prd.version == 1
    assert (prd.summary, prd.strategy, prd.complexity, prd.risk) == ("", "hybrid", "medium", "medium")
    assert (story.description, story.type, story.priority) == ("", StoryType.FEATURE, Priority.MEDIUM)
    assert (story.depends_on, story.files, story.acceptance_criteria) == ([], [], [])
    assert (story.verification, story.agent) == (None, None)


def test_unknown_keys_and_versions_are_refused() -> None:
    with pytest.raises(ValidationError):
        PRD.model_validate({"title": "t", "colour": "red"})
    with pytest.raises(ValidationError):
        Story.model_validate({"id": "STORY-001", "title": "s", "dependson": []})
    with pytest.raises(ValidationError):
        PRD.model_validate({"title": "t", "version": 2})


def test_story_lookup() -> None:
    prd = build_prd(build_story(1), build_story(2, 1))
    assert prd.story("STORY-002").depends_on == ["STORY-001"]
    with pytest.raises(KeyError):
        prd.story("STORY-003")


def test_yaml_keys_follow_the_schema_order() -> None:
    text = prd_to_yaml(build_prd(build_story(1, description="two\nlines")))
    top = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert top == ["version", "title", "summary", "strategy", "complexity", "risk", "stories"]
    story_keys = [
        line.strip(" -").split(":")[0] for line in text.splitlines() if line.startswith(("  - ", "    "))
    ]
    assert story_keys[:3] == ["id", "title", "description"]
    assert "description: |-\n      two\n      lines\n" in text
    assert "\n  - id: STORY-001\n" in text


def test_yaml_and_json_round_trip() -> None:
    prd = build_prd(
        build_story(1, files=["src/ä.py"], verification="pytest -q", agent="aider", type="bugfix"),
        build_story(2, 1, description="Mehr Tempo — bitte\n\nzweiter Absatz", priority="low"),
        summary="Résumé: ünïcödé ✓",
        strategy="mega",
        risk="high",
    )
    assert parse_prd(prd_to_yaml(prd)) == prd
    assert parse_prd(prd_to_json(prd)) == prd
    assert "Résumé" in prd_to_yaml(prd)
    assert "ünïcödé" in prd_to_json(prd)
    # `features` is written only by an epic that has them: other plans read as before.
    assert list(json.loads(prd_to_json(prd))) == [f for f in PRD.model_fields if f != "features"]


@given(st.text(), st.text(), st.lists(st.text(), max_size=3))
def test_yaml_round_trip_keeps_any_text(title: str, description: str, files: list[str]) -> None:
    prd = PRD(title=title, stories=[Story(id="STORY-001", title=title, description=description, files=files)])
    assert PRD.model_validate(load_document(prd_to_yaml(prd))) == prd
    assert PRD.model_validate_json(prd_to_json(prd)) == prd


def test_json_schema_is_documented_and_identified() -> None:
    schema = prd_json_schema()
    assert schema["title"] == "Plan Cascade PRD v1"
    assert schema["$id"]
    assert schema["additionalProperties"] is False
    story = schema["$defs"]["Story"]
    assert story["properties"]["id"]["pattern"] == r"^[A-Z][A-Z0-9]*-\d{3}$"
    assert story["properties"]["acceptance_criteria"]["minItems"] == 1
    for model in (schema, story):
        for name, prop in model["properties"].items():
            assert prop.get("description"), f"{name} has no description"
    assert schema["$defs"]["StoryType"]["enum"] == ["feature", "bugfix", "refactor", "test", "docs", "infra"]
