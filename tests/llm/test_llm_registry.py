"""create_llm: provider names, defaults and configuration errors."""

from __future__ import annotations

import pytest

from bot.errors import ConfigurationError
from bot.llm import PROVIDERS, AnthropicLLM, OpenAILLM, create_llm


def make(provider: str, **kwargs):
    arguments = {"model": None, "base_url": None, "anthropic_api_key": None, "openai_api_key": None}
    return create_llm(provider=provider, **{**arguments, **kwargs})


def test_anthropic_default_model() -> None:
    llm = make("anthropic", anthropic_api_key="sk-ant-x")

    assert isinstance(llm, AnthropicLLM)
    assert (llm.provider, llm.model) == ("anthropic", "claude-sonnet-5-5")


@pytest.mark.parametrize(
    ("provider", "model", "base_url"),
    [
        ("openai", "gpt-4.1", "https://api.openai.com/v1"),
        ("deepseek", "deepseek-chat", "https://api.deepseek.com"),
        ("ollama", "llama3.1", "http://localhost:11434/v1"),
    ],
)
def test_openai_family_defaults(provider: str, model: str, base_url: str) -> None:
    llm = make(provider, openai_api_key="sk-x")

    assert isinstance(llm, OpenAILLM)
    assert (llm.provider, llm.model) == (provider, model)
    assert llm.base_url == base_url


def test_explicit_model_and_base_url_win() -> None:
    llm = make("openai-compatible", model="qwen2.5-coder", base_url="http://vllm:8000/v1")

    assert (llm.provider, llm.model) == ("openai-compatible", "qwen2.5-coder")
    assert llm.base_url == "http://vllm:8000/v1"


def test_ollama_needs_no_key() -> None:
    assert make("ollama").provider == "ollama"


@pytest.mark.parametrize(
    ("provider", "variable"),
    [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"), ("deepseek", "OPENAI_API_KEY")],
)
def test_missing_key_names_the_variable(provider: str, variable: str) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        make(provider)


def test_anthropic_does_not_take_the_openai_key() -> None:
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        make("anthropic", openai_api_key="sk-x")


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_LLM_BASE_URL"):
        make("openai-compatible", model="m", openai_api_key="k")


def test_unknown_provider_lists_the_valid_names() -> None:
    with pytest.raises(ConfigurationError) as caught:
        make("gemini")

    for name in PROVIDERS:
        assert name in caught.value.message
    assert "'gemini'" in caught.value.message
