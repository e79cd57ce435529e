"""The LLM port: a tiny `LLM` protocol, its providers, pricing, retries and structured output.

The providers load their SDK on first use: the Anthropic SDK alone is ~3,000 modules and
tens of MB that a server which never plans with it should not carry.
"""

from typing import TYPE_CHECKING, Any

from bot.llm.base import LLM, Completion, Message, ToolCall, ToolSpec, Usage
from bot.llm.pricing import Price, PriceTable
from bot.llm.registry import PROVIDERS, create_llm
from bot.llm.retry import with_retries
from bot.llm.scripted import ScriptedLLM, tool_reply
from bot.llm.structured import StructuredResult, complete_structured, extract_json

if TYPE_CHECKING:
    from bot.llm.anthropic_provider import AnthropicLLM
    from bot.llm.openai_provider import OpenAILLM


def __getattr__(name: str) -> Any:
    if name == "AnthropicLLM":
        from bot.llm.anthropic_provider import AnthropicLLM

        return AnthropicLLM
    if name == "OpenAILLM":
        from bot.llm.openai_provider import OpenAILLM

        return OpenAILLM
    raise AttributeError(name)


__all__ = [
    "LLM",
    "PROVIDERS",
    "AnthropicLLM",
    "Completion",
    "Message",
    "OpenAILLM",
    "Price",
    "PriceTable",
    "ScriptedLLM",
    "StructuredResult",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "complete_structured",
    "create_llm",
    "extract_json",
    "tool_reply",
    "with_retries",
]
