"""The ScriptedLLM fake."""

from __future__ import annotations

import pytest

from bot.errors import LLMError
from bot.llm import LLM, Completion, Message, ScriptedLLM, ToolSpec, tool_reply


async def test_replays_in_order_and_records_calls() -> None:
    def echo(messages: list[Message]) -> Completion:
        return Completion(text=f"you said {messages[-1].content}")

    tool = ToolSpec(name="read_file", description="d", input_schema={"type": "object"})
    llm = ScriptedLLM(["first", tool_reply("read_file", {"path": "a"}, call_id="call_1"), echo])
    msgs = [Message(role="user", content="hello")]

    first = await llm.complete(system="sys", messages=msgs, tools=[tool])
    second = await llm.complete(system="sys", messages=msgs, json_schema={"type": "object"})
    third = await llm.complete(system="sys", messages=msgs)

    assert first.text == "first"
    assert first.usage.input_tokens == 2  # "syshello" is 8 characters
    assert first.usage.output_tokens == 2
    assert second.tool_calls[0].name == "read_file"
    assert second.tool_calls[0].arguments == {"path": "a"}
    assert second.tool_calls[0].id == "call_1"
    assert third.text == "you said hello"
    assert [c["tools"] for c in llm.calls] == [[tool], [], []]
    assert llm.calls[1]["json_schema"] == {"type": "object"}
    assert llm.calls[0]["system"] == "sys"
    assert llm.remaining == 0


async def test_exhausted_script_raises() -> None:
    llm = ScriptedLLM(["only"])
    await llm.complete(system="s", messages=[])

    with pytest.raises(LLMError, match="no reply left for call 2"):
        await llm.complete(system="s", messages=[])


async def test_recorded_messages_are_copies() -> None:
    llm = ScriptedLLM(["a"])
    msgs = [Message(role="user", content="before")]
    await llm.complete(system="s", messages=msgs)

    msgs[0].content = "after"

    assert llm.calls[0]["messages"][0].content == "before"


def test_satisfies_the_protocol() -> None:
    assert isinstance(ScriptedLLM([]), LLM)


def test_tool_reply_ids_are_unique() -> None:
    assert tool_reply("x", {}).tool_calls[0].id != tool_reply("x", {}).tool_calls[0].id
