"""story_prompt and task_prompt: what every agent is told."""

from __future__ import annotations

from bot.agent import story_prompt, task_prompt
from bot.plan import PRD, Story
from tests.agent.agent_builders import MakeTask
from tests.plan.plan_builders import build_prd, build_story


def _plan() -> tuple[PRD, Story]:
    first = build_story(1, title="Add the limiter class")
    second = build_story(
        2,
        1,
        title="Use the limiter in the API",
        description="Wire the limiter into every request handler.",
        acceptance_criteria=["GET /items returns 429 after 10 calls in 1 s", "the limit is configurable"],
        files=["app/api.py", "tests/test_api.py"],
        verification="pytest -q tests/test_api.py",
    )
    return build_prd(first, second, summary="Protect the API from bursts."), second


def test_the_prompt_carries_the_plan_the_story_and_the_context() -> None:
    prd, story = _plan()
    text = story_prompt(
        prd=prd,
        story=story,
        dependency_summaries={
            "STORY-001": "Added Limiter in app/limiter.py.",
            "STORY-009": "Not a dependency.",
        },
        repo_map="app/api.py\n  def handler()",
        phase="implementation",
        feedback=None,
    )
    assert text.startswith("# Plan: Add rate limiting\n\nProtect the API from bursts.")
    assert "- STORY-001: Add the limiter class\n- STORY-002: Use the limiter in the API ← this one" in text
    assert "## Your story: STORY-002 — Use the limiter in the API" in text
    assert "- [ ] GET /items returns 429 after 10 calls in 1 s\n- [ ] the limit is configurable" in text
    assert "app/api.py, tests/test_api.py" in text and "`pytest -q tests/test_api.py`" in text
    assert "### STORY-001\nAdded Limiter in app/limiter.py." in text and "Not a dependency" not in text
    assert "## Repository map\n\napp/api.py\n  def handler()" in text
    assert "Implement this story" in text and "add or update tests" in text
    assert ".github/workflows" in text and "Do not commit" in text
    assert "Gate output" not in text


def test_a_retry_prompt_carries_the_gate_output() -> None:
    prd, story = _plan()
    output = "FAILED tests/test_api.py::test_limit - assert 200 == 429\n```inner fence```"
    text = story_prompt(
        prd=prd, story=story, dependency_summaries={}, repo_map="", phase="retry", feedback=output
    )
    assert "the quality gates failed" in text
    assert "## Gate output\n\n````\n" + output + "\n````" in text
    assert "## Repository map" not in text


def test_long_feedback_keeps_its_tail() -> None:
    prd, story = _plan()
    feedback = "noise line\n" * 5000 + "THE REAL ERROR"
    text = story_prompt(
        prd=prd, story=story, dependency_summaries={}, repo_map="", phase="review", feedback=feedback
    )
    assert "## Review comments" in text and "THE REAL ERROR" in text
    assert "characters cut" in text and len(text) < 16_000


def test_task_prompt_adds_feedback_only_once(make_task: MakeTask) -> None:
    plain = make_task(prompt="Do it.")
    assert task_prompt(plain) == "Do it."
    with_feedback = make_task(prompt="Do it.", phase="review", feedback="Rename x to count.")
    assert task_prompt(with_feedback) == "Do it.\n\n## Review comments\n\n```\nRename x to count.\n```\n"
    already = make_task(prompt="Do it.\nRename x to count.\n", phase="review", feedback="Rename x to count.")
    assert task_prompt(already) == already.prompt
