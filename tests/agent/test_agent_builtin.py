"""The built-in ReAct agent driven by the shared ScriptedLLM: tool results, limits, transcript."""

from __future__ import annotations

from pathlib import Path

from bot.agent import TOOL_SPECS, BuiltinAgent, load_transcript
from bot.agent.builtin import NUDGE, SYSTEM_PROMPT
from bot.llm import Completion, Message, ScriptedLLM, Usage, tool_reply
from tests.agent.agent_builders import MakeTask


class StepClock:
    """A clock that advances `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def costly(completion: Completion, *, cost: float, tokens: int = 10) -> Completion:
    return completion.model_copy(
        update={"cost_usd": cost, "usage": Usage(input_tokens=tokens, output_tokens=tokens), "model": "m-1"}
    )


async def test_writes_a_file_through_tools_then_finishes(make_task: MakeTask, worktree: Path) -> None:
    llm = ScriptedLLM(
        [
            tool_reply(
                "write", {"path": "src/greeting.py", "content": "GREETING = 'v2'\n"}, call_id="call_w"
            ),
            tool_reply("finish", {"summary": "Added src/greeting.py."}, call_id="call_f"),
        ]
    )
    task = make_task()
    result = await BuiltinAgent(llm).run(task)

    assert result.status == "finished"
    assert result.summary == "Added src/greeting.py."
    assert result.reason is None and result.iterations == 2 and result.agent == "builtin"
    assert (worktree / "src" / "greeting.py").read_text() == "GREETING = 'v2'\n"

    records = load_transcript(task.transcript_path)
    assert [r["type"] for r in records][:2] == ["task", "message"]
    assert records[-1]["type"] == "result" and records[-1]["status"] == "finished"
    tool_records = [r for r in records if r.get("role") == "tool"]
    assert [(r["tool_call_id"], r["content"]) for r in tool_records] == [
        ("call_w", "created src/greeting.py (1 line)")
    ]
    assistant = [r for r in records if r.get("role") == "assistant"]
    assert [r["tool_calls"][0]["name"] for r in assistant] == ["write", "finish"]
    assert sum(1 for r in records if r["type"] == "usage") == 2


async def test_the_model_gets_each_tool_result_with_its_call_id(make_task: MakeTask) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("read", {"path": "README.md"}, call_id="call_r"),
            tool_reply("finish", {"summary": "read it"}, call_id="call_f"),
        ]
    )
    await BuiltinAgent(llm).run(make_task(prompt="Read the README."))

    first, second = llm.calls
    assert first["system"] == SYSTEM_PROMPT == second["system"]
    assert first["tools"] == TOOL_SPECS and first["cache_prefix"] is True
    assert first["messages"] == [Message(role="user", content="Read the README.")]
    user, assistant, tool = second["messages"]
    assert user == first["messages"][0]
    assert assistant.role == "assistant" and assistant.tool_calls[0].id == "call_r"
    assert tool == Message(role="tool", content="     1\thello", tool_call_id="call_r")


async def test_a_reply_without_tool_calls_gets_a_nudge(make_task: MakeTask) -> None:
    llm = ScriptedLLM(["I think I am done.", tool_reply("finish", {"summary": "done"})])
    result = await BuiltinAgent(llm).run(make_task())
    assert result.status == "finished" and result.iterations == 2
    assert llm.calls[1]["messages"][-1] == Message(role="user", content=NUDGE)


async def test_the_retry_feedback_reaches_the_first_message(make_task: MakeTask) -> None:
    llm = ScriptedLLM([tool_reply("finish", {"summary": "fixed"})])
    task = make_task(phase="retry", feedback="FAILED tests/test_app.py::test_main - AssertionError")
    await BuiltinAgent(llm).run(task)
    first = llm.calls[0]["messages"][0].content
    assert first.startswith(task.prompt)
    assert "## Gate output" in first and "FAILED tests/test_app.py::test_main" in first


async def test_iteration_limit_stops_the_loop(make_task: MakeTask) -> None:
    llm = ScriptedLLM([tool_reply("read", {"path": "README.md"}) for _ in range(5)])
    task = make_task(limits={"max_iterations": 3})
    result = await BuiltinAgent(llm).run(task)
    assert result.status == "limits_exceeded"
    assert result.reason == "iteration limit reached: 3 model calls of 3"
    assert result.iterations == 3 and len(llm.calls) == 3
    assert load_transcript(task.transcript_path)[-1]["status"] == "limits_exceeded"


async def test_cost_limit_stops_the_loop_with_the_numbers(make_task: MakeTask) -> None:
    replies = [costly(tool_reply("read", {"path": "README.md"}), cost=0.6) for _ in range(4)]
    llm = ScriptedLLM(replies)
    result = await BuiltinAgent(llm).run(make_task(limits={"max_cost_usd": 1.0}))
    assert result.status == "limits_exceeded"
    assert result.reason == "cost limit reached: $1.2000 spent of $1.00"
    assert result.cost_usd == 1.2 and result.iterations == 2 and result.model == "m-1"
    assert result.usage == Usage(input_tokens=20, output_tokens=20)


async def test_token_limit_counts_input_and_output(make_task: MakeTask) -> None:
    replies = [costly(tool_reply("read", {"path": "README.md"}), cost=0.0, tokens=30) for _ in range(4)]
    result = await BuiltinAgent(ScriptedLLM(replies)).run(make_task(limits={"max_tokens": 100}))
    assert result.status == "limits_exceeded"
    assert result.reason == "token limit reached: 120 tokens used of 100"


async def test_wall_time_limit_uses_the_injected_clock(make_task: MakeTask) -> None:
    llm = ScriptedLLM([tool_reply("read", {"path": "README.md"}) for _ in range(10)])
    agent = BuiltinAgent(llm, clock=StepClock(10.0))
    result = await agent.run(make_task(limits={"max_wall_seconds": 60}))
    assert result.status == "limits_exceeded"
    assert result.reason is not None and result.reason.startswith("time limit reached:")
    assert 0 < result.iterations < 10


async def test_a_failing_model_fails_the_run_and_keeps_the_transcript(make_task: MakeTask) -> None:
    llm = ScriptedLLM([tool_reply("read", {"path": "README.md"})])  # then runs out
    task = make_task()
    result = await BuiltinAgent(llm).run(task)
    assert result.status == "failed"
    assert result.reason is not None and result.reason.startswith("the model call failed: ScriptedLLM")
    records = load_transcript(task.transcript_path)
    assert any(r.get("role") == "tool" for r in records) and records[-1]["status"] == "failed"
