"""OpenAILLM against recorded-shape chat.completion bodies (respx behind httpx2)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
import respx

from bot.errors import LLMError
from bot.llm import Message, OpenAILLM, ToolCall, ToolSpec
from bot.llm.openai_provider import to_openai_messages

URL = "https://api.openai.com/v1/chat/completions"
KEY = "sk-proj-SECRETSECRETSECRET"

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file of the repository.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def chat_body(
    message: dict[str, Any],
    *,
    finish_reason: str = "stop",
    model: str = "gpt-4.1-2025-04-14",
    prompt: int = 1200,
    completion: int = 300,
    cached: int = 0,
) -> dict:
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
        "service_tier": "default",
        "system_fingerprint": "fp_3b6b2d6f1e",
    }


def make_llm(http_client: httpx2.AsyncClient, sleep: Any, **kwargs: Any) -> OpenAILLM:
    return OpenAILLM(model="gpt-4.1", api_key=KEY, http_client=http_client, sleep=sleep, **kwargs)


def sent(route: respx.Route, index: int = -1) -> dict:
    return json.loads(route.calls[index].request.content)


async def test_tool_calls_are_parsed(router, http_client, sleep) -> None:
    body = chat_body(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "README.md"}'},
                }
            ],
        },
        finish_reason="tool_calls",
    )
    route = router.post(URL).mock(return_value=httpx.Response(200, json=body))

    completion = await make_llm(http_client, sleep).complete(
        system="You are careful.", messages=[Message(role="user", content="Summarise")], tools=[READ_FILE]
    )

    assert completion.text == ""
    assert completion.tool_calls == [
        ToolCall(id="call_abc123", name="read_file", arguments={"path": "README.md"})
    ]
    assert completion.stop_reason == "tool_calls"
    request = sent(route)
    assert request["messages"][0] == {"role": "system", "content": "You are careful."}
    assert request["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": READ_FILE.description,
                "parameters": READ_FILE.input_schema,
            },
        }
    ]
    assert request["max_completion_tokens"] == 4096


async def test_json_schema_request_shape(router, http_client, sleep) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    route = router.post(URL).mock(
        return_value=httpx.Response(200, json=chat_body({"content": '{"title": "Add login"}'}))
    )

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")], json_schema=schema, schema_name="plan"
    )

    assert json.loads(completion.text) == {"title": "Add login"}
    assert sent(route)["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "plan", "schema": schema, "strict": False},
    }


async def test_force_tool_and_cache_prefix_is_ignored(router, http_client, sleep) -> None:
    route = router.post(URL).mock(return_value=httpx.Response(200, json=chat_body({"content": "ok"})))

    await make_llm(http_client, sleep).complete(
        system="s",
        messages=[Message(role="user", content="x")],
        tools=[READ_FILE],
        force_tool="read_file",
        cache_prefix=True,
    )

    request = sent(route)
    assert request["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert "cache_control" not in json.dumps(request)


async def test_cost_splits_cached_prompt_tokens(router, http_client, sleep) -> None:
    body = chat_body({"content": "ok"}, prompt=2_000_000, completion=1_000_000, cached=1_000_000)
    router.post(URL).mock(return_value=httpx.Response(200, json=body))

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")]
    )

    assert completion.usage.input_tokens == 1_000_000
    assert completion.usage.cache_read_tokens == 1_000_000
    # gpt-4.1: 2.00 input + 0.50 cached + 8.00 output
    assert completion.cost_usd == pytest.approx(10.5)


async def test_compatible_server_gets_max_tokens_and_costs_nothing_on_ollama(
    router, http_client, sleep
) -> None:
    url = "http://localhost:11434/v1/chat/completions"
    route = router.post(url).mock(
        return_value=httpx.Response(200, json=chat_body({"content": "hi"}, model="llama3.1"))
    )
    llm = OpenAILLM(
        model="llama3.1",
        api_key="ollama",
        base_url="http://localhost:11434/v1",
        provider="ollama",
        http_client=http_client,
        sleep=sleep,
    )

    completion = await llm.complete(system="s", messages=[Message(role="user", content="x")])

    assert sent(route)["max_tokens"] == 4096
    assert "max_completion_tokens" not in sent(route)
    assert completion.text == "hi"
    assert completion.cost_usd == 0.0


def test_tool_round_trip_conversion() -> None:
    messages = [
        Message(role="user", content="Fix the bug"),
        Message(
            role="assistant",
            tool_calls=[
                ToolCall(id="call_a", name="read_file", arguments={"path": "a.py"}),
                ToolCall(id="call_b", name="read_file", arguments={"path": "b.py"}),
            ],
        ),
        Message(role="tool", tool_call_id="call_a", content="print('a')"),
        Message(role="tool", tool_call_id="call_b", content="print('b')"),
        Message(role="assistant", content="Done."),
    ]

    converted = to_openai_messages("sys", messages)

    assert converted == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Fix the bug"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "b.py"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "print('a')"},
        {"role": "tool", "tool_call_id": "call_b", "content": "print('b')"},
        {"role": "assistant", "content": "Done."},
    ]


async def test_round_trip_is_what_goes_on_the_wire(router, http_client, sleep) -> None:
    route = router.post(URL).mock(return_value=httpx.Response(200, json=chat_body({"content": "ok"})))
    messages = [
        Message(role="user", content="go"),
        Message(
            role="assistant", tool_calls=[ToolCall(id="call_x", name="read_file", arguments={"path": "p"})]
        ),
        Message(role="tool", tool_call_id="call_x", content="contents"),
    ]

    await make_llm(http_client, sleep).complete(system="s", messages=messages, tools=[READ_FILE])

    assert sent(route)["messages"] == to_openai_messages("s", messages)


async def test_invalid_tool_arguments_are_kept_raw(router, http_client, sleep) -> None:
    body = chat_body(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": '},
                }
            ],
        },
        finish_reason="tool_calls",
    )
    router.post(URL).mock(return_value=httpx.Response(200, json=body))

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")]
    )

    assert completion.tool_calls[0].arguments == {"_raw_arguments": '{"path": '}


async def test_rate_limit_with_retry_after_ms(router, http_client, sleep) -> None:
    limited = httpx.Response(
        429,
        headers={"retry-after-ms": "1500"},
        json={"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
    )
    router.post(URL).mock(side_effect=[limited, httpx.Response(200, json=chat_body({"content": "ok"}))])

    completion = await make_llm(http_client, sleep).complete(
        system="s", messages=[Message(role="user", content="x")]
    )

    assert completion.text == "ok"
    assert sleep.delays == [1.5]


async def test_server_errors_give_up_without_leaking_the_key(router, http_client, sleep) -> None:
    error = {"error": {"message": f"The server had an error (key {KEY})", "type": "server_error"}}
    route = router.post(URL).mock(return_value=httpx.Response(503, json=error))

    with pytest.raises(LLMError) as caught:
        await make_llm(http_client, sleep).complete(system="s", messages=[Message(role="user", content="x")])

    assert route.call_count == 4
    assert "openai gpt-4.1: HTTP 503: The server had an error" in caught.value.message
    assert "gave up after 4 attempts" in caught.value.message
    assert KEY not in str(caught.value)
