"""Builders for planning tests: issues, repositories and scripted PRD answers."""

from __future__ import annotations

import json
from typing import Any

from bot.llm import Completion, Usage
from bot.planning import IssueContext, RepoContext

CRITERION = "limiter.allow() returns False after 10 calls within 1 s"


def story(number: int, *deps: int, **fields: Any) -> dict[str, Any]:
    """STORY-<number> as a JSON-ready dict, depending on STORY-<dep> for each dep."""
    values: dict[str, Any] = {
        "id": f"STORY-{number:03d}",
        "title": f"Story {number}",
        "description": f"Do part {number} of the rate limiter.",
        "depends_on": [f"STORY-{dep:03d}" for dep in deps],
        "acceptance_criteria": [CRITERION],
    }
    values.update(fields)
    return values


def prd_dict(*stories: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A PRD as a JSON-ready dict (one story when none is given)."""
    return {"title": "Add rate limiting", "stories": list(stories) or [story(1)], **fields}


def answer(data: dict[str, Any], *, tokens: tuple[int, int] = (100, 50), cost: float = 0.0) -> Completion:
    """A scripted completion whose text is `data` as JSON."""
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return Completion(text=json.dumps(data), usage=usage, cost_usd=cost, model="scripted")


def text_answer(text: str, *, tokens: tuple[int, int] = (100, 50), cost: float = 0.0) -> Completion:
    """A scripted free-text completion."""
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return Completion(text=text, usage=usage, cost_usd=cost, model="scripted")


def make_issue(**fields: Any) -> IssueContext:
    values: dict[str, Any] = {
        "repo": "octo/app",
        "number": 7,
        "title": "Add rate limiting to the API",
        "body": "Limit each client to 10 requests per second.",
        "author": "alice",
    }
    values.update(fields)
    return IssueContext(**values)


def make_repo(**fields: Any) -> RepoContext:
    values: dict[str, Any] = {
        "readme": "# App\nA small web API.",
        "file_tree": ["README.md", "pyproject.toml", "app/api.py", "tests/test_api.py"],
        "manifests": {"pyproject.toml": '[project]\nname = "app"\n'},
    }
    values.update(fields)
    return RepoContext(**values)


def prompt_text(call: dict[str, Any]) -> str:
    """Everything a recorded ScriptedLLM call showed the model."""
    return call["system"] + "\n".join(message.content for message in call["messages"])
