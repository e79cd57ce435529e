"""The builtin agent's growing conversation is read from the prompt cache (issue #13's token costs).

The real agent loop and the real provider classes talk HTTP to emulated APIs that account
caching the way Anthropic (explicit breakpoints) and OpenAI (automatic prefix) document it.
"""

from __future__ import annotations

import json

import httpx2

from bot.agent.builtin import BuiltinAgent
from bot.llm import AnthropicLLM, OpenAILLM
from bot.testing.fake_llm import FakeAnthropic, FakeOpenAI
from tests.agent.agent_builders import MakeTask

STEPS = [
    ("read", {"path": "src/app.py"}),
    ("glob", {"pattern": "**/*.py"}),
    ("read", {"path": "README.md"}),
] * 4


def breakpoints(request: dict) -> list[str]:
    places = [f"tool:{t['name']}" for t in request.get("tools", []) if "cache_control" in t]
    system = request.get("system")
    if isinstance(system, list):
        places += ["system" for block in system if "cache_control" in block]
    for n, turn in enumerate(request["messages"]):
        if isinstance(turn["content"], list):
            for k, block in enumerate(turn["content"]):
                if "cache_control" in block:
                    places.append(f"message:{n}:{k}")
    return places


async def test_anthropic_requests_put_a_breakpoint_on_the_newest_message(make_task: MakeTask) -> None:
    api = FakeAnthropic(STEPS)
    llm = AnthropicLLM(
        model="claude-sonnet-5-5",
        api_key="sk-ant-test-key-1234567890",
        http_client=httpx2.AsyncClient(transport=api.transport()),
    )
    result = await BuiltinAgent(llm).run(make_task())
    assert result.status == "finished" and len(api.requests) == len(STEPS) + 1
    for request in api.requests:
        places = breakpoints(request)
        last_turn = len(request["messages"]) - 1
        last_block = len(request["messages"][-1]["content"]) - 1
        assert places == ["tool:finish", "system", f"message:{last_turn}:{last_block}"], places
    # After the first two turns, almost all input comes back from the cache.
    usage = result.usage
    assert usage.cache_read_tokens / usage.total_input_tokens > 0.6


async def test_openai_requests_keep_a_byte_identical_prefix(make_task: MakeTask) -> None:
    api = FakeOpenAI(STEPS)
    llm = OpenAILLM(
        model="gpt-4.1",
        api_key="sk-test-key-1234567890",
        http_client=httpx2.AsyncClient(transport=api.transport()),
    )
    result = await BuiltinAgent(llm).run(make_task())
    assert result.status == "finished"
    for before, after in zip(api.requests, api.requests[1:], strict=False):
        assert json.dumps(after["tools"]) == json.dumps(before["tools"])
        shared = after["messages"][: len(before["messages"])]
        assert json.dumps(shared) == json.dumps(before["messages"])
