"""A scripted `LLM` that replays given replies: the shared fake for tests and dry runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from bot.errors import LLMError
from bot.llm.base import Completion, Message, ToolCall, ToolSpec, Usage

Reply = Completion | str | Callable[[list[Message]], Completion]


def _tokens(text: str) -> int:
    """A rough token count (4 characters a token), at least 1 for non-empty text."""
    return (len(text) + 3) // 4


def tool_reply(
    name: str, arguments: dict[str, Any], *, text: str = "", call_id: str | None = None
) -> Completion:
    """A completion that calls tool `name` with `arguments`."""
    call = ToolCall(id=call_id or f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)
    return Completion(text=text, tool_calls=[call], model="scripted", stop_reason="tool_use")


class ScriptedLLM:
    """Replays `replies` in order and records every call in `calls`.

    A `str` reply becomes a text completion whose usage is estimated from the
    lengths of the prompt and the reply; a callable gets the messages and returns
    the completion. Raises `LLMError` when the script runs out. With `respond`, every
    call is answered by `respond(call)` instead (the recorded call: `system`, `messages`,
    `schema_name`, …), however many come: a model that answers by what it is asked.
    """

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        respond: Callable[[dict[str, Any]], Completion | str] | None = None,
        model: str = "scripted",
        provider: str = "scripted",
    ) -> None:
        self.model = model
        self.provider = provider
        self.replies: list[Reply] = list(replies)
        self.respond = respond
        self.calls: list[dict[str, Any]] = []

    def prompts(self) -> list[str]:
        """The messages of every call so far, one string a call."""
        return ["\n".join(m.content for m in call["messages"]) for call in self.calls]

    @property
    def remaining(self) -> int:
        """How many replies are left."""
        return len(self.replies) - len(self.calls)

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
        index = len(self.calls)
        self.calls.append(
            {
                "system": system,
                "messages": [m.model_copy(deep=True) for m in messages],
                "tools": list(tools or []),
                "force_tool": force_tool,
                "json_schema": json_schema,
                "schema_name": schema_name,
                "max_tokens": max_tokens,
                "cache_prefix": cache_prefix,
                "cache_conversation": cache_conversation,
            }
        )
        if self.respond is not None:
            reply: Reply = self.respond(self.calls[-1])
        elif index >= len(self.replies):
            raise LLMError(
                f"ScriptedLLM has no reply left for call {index + 1} ({len(self.replies)} scripted)"
            )
        else:
            reply = self.replies[index]
        if isinstance(reply, Completion):
            return reply
        if isinstance(reply, str):
            prompt = system + "".join(m.content for m in messages)
            usage = Usage(input_tokens=_tokens(prompt), output_tokens=_tokens(reply))
            return Completion(text=reply, usage=usage, model=self.model, stop_reason="end_turn")
        return reply(list(messages))
