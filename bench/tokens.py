"""How much of the builtin agent's input is read from the prompt cache (issue #13's token costs).

    .venv/bin/python bench/tokens.py [--steps 30]

Runs the real builtin agent for a scripted session of STEPS tool calls (reading and listing
files of a small repository) through the real Anthropic and OpenAI provider classes, against
emulated APIs that account caching as the providers document it (`bot/testing/fake_llm.py`:
explicit breakpoints for Anthropic, automatic prefix caching for OpenAI). Prints, per
provider, the share of input tokens read from the cache (target: at least 80 %) and the
session's cost with caching and as it would be with every input token at the full price.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agent import AgentTask  # noqa: E402
from bot.agent.builtin import BuiltinAgent  # noqa: E402
from bot.config.repo import AgentLimits  # noqa: E402
from bot.llm import AnthropicLLM, OpenAILLM, Usage  # noqa: E402
from bot.llm.pricing import PriceTable  # noqa: E402
from bot.sandbox.confinement import Sandbox  # noqa: E402
from bot.testing.fake_llm import FakeAnthropic, FakeOpenAI  # noqa: E402
from tests.plan.plan_builders import build_prd, build_story  # noqa: E402

FILES = {
    f"src/module_{n}.py": "".join(f"def f{n}_{k}(x):\n    return x * {k}\n\n" for k in range(40))
    for n in range(6)
}


def repository(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def script(steps: int) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    names = list(FILES)
    calls: list[tuple[str, dict]] = []  # type: ignore[type-arg]
    for n in range(steps - 1):
        if n % 3 == 2:
            calls.append(("glob", {"pattern": "**/*.py"}))
        else:
            calls.append(("read", {"path": names[n % len(names)]}))
    return calls


async def session(provider: str, steps: int, tmp: Path) -> tuple[Usage, float, str]:
    root = repository(tmp / provider / "repo")
    home = tmp / provider / "home"
    home.mkdir()
    story = build_story(1, title="Read the code")
    task = AgentTask(
        story=story,
        prd=build_prd(story),
        phase="implementation",
        worktree=root,
        home=home,
        prompt="Read every module, then summarise what the functions do.",
        limits=AgentLimits(max_iterations=steps + 5),
        transcript_path=tmp / provider / "transcript.jsonl",
        sandbox=Sandbox(mode="auto"),
    )
    if provider == "anthropic":
        api = FakeAnthropic(script(steps))
        client = httpx2.AsyncClient(transport=api.transport())
        llm = AnthropicLLM(
            model="claude-sonnet-5-5", api_key="sk-ant-bench-key-0000000000", http_client=client
        )
    else:
        api = FakeOpenAI(script(steps))  # type: ignore[assignment]
        client = httpx2.AsyncClient(transport=api.transport())
        llm = OpenAILLM(model="gpt-4.1", api_key="sk-bench-key-0000000000", http_client=client)  # type: ignore[assignment]
    result = await BuiltinAgent(llm).run(task)
    assert result.status == "finished", result.reason
    await client.aclose()
    return result.usage, result.cost_usd, llm.model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    prices = PriceTable()
    columns = f"{'provider':10} {'steps':>5} {'input':>9} {'cached':>9} {'share':>6}"
    print(columns + f" {'cost':>8} {'uncached':>9}  ≥80 %")
    with tempfile.TemporaryDirectory() as tmp:
        for provider in ("anthropic", "openai"):
            usage, cost, model = asyncio.run(session(provider, args.steps, Path(tmp)))
            total = usage.total_input_tokens
            share = usage.cache_read_tokens / total if total else 0.0
            flat = Usage(input_tokens=total, output_tokens=usage.output_tokens)
            uncached = prices.cost(model, flat, provider=provider)
            print(
                f"{provider:10} {args.steps:>5} {total:>9,} {usage.cache_read_tokens:>9,} {share:>6.0%} "
                f"${cost:>7.4f} ${uncached:>8.4f}  {'yes' if share >= 0.8 else 'NO'}"
            )


if __name__ == "__main__":
    main()
