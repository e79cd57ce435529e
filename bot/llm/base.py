"""The `LLM` port: a tiny protocol and the provider-neutral models it speaks.

Every provider turns our `Message` list into its own wire format and its answer
back into a `Completion`. Structured output is always read from `Completion.text`
(a JSON string), whatever mechanism the provider uses to produce it.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class ToolSpec(BaseModel):
    """A tool the model may call."""

    name: str = Field(description="Tool name the model uses to call it.")
    description: str = Field(description="What the tool does, written for the model.")
    input_schema: dict[str, Any] = Field(description="JSON schema (type object) of the tool's arguments.")


class ToolCall(BaseModel):
    """One tool call requested by the model."""

    id: str = Field(description="Provider id of the call; the tool result must echo it.")
    name: str = Field(description="Name of the tool to call.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Decoded JSON arguments.")


class Message(BaseModel):
    """One turn of the conversation (the system prompt is passed separately)."""

    role: Literal["user", "assistant", "tool"] = Field(description="Who speaks: user, assistant or a tool.")
    content: str = Field(default="", description="Text of the turn; for a tool turn, the tool's output.")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="Tool calls made by an assistant turn."
    )
    tool_call_id: str | None = Field(default=None, description="Tool turn: id of the call answered.")


class Usage(BaseModel):
    """Token counts of one or more calls."""

    input_tokens: int = Field(default=0, description="Input tokens billed at the full rate (no cache hit).")
    output_tokens: int = Field(default=0, description="Output tokens, reasoning included.")
    cache_read_tokens: int = Field(default=0, description="Input tokens read from the prompt cache.")
    cache_write_tokens: int = Field(default=0, description="Input tokens written to the prompt cache.")

    @property
    def total_input_tokens(self) -> int:
        """All input tokens, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


class Completion(BaseModel):
    """The model's answer to one call."""

    text: str = Field(default="", description="Answer text; with json_schema, the JSON document.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Tool calls the model requested.")
    usage: Usage = Field(default_factory=Usage, description="Tokens used by this call.")
    cost_usd: float = Field(default=0.0, description="Estimated cost in US dollars (0 when unknown).")
    model: str = Field(default="", description="Model that answered, as reported by the provider.")
    stop_reason: str | None = Field(default=None, description="Provider's stop/finish reason.")


@runtime_checkable
class LLM(Protocol):
    """A chat model behind one provider."""

    model: str
    provider: str

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
        """Answer `messages`.

        `force_tool` makes the model call that tool. `json_schema` asks for one JSON
        document matching the schema, returned in `Completion.text`. `cache_prefix`
        marks the system prompt and tools as cacheable where the provider supports it;
        `cache_conversation` also marks the newest message, so a loop that resends a growing
        conversation reads everything but the last turn from the cache. Providers that
        cache automatically (OpenAI-compatible) rely on the request prefix staying identical.
        """
        ...
