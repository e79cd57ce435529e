"""complete_structured with the ScriptedLLM, and JSON extraction on literal strings."""

from __future__ import annotations

import json

import httpx
import pytest
from pydantic import BaseModel

from bot.errors import LLMError
from bot.llm import AnthropicLLM, Completion, ScriptedLLM, Usage, complete_structured, extract_json


class Plan(BaseModel):
    title: str
    steps: list[str]


GOOD = '{"title": "Add login", "steps": ["model", "view"]}'


@pytest.mark.parametrize(
    "text",
    [
        GOOD,
        f"```json\n{GOOD}\n```",
        f"Here is the plan:\n```\n{GOOD}\n```\nHope it helps.",
        f"Sure! {GOOD} Let me know.",
        f"  \n{GOOD}\n",
    ],
)
def test_extract_json_tolerates_fences_and_prose(text: str) -> None:
    assert extract_json(text) == json.loads(GOOD)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "empty"), ("no json here", "no JSON object"), ('{"title": "x", ', "not valid JSON")],
)
def test_extract_json_explains_failures(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        extract_json(text)


async def test_valid_answer_first_time() -> None:
    llm = ScriptedLLM([Completion(text=GOOD, usage=Usage(input_tokens=10, output_tokens=5), cost_usd=0.01)])

    result = await complete_structured(
        llm, system="sys", prompt="plan it", model_cls=Plan, schema_name="plan"
    )

    assert result.value == Plan(title="Add login", steps=["model", "view"])
    assert len(result.completions) == 1
    assert result.cost_usd == pytest.approx(0.01)
    call = llm.calls[0]
    assert call["json_schema"] == Plan.model_json_schema()
    assert call["schema_name"] == "plan"
    assert call["max_tokens"] == 8192


async def test_malformed_answer_is_repaired_once() -> None:
    llm = ScriptedLLM(
        [
            Completion(text='{"title": "Add login"', usage=Usage(input_tokens=10), cost_usd=0.02),
            Completion(text=GOOD, usage=Usage(input_tokens=20), cost_usd=0.03),
        ]
    )

    result = await complete_structured(
        llm, system="sys", prompt="plan it", model_cls=Plan, schema_name="plan"
    )

    assert result.value.title == "Add login"
    assert result.usage.input_tokens == 30
    assert result.cost_usd == pytest.approx(0.05)
    repair = llm.calls[1]["messages"]
    assert [m.role for m in repair] == ["user", "assistant", "user"]
    assert repair[1].content == '{"title": "Add login"'
    assert "not valid JSON" in repair[2].content
    assert "complete JSON" in repair[2].content


async def test_schema_errors_and_custom_validation_are_sent_back() -> None:
    def at_least_two_steps(plan: Plan) -> list[str]:
        return [] if len(plan.steps) >= 2 else ["steps: a plan needs at least two steps"]

    llm = ScriptedLLM(['{"title": "x", "steps": ["only one"]}', GOOD])

    result = await complete_structured(
        llm, system="s", prompt="p", model_cls=Plan, schema_name="plan", validate=at_least_two_steps
    )

    assert result.value.steps == ["model", "view"]
    assert "at least two steps" in llm.calls[1]["messages"][2].content


async def test_malformed_twice_raises_with_the_errors() -> None:
    llm = ScriptedLLM(['{"steps": "nope"}', '{"steps": "still nope"}'])

    with pytest.raises(LLMError) as caught:
        await complete_structured(llm, system="s", prompt="p", model_cls=Plan, schema_name="plan")

    message = caught.value.message
    assert "scripted scripted gave no valid plan after one repair round" in message
    assert "title: Field required" in message
    assert "steps: Input should be a valid list" in message
    assert len(llm.calls) == 2


async def test_many_errors_are_truncated() -> None:
    def many(plan: Plan) -> list[str]:
        return [f"problem {i}" for i in range(25)]

    llm = ScriptedLLM([GOOD, GOOD])

    with pytest.raises(LLMError) as caught:
        await complete_structured(
            llm, system="s", prompt="p", model_cls=Plan, schema_name="plan", validate=many
        )

    lines = caught.value.message.splitlines()
    assert len(lines) == 12
    assert lines[-1] == "- ... and 15 more"


async def test_cut_off_answer_says_so() -> None:
    cut = Completion(text='{"title": "x", "st', stop_reason="max_tokens")
    llm = ScriptedLLM([cut, cut])

    with pytest.raises(LLMError, match="cut off at max_tokens=100"):
        await complete_structured(
            llm, system="s", prompt="p", model_cls=Plan, schema_name="plan", max_tokens=100
        )


async def test_through_anthropic_with_one_repair(router, http_client, sleep) -> None:
    def message(tool_input: dict) -> dict:
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "plan", "input": tool_input}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 100,
                "output_tokens": 50,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    route = router.post("https://api.anthropic.com/v1/messages").mock(
        side_effect=[
            httpx.Response(200, json=message({"title": "x"})),
            httpx.Response(200, json=message({"title": "x", "steps": ["a", "b"]})),
        ]
    )
    llm = AnthropicLLM(model="claude-sonnet-4-6", api_key="sk-ant-k", http_client=http_client, sleep=sleep)

    result = await complete_structured(
        llm, system="s", prompt="p", model_cls=Plan, schema_name="plan", cache_prefix=True
    )

    assert result.value == Plan(title="x", steps=["a", "b"])
    assert result.usage.input_tokens == 200
    second = json.loads(route.calls[1].request.content)
    assert second["tool_choice"] == {"type": "tool", "name": "plan"}
    assert second["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": '{"title": "x"}'}],
    }
    assert "steps: Field required" in second["messages"][2]["content"][0]["text"]
