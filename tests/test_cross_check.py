"""Cross-checked planning across providers: `provider:model` entries, and the agreements shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.app.wiring import make_llm_factory
from bot.config.load import load_repo_config
from bot.config.repo import split_model_ref
from bot.errors import RepoConfigError
from bot.llm import ScriptedLLM
from bot.llm.base import Completion, Usage
from bot.plan.state_block import decode_state
from bot.runtime.services import Services
from tests.harness import REPO, Harness, labeled
from tests.support import make_settings


def _answer(data: dict[str, Any]) -> Completion:
    return Completion(
        text=json.dumps(data),
        tool_calls=[],
        usage=Usage(input_tokens=10, output_tokens=10),
        cost_usd=0.01,
        model="scripted",
        stop_reason="end_turn",
    )


def _prd(*titles: str) -> dict[str, Any]:
    return {
        "version": 1,
        "title": "Limits",
        "summary": "Add limits.",
        "stories": [
            {
                "id": f"STORY-{i:03d}",
                "title": title,
                "description": "Limit requests per client.",
                "acceptance_criteria": [f"limiter test {i} returns 429 after 10 calls"],
            }
            for i, title in enumerate(titles, start=1)
        ],
    }


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("openai:gpt-5", ("openai", "gpt-5")),
        ("anthropic:claude-opus-4-5", ("anthropic", "claude-opus-4-5")),
        ("claude-opus-4-5", (None, "claude-opus-4-5")),
        ("llama3:8b", (None, "llama3:8b")),  # an Ollama tag, not a provider
    ],
)
def test_a_planning_model_entry_may_name_its_provider(entry: str, expected: tuple) -> None:
    assert split_model_ref(entry) == expected


def test_an_entry_without_a_model_is_a_config_error() -> None:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config("llm:\n  planning_models: ['openai:', claude-opus-4-5]\n")
    assert caught.value.problems == ["llm.planning_models: 'openai:' names no model (write `provider:model`)"]


def test_the_factory_builds_each_provider_with_its_own_key(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        PLAN_CASCADE_LLM_PROVIDER="anthropic",
        PLAN_CASCADE_LLM_BASE_URL="https://llm-proxy.example/anthropic",
        ANTHROPIC_API_KEY="sk-ant-test",
        OPENAI_API_KEY="sk-openai-test",
    )
    llm_for = make_llm_factory(Services(settings=settings))
    config = load_repo_config("llm:\n  planning_models: ['openai:gpt-5', claude-opus-4-5]\n")
    other, same = (llm_for(config, m) for m in config.llm.planning_models)
    assert (other.provider, other.model) == ("openai", "gpt-5")
    assert (same.provider, same.model) == ("anthropic", "claude-opus-4-5")
    # The server's base URL is its own provider's; the other provider keeps its default.
    assert same.base_url == "https://llm-proxy.example/anthropic"
    assert other.base_url != same.base_url


async def test_cross_checked_plan_shows_agreements_and_disagreements(tmp_path: Path) -> None:
    made: list[str | None] = []
    scripted = {
        "openai:gpt-5": ScriptedLLM([_answer(_prd("Token bucket"))], provider="openai", model="gpt-5"),
        "anthropic:claude-opus-4-5": ScriptedLLM(
            [_answer(_prd("Sliding window", "Docs"))], provider="anthropic", model="claude-opus-4-5"
        ),
        None: ScriptedLLM(
            [
                _answer(
                    {
                        "agreements": ["Both limit per client"],
                        "disagreements": ["Algorithm: bucket or window; chose the token bucket"],
                        "prd": _prd("Token bucket", "Docs"),
                    }
                )
            ]
        ),
    }

    def llm_for(config: Any, model: str | None) -> Any:
        made.append(model)
        return scripted[model]

    async with Harness(tmp_path) as h:
        h.services.llm_for = llm_for
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            "llm:\n  quality_review: false\n  multi_perspective: never\n"
            "  planning_models: ['openai:gpt-5', 'anthropic:claude-opus-4-5']\n",
        )
        number = h.fake.add_issue(REPO, title="Add limits", body="Please add rate limits.").number
        await h.deliver("issues", labeled(number=number, sender="maint"))
        await h.drain()
        (comment,) = h.plan_comments(number)
        state = decode_state(comment.body)
    assert made == [None, "openai:gpt-5", "anthropic:claude-opus-4-5"]
    assert [s.title for s in state.prd.stories] == ["Token bucket", "Docs"]
    assert state.cross_check is not None and "openai/gpt-5 (1 stories)" in state.cross_check
    body = comment.body
    assert "<details><summary>Where the planning models agreed and disagreed" in body
    assert "Both limit per client" in body and "chose the token bucket" in body
    assert "**The synthesis** kept 2 stories: STORY-001 Token bucket, STORY-002 Docs." in body
