"""`LLM` over the Anthropic Messages API (SDK `anthropic`, which speaks httpx2).

Structured output is a forced tool named `schema_name` whose input schema is the
requested schema; the tool's input comes back as `Completion.text` (JSON).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import httpx2

from bot.llm.base import Completion, Message, ToolCall, ToolSpec, Usage
from bot.llm.pricing import PriceTable
from bot.llm.retry import with_retries

DEFAULT_BASE_URL = "https://api.anthropic.com"
_EPHEMERAL = {"type": "ephemeral"}


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Anthropic turns.

    Assistant tool calls become `tool_use` blocks; tool results become
    `tool_result` blocks of a user turn. Consecutive turns of the same role are
    merged, so several tool results (and a user note after them) form one turn.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks_of(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks_of(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ValueError("a tool message needs tool_call_id")
        return "user", [
            {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        )
    return message.role, blocks


def anthropic_request(
    *,
    model: str,
    system: str,
    messages: list[Message],
    tools: list[ToolSpec] | None,
    force_tool: str | None,
    json_schema: dict[str, Any] | None,
    schema_name: str,
    max_tokens: int,
    cache_prefix: bool,
    cache_conversation: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for `AsyncAnthropic.messages.create` (pure).

    Cache breakpoints (at most 4 are allowed): the system prompt and the last tool with
    `cache_prefix`, and the newest message's last block with `cache_conversation` (each
    turn moves it forward, so the previous turn's prefix is read back from the cache).
    """
    if json_schema is not None and force_tool is not None:
        raise ValueError("use either json_schema or force_tool, not both")
    turns = to_anthropic_messages(messages)
    if cache_conversation and turns:
        last = turns[-1]["content"][-1]
        turns[-1]["content"][-1] = {**last, "cache_control": _EPHEMERAL}
    request: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": turns,
    }
    if system:
        if cache_prefix:
            request["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
        else:
            request["system"] = system
    tool_params = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools or []
    ]
    if json_schema is not None:
        tool_params.append(
            {
                "name": schema_name,
                "description": f"Return the {schema_name} as arguments of this tool.",
                "input_schema": json_schema,
            }
        )
        force_tool = schema_name
    if tool_params:
        if cache_prefix:
            tool_params[-1]["cache_control"] = _EPHEMERAL
        request["tools"] = tool_params
    if force_tool is not None:
        request["tool_choice"] = {"type": "tool", "name": force_tool}
    return request


def completion_from_anthropic(
    message: Any, *, json_tool: str | None, prices: PriceTable, provider: str = "anthropic"
) -> Completion:
    """Our `Completion` from an SDK `Message`. With `json_tool`, that tool's input is the text."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    structured: str | None = None
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {"input": block.input}
            if json_tool is not None and block.name == json_tool and structured is None:
                structured = json.dumps(arguments, ensure_ascii=False)
            else:
                calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
    raw = message.usage
    usage = Usage(
        input_tokens=raw.input_tokens or 0,
        output_tokens=raw.output_tokens or 0,
        cache_read_tokens=raw.cache_read_input_tokens or 0,
        cache_write_tokens=raw.cache_creation_input_tokens or 0,
    )
    model = message.model or ""
    return Completion(
        text=structured if structured is not None else "".join(texts),
        tool_calls=calls,
        usage=usage,
        cost_usd=prices.cost(model, usage, provider=provider),
        model=model,
        stop_reason=message.stop_reason,
    )


class AnthropicLLM:
    """Claude models through the Messages API."""

    provider = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120.0,
        prices: PriceTable | None = None,
        http_client: httpx2.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.model = model
        self.base_url = base_url or DEFAULT_BASE_URL
        self._api_key = api_key
        self._prices = prices or PriceTable()
        self._sleep = sleep
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=self.base_url,
            timeout=timeout,
            max_retries=0,
            http_client=http_client,
        )

    async def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        force_tool: str | None = None,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "result",
        max_tokens: int = 4096,
        cache_prefix: bool = False,
        cache_conversation: bool = False,
    ) -> Completion:
        request = anthropic_request(
            model=self.model,
            system=system,
            messages=messages,
            tools=tools,
            force_tool=force_tool,
            json_schema=json_schema,
            schema_name=schema_name,
            max_tokens=max_tokens,
            cache_prefix=cache_prefix,
            cache_conversation=cache_conversation,
        )
        answer = await with_retries(
            lambda: self._client.messages.create(**request),
            sleep=self._sleep,
            label=f"anthropic {self.model}",
            secrets=[self._api_key],
        )
        json_tool = schema_name if json_schema is not None else None
        return completion_from_anthropic(answer, json_tool=json_tool, prices=self._prices)

    async def aclose(self) -> None:
        """Close the SDK client (and the HTTP client it owns)."""
        await self._client.close()
