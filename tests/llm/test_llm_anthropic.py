"""AnthropicLLM against recorded-shape Messages API bodies (respx behind httpx2)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
import respx

from bot.errors import LLMError
from bot.llm import AnthropicLLM, Message, ToolCall, ToolSpec
from bot.llm.anthropic_provider import to_anthropic_messages

URL = "https://api.anthropic.com/v1/messages"
KEY = "sk-ant-api03-SECRETSECRETSECRET"

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file of the repository.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def message_body(content: list[dict[str, Any]], *, stop_reason: str = "end_turn", **usage: int) -> dict:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("input_tokens", 1200),
            "output_tokens": usage.get("output_tokens", 300),
            "cache_creation_input_tokens": usage.get("cache_write", 0),
            "cache_read_input_tokens": usage.get("cache_read", 0),
            "service_tier": "standard",
        },
    }


def make_llm(http_client: httpx2.AsyncClient, sleep: Any) -> AnthropicLLM:
    return AnthropicLLM(model="claude-sonnet-4-6", api_key=KEY, http_client=http_client, sleep=sleep)


def sent(route: respx.Route, index: int = -1) -> dict:
    return json.loads(route.calls[index].request.content)


async def test_tool_use_answer_is_parsed(router, http_client, sleep) -> None:
    body = message_body(
        [
            {"type": "text", "text": "Let me look at the README."},
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "read_file",
                "input": {"path": "README.md"},
            },
        ],
        stop_reason="tool_use",
    )
    route = router.post(URL).mock(return_value=httpx.Response(200, json=body))

    completion = await make_llm(http_client, sleep).complete(
        system="You are careful.", messages=[Message(role="user", content="Summarise")], tools=[READ_FILE]
    )

    assert completion.text == "Let me look at the README."
    assert completion.tool_calls == [
        ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="read_file", arguments={"path": "README.md"})
    ]
    assert completion.stop_reason == "tool_use"
    assert completion.model == "claude-sonnet-4-5-20250929"
    request = sent(route)
    assert request["system"] == "You are careful."
    assert request["tools"] == [READ_FILE.model_dump()]
    assert "tool_choice" not in request
    assert "cache_control" not in json.dumps(request)


async def test_cost_uses_cache_tokens(router, http_client, sleep) -> None:
    body = message_body(
        [{"type": "text", "text": "ok"}],
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read=1_000_000,
        cache_write=1_000_000,
    )
    router.post(URL).mock(return_value=httpx.Response(200, json=body))

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="hi")]
    )

    assert completion.usage.cache_read_tokens == 1_000_000
    assert completion.usage.cache_write_tokens == 1_000_000
    # sonnet: 3 input + 1.5 output (0.1M x 15) + 0.30 cache read + 3.75 cache write
    assert completion.cost_usd == pytest.approx(3.0 + 1.5 + 0.30 + 3.75)


async def test_json_schema_is_a_forced_tool_and_comes_back_as_text(router, http_client, sleep) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    body = message_body(
        [{"type": "tool_use", "id": "toolu_01", "name": "plan", "input": {"title": "Add login"}}],
        stop_reason="tool_use",
    )
    route = router.post(URL).mock(return_value=httpx.Response(200, json=body))

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="plan it")], json_schema=schema, schema_name="plan"
    )

    assert json.loads(completion.text) == {"title": "Add login"}
    assert completion.tool_calls == []
    request = sent(route)
    assert request["tool_choice"] == {"type": "tool", "name": "plan"}
    assert request["tools"][-1]["name"] == "plan"
    assert request["tools"][-1]["input_schema"] == schema


async def test_force_tool(router, http_client, sleep) -> None:
    body = message_body([{"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "a"}}])
    route = router.post(URL).mock(return_value=httpx.Response(200, json=body))

    await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")], tools=[READ_FILE], force_tool="read_file"
    )

    assert sent(route)["tool_choice"] == {"type": "tool", "name": "read_file"}


async def test_cache_prefix_marks_system_and_last_tool(router, http_client, sleep) -> None:
    other = ToolSpec(name="submit", description="Finish.", input_schema={"type": "object"})
    route = router.post(URL).mock(
        return_value=httpx.Response(200, json=message_body([{"type": "text", "text": "ok"}]))
    )

    await make_llm(http_client, sleep).complete(
        system="Long stable prompt",
        messages=[Message(role="user", content="x")],
        tools=[READ_FILE, other],
        cache_prefix=True,
    )

    request = sent(route)
    assert request["system"] == [
        {"type": "text", "text": "Long stable prompt", "cache_control": {"type": "ephemeral"}}
    ]
    assert "cache_control" not in request["tools"][0]
    assert request["tools"][1]["cache_control"] == {"type": "ephemeral"}


def test_tool_round_trip_conversion() -> None:
    messages = [
        Message(role="user", content="Fix the bug"),
        Message(
            role="assistant",
            content="Reading two files.",
            tool_calls=[
                ToolCall(id="toolu_a", name="read_file", arguments={"path": "a.py"}),
                ToolCall(id="toolu_b", name="read_file", arguments={"path": "b.py"}),
            ],
        ),
        Message(role="tool", tool_call_id="toolu_a", content="print('a')"),
        Message(role="tool", tool_call_id="toolu_b", content="print('b')"),
        Message(role="assistant", content="Done."),
    ]

    assert to_anthropic_messages(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "Fix the bug"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading two files."},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "print('a')"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "print('b')"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]


async def test_round_trip_is_what_goes_on_the_wire(router, http_client, sleep) -> None:
    route = router.post(URL).mock(
        return_value=httpx.Response(200, json=message_body([{"type": "text", "text": "ok"}]))
    )
    messages = [
        Message(role="user", content="go"),
        Message(
            role="assistant", tool_calls=[ToolCall(id="toolu_x", name="read_file", arguments={"path": "p"})]
        ),
        Message(role="tool", tool_call_id="toolu_x", content="contents"),
    ]

    await make_llm(http_client, sleep).complete(system="s", messages=messages, tools=[READ_FILE])

    assert sent(route)["messages"] == to_anthropic_messages(messages)
    assert sent(route)["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_x", "name": "read_file", "input": {"path": "p"}}
    ]


async def test_rate_limit_honours_retry_after(router, http_client, sleep) -> None:
    limited = httpx.Response(
        429,
        headers={"retry-after": "7"},
        json={
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"},
        },
    )
    ok = httpx.Response(200, json=message_body([{"type": "text", "text": "fine"}]))
    route = router.post(URL).mock(side_effect=[limited, ok])

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")]
    )

    assert completion.text == "fine"
    assert sleep.delays == [7]
    assert route.call_count == 2


async def test_server_errors_give_up_with_llm_error(router, http_client, sleep) -> None:
    error = {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    route = router.post(URL).mock(return_value=httpx.Response(500, json=error))

    with pytest.raises(LLMError) as caught:
        await make_llm(http_client, sleep).complete(system="s", messages=[Message(role="user", content="x")])

    assert route.call_count == 4
    assert sleep.delays == [1.0, 2.0, 4.0]
    assert "HTTP 500" in caught.value.message
    assert "Internal server error" in caught.value.message
    assert "anthropic claude-sonnet-4-6" in caught.value.message


async def test_auth_error_is_not_retried_and_hides_the_key(router, http_client, sleep) -> None:
    error = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"},
    }
    route = router.post(URL).mock(return_value=httpx.Response(401, json=error))

    with pytest.raises(LLMError) as caught:
        await make_llm(http_client, sleep).complete(system="s", messages=[Message(role="user", content="x")])

    assert route.call_count == 1
    assert "HTTP 401" in str(caught.value)
    assert KEY not in str(caught.value)
    assert "invalid x-api-key ***" in str(caught.value)


async def test_connection_errors_are_retried(router, http_client, sleep) -> None:
    ok = httpx.Response(200, json=message_body([{"type": "text", "text": "back"}]))
    router.post(URL).mock(side_effect=[httpx.ConnectError("refused"), ok])

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")]
    )

    assert completion.text == "back"
    assert sleep.delays == [1.0]
