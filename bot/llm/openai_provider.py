"""`LLM` over the OpenAI Chat Completions API and servers that copy it.

The same class serves OpenAI, DeepSeek, Ollama and any OpenAI-compatible
server; `provider` only names it (in errors and for pricing).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import openai

from bot.errors import LLMError
from bot.llm.base import Completion, Message, ToolCall, ToolSpec, Usage
from bot.llm.pricing import PriceTable
from bot.llm.retry import with_retries

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def to_openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as chat messages, the system prompt first."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id is None:
                raise ValueError("a tool message needs tool_call_id")
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def openai_request(
    *,
    model: str,
    system: str,
    messages: list[Message],
    tools: list[ToolSpec] | None,
    force_tool: str | None,
    json_schema: dict[str, Any] | None,
    schema_name: str,
    max_tokens: int,
    token_param: str = "max_completion_tokens",  # noqa: S107 - a parameter name, not a secret
) -> dict[str, Any]:
    """Keyword arguments for `AsyncOpenAI.chat.completions.create` (pure).

    `token_param` is `max_completion_tokens` for OpenAI (required by reasoning
    models) and `max_tokens` for compatible servers, which often know only that.
    """
    request: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(system, messages),
        token_param: max_tokens,
    }
    if tools:
        request["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in tools
        ]
    if force_tool is not None:
        request["tool_choice"] = {"type": "function", "function": {"name": force_tool}}
    if json_schema is not None:
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": json_schema, "strict": False},
        }
    return request


def _arguments(raw: str | None) -> dict[str, Any]:
    """Decoded tool arguments; undecodable JSON is kept under `_raw_arguments` for the caller."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_raw_arguments": raw}


def usage_from_openai(raw: Any) -> Usage:
    """Our `Usage` from an SDK `CompletionUsage` (cached tokens split out of the prompt)."""
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    if cached is None:  # DeepSeek reports cache hits in its own field
        cached = (getattr(raw, "model_extra", None) or {}).get("prompt_cache_hit_tokens")
    cached = int(cached or 0)
    prompt = int(raw.prompt_tokens or 0)
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(raw.completion_tokens or 0),
        cache_read_tokens=cached,
    )


def completion_from_openai(answer: Any, *, prices: PriceTable, provider: str) -> Completion:
    """Our `Completion` from an SDK `ChatCompletion`."""
    if not answer.choices:
        raise LLMError(f"{provider} {answer.model}: the answer has no choices")
    choice = answer.choices[0]
    message = choice.message
    calls = [
        ToolCall(id=call.id, name=call.function.name, arguments=_arguments(call.function.arguments))
        for call in message.tool_calls or []
        if call.type == "function"
    ]
    usage = usage_from_openai(answer.usage)
    model = answer.model or ""
    return Completion(
        text=message.content or "",
        tool_calls=calls,
        usage=usage,
        cost_usd=prices.cost(model, usage, provider=provider),
        model=model,
        stop_reason=choice.finish_reason,
    )


class OpenAILLM:
    """Chat models through the Chat Completions API (OpenAI or compatible)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        provider: str = "openai",
        timeout: float = 120.0,
        prices: PriceTable | None = None,
        http_client: httpx2.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.model = model
        self.base_url = base_url or DEFAULT_BASE_URL
        self.provider = provider
        self._api_key = api_key
        self._prices = prices or PriceTable()
        self._sleep = sleep
        self._token_param = "max_completion_tokens" if provider == "openai" else "max_tokens"
        self._client = openai.AsyncOpenAI(
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
        request = openai_request(
            model=self.model,
            system=system,
            messages=messages,
            tools=tools,
            force_tool=force_tool,
            json_schema=json_schema,
            schema_name=schema_name,
            max_tokens=max_tokens,
            token_param=self._token_param,
        )
        answer = await with_retries(
            lambda: self._client.chat.completions.create(**request),
            sleep=self._sleep,
            label=f"{self.provider} {self.model}",
            secrets=[self._api_key],
        )
        return completion_from_openai(answer, prices=self._prices, provider=self.provider)

    async def aclose(self) -> None:
        """Close the SDK client (and the HTTP client it owns)."""
        await self._client.close()
