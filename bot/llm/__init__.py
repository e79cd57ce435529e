"""The LLM port: a tiny `LLM` protocol, its providers, pricing, retries and structured output."""

from bot.llm.anthropic_provider import AnthropicLLM
from bot.llm.base import LLM, Completion, Message, ToolCall, ToolSpec, Usage
from bot.llm.openai_provider import OpenAILLM
from bot.llm.pricing import Price, PriceTable
from bot.llm.registry import PROVIDERS, create_llm
from bot.llm.retry import with_retries
from bot.llm.scripted import ScriptedLLM, tool_reply
from bot.llm.structured import StructuredResult, complete_structured, extract_json

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
