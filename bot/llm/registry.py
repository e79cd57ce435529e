"""Pick an `LLM` implementation by provider name."""

from __future__ import annotations

import httpx2

from bot.errors import ConfigurationError
from bot.llm.base import LLM
from bot.llm.pricing import PriceTable

PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "deepseek", "ollama", "openai-compatible")

DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "claude-sonnet-5-5",
    "openai": "gpt-4.1",
    "deepseek": "deepseek-chat",
    "ollama": "llama3.1",
}

DEFAULT_BASE_URLS: dict[str, str] = {
    "deepseek": "https://api.deepseek.com",
    "ollama": "http://localhost:11434/v1",
}


def _require(key: str | None, variable: str, provider: str) -> str:
    if not key:
        raise ConfigurationError(f"The {provider} LLM provider needs an API key: set {variable}.")
    return key


def configuration_problem(
    *,
    provider: str,
    model: str | None,
    base_url: str | None,
    anthropic_api_key: str | None,
    openai_api_key: str | None,
) -> tuple[str, bool] | None:
    """Why these settings cannot make an LLM: (message, fatal), or None when they can.

    Fatal problems are settings that can never work (refused when the server starts); a
    missing key is not fatal: plans from ```prd blocks need no model.
    """
    name = provider.strip().lower()
    if name not in PROVIDERS:
        return f"Unknown LLM provider {provider!r}; choose one of: {', '.join(PROVIDERS)}.", True
    url = base_url or DEFAULT_BASE_URLS.get(name)
    if name == "openai-compatible" and not url:
        return (
            "The openai-compatible LLM provider needs the server's URL: set PLAN_CASCADE_LLM_BASE_URL.",
            True,
        )
    if name == "openai-compatible" and not (model or DEFAULT_MODELS.get(name)):
        return "The openai-compatible LLM provider needs a model name: set PLAN_CASCADE_LLM_MODEL.", True
    if name == "anthropic" and not anthropic_api_key:
        return "The anthropic LLM provider needs an API key: set ANTHROPIC_API_KEY.", False
    if name in ("openai", "deepseek") and not openai_api_key:
        return f"The {name} LLM provider needs an API key: set OPENAI_API_KEY.", False
    return None


def create_llm(
    *,
    provider: str,
    model: str | None,
    base_url: str | None,
    anthropic_api_key: str | None,
    openai_api_key: str | None,
    timeout: float = 120.0,
    prices: PriceTable | None = None,
    http_client: httpx2.AsyncClient | None = None,
) -> LLM:
    """The `LLM` for `provider`, with its default model and base URL where none is given.

    DeepSeek and OpenAI-compatible servers take their key from `openai_api_key`
    (optional for the latter); Ollama needs none. Raises `ConfigurationError` naming the variable to set.
    """
    name = provider.strip().lower()
    problem = configuration_problem(
        provider=name,
        model=model,
        base_url=base_url,
        anthropic_api_key=anthropic_api_key,
        openai_api_key=openai_api_key,
    )
    if problem is not None:
        raise ConfigurationError(problem[0])
    chosen_model = model or DEFAULT_MODELS.get(name)
    url = base_url or DEFAULT_BASE_URLS.get(name)
    if name == "anthropic":
        from bot.llm.anthropic_provider import AnthropicLLM

        return AnthropicLLM(
            model=chosen_model or DEFAULT_MODELS["anthropic"],
            api_key=_require(anthropic_api_key, "ANTHROPIC_API_KEY", name),
            base_url=url,
            timeout=timeout,
            prices=prices,
            http_client=http_client,
        )
    if name == "ollama":
        api_key = "ollama"
    elif name == "openai-compatible":
        api_key = openai_api_key or "not-needed"  # local servers often take any key
    else:
        api_key = _require(openai_api_key, "OPENAI_API_KEY", name)
    assert chosen_model is not None
    from bot.llm.openai_provider import OpenAILLM

    return OpenAILLM(
        model=chosen_model,
        api_key=api_key,
        base_url=url,
        provider=name,
        timeout=timeout,
        prices=prices,
        http_client=http_client,
    )
