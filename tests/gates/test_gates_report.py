"""Check-run names, titles, outputs within GitHub's limits, annotation batches, retry feedback."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.gates.annotations import Annotation
from bot.gates.report import (
    ANNOTATIONS_PER_REQUEST,
    MAX_ANNOTATIONS,
    SUMMARY_LIMIT,
    TEXT_LIMIT,
    GateResult,
    annotation_batches,
    check_output,
    check_run_name,
    conclusion,
    failure_feedback,
    fenced_tail,
)


def result(**overrides: object) -> GateResult:
    fields: dict[str, object] = {
        "name": "test",
        "command": "python -m pytest -q",
        "exit_code": 0,
        "timed_out": False,
        "output": "3 passed in 0.12s\n",
        "duration_s": 3.24,
        "attempt": 1,
    }
    fields.update(overrides)
    return GateResult.model_validate(fields)


def annotation(index: int) -> Annotation:
    line = index + 1
    return Annotation(
        path=f"src/m{index}.py", start_line=line, end_line=line, annotation_level="failure", message="x"
    )


def fence_of(block: str) -> str:
    """The opening fence of the code block in `block`, asserting it is closed by the same fence."""
    lines = block.splitlines()
    opening = next(line for line in lines if re.fullmatch(r"(`{3,}|~{3,})", line))
    assert lines[-1] == opening
    return opening


def inside(block: str) -> str:
    fence = fence_of(block)
    return block.split(fence + "\n", 1)[1].rsplit("\n" + fence, 1)[0]


def test_passed_and_conclusion() -> None:
    assert result().passed
    assert conclusion(result()) == "success"
    assert conclusion(result(exit_code=2)) == "failure"
    assert conclusion(result(exit_code=None)) == "failure"
    timed_out = result(exit_code=None, timed_out=True)
    assert not timed_out.passed
    assert conclusion(timed_out) == "timed_out"
    assert conclusion(result(exit_code=0, timed_out=True)) == "timed_out"


def test_check_run_name() -> None:
    assert check_run_name("STORY-001", "test") == "plan-cascade / STORY-001 / test"
    assert check_run_name("batch-2", "lint") == "plan-cascade / batch-2 / lint"


def test_titles() -> None:
    assert check_output(result())["title"] == "test passed in 3.2 s"
    assert check_output(result(exit_code=2, attempt=2))["title"] == "test failed (exit 2) on attempt 2"
    assert check_output(result(exit_code=1))["title"] == "test failed (exit 1)"
    timed_out = result(exit_code=None, timed_out=True, duration_s=900.4)
    assert check_output(timed_out)["title"] == "test timed out after 900 s"


def test_summary_lists_the_facts_and_whole_short_output() -> None:
    output = check_output(
        result(exit_code=2, attempt=2, output="FAILED tests/test_a.py::test_eq\n"),
        story_title="Add the\nexport button",
        annotations=[annotation(0), annotation(1)],
    )
    summary = output["summary"]
    assert "**Story:** Add the export button" in summary
    assert "`python -m pytest -q`" in summary
    assert "**Exit code:** 2" in summary
    assert "**Duration:** 3.2 s" in summary
    assert "**Attempt:** 2" in summary
    assert "**Annotations:** 2" in summary
    assert inside(summary) == "FAILED tests/test_a.py::test_eq"
    assert "trimmed" not in summary
    assert inside(output["text"]) == "FAILED tests/test_a.py::test_eq"


def test_many_annotations_are_said_to_be_capped() -> None:
    many = [annotation(i) for i in range(MAX_ANNOTATIONS + 1)]
    summary = check_output(result(exit_code=1), annotations=many)["summary"]
    assert f"**Annotations:** {MAX_ANNOTATIONS + 1} (the first {MAX_ANNOTATIONS} are shown)" in summary
    assert sum(map(len, annotation_batches(many))) == MAX_ANNOTATIONS


def test_no_output() -> None:
    assert "(no output)" in check_output(result(output=""))["summary"]


def test_ansi_colours_are_removed() -> None:
    output = check_output(result(output="\x1b[31mFAILED\x1b[0m tests/test_a.py\n"))
    assert inside(output["summary"]) == "FAILED tests/test_a.py"


def test_huge_output_keeps_the_tail_within_limits() -> None:
    lines = [f"line {i:06d} " + "x" * 90 for i in range(2000)]
    big = "\n".join(lines) + "\n"
    assert len(big) > 200_000
    output = check_output(result(exit_code=1, output=big))
    assert len(output["summary"]) <= SUMMARY_LIMIT
    assert len(output["text"]) <= TEXT_LIMIT
    assert len(output["text"]) > TEXT_LIMIT - 200
    for field in ("summary", "text"):
        shown = inside(output[field])
        assert shown.endswith(lines[-1])
        assert shown.startswith("line ")
        assert f"(output trimmed to the last {len(shown)} characters)" in output[field]
    assert len(inside(output["text"])) > len(inside(output["summary"]))


def test_backtick_runs_cannot_close_the_fence() -> None:
    noisy = "".join(f"{'`' * (i % 40 + 1)} code {i}\n" for i in range(6000))
    output = check_output(result(exit_code=1, output=noisy))
    for field, limit in (("summary", SUMMARY_LIMIT), ("text", TEXT_LIMIT)):
        block = output[field]
        assert len(block) <= limit
        fence = fence_of(block)
        longest = max(len(run) for run in re.findall("`+", inside(block)))
        assert not fence.startswith("`") or len(fence) > longest


def test_output_of_only_backticks_falls_back_to_tildes() -> None:
    block = fenced_tail("`" * 200_000, budget=SUMMARY_LIMIT)
    assert len(block) <= SUMMARY_LIMIT
    assert fence_of(block) == "~~~"


def test_output_with_huge_runs_of_both_fence_characters() -> None:
    block = fenced_tail("`" * 70_000 + "\n" + "~" * 70_000, budget=TEXT_LIMIT)
    assert len(block) <= TEXT_LIMIT
    assert fence_of(block) == "```"
    assert "``" not in inside(block)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="`~ab\n", max_size=400), budget=st.integers(min_value=0, max_value=300))
def test_fenced_tail_never_exceeds_its_budget(text: str, budget: int) -> None:
    block = fenced_tail(text, budget=budget)
    assert len(block) <= budget
    if block and block != "(no output)":
        fence = fence_of(block)
        runs = re.findall(re.escape(fence[0]) + "+", inside(block))
        assert all(len(run) < len(fence) for run in runs)


def test_command_with_backticks_stays_inline_code() -> None:
    summary = check_output(result(command="echo `date` && make test"))["summary"]
    assert "``echo `date` && make test``" in summary


def test_annotation_batches_of_fifty() -> None:
    batches = annotation_batches([annotation(i) for i in range(120)])
    assert [len(batch) for batch in batches] == [50, 50, 20]
    assert ANNOTATIONS_PER_REQUEST == 50
    assert batches[0][0] == annotation(0).as_github()
    assert batches[2][-1]["path"] == "src/m119.py"


def test_annotation_batches_edges() -> None:
    assert annotation_batches([]) == []
    assert [len(b) for b in annotation_batches([annotation(i) for i in range(50)])] == [50]
    assert [len(b) for b in annotation_batches([annotation(i) for i in range(120)], limit=60)] == [50, 10]


def test_failure_feedback_lists_only_failed_gates() -> None:
    results = [
        result(name="typecheck", command="mypy .", output="Success: no issues found\n"),
        result(exit_code=1, output="FAILED tests/test_a.py::test_eq - assert 1 == 2\n"),
        result(name="lint", command="ruff check .", exit_code=None, timed_out=True, duration_s=300),
    ]
    text = failure_feedback(results)
    assert text.startswith("2 quality gate(s) failed.")
    assert "### Gate `test` failed (exit 1)" in text
    assert "Command: `python -m pytest -q`" in text
    assert "FAILED tests/test_a.py::test_eq - assert 1 == 2" in text
    assert "### Gate `lint` timed out after 300 s" in text
    assert "typecheck" not in text


def test_failure_feedback_is_empty_when_all_passed() -> None:
    assert failure_feedback([result(), result(name="lint")]) == ""


def test_failure_feedback_shares_room_and_keeps_tails() -> None:
    long_output = "".join(f"error {i}\n" for i in range(20000)) + "the last line\n"
    results = [
        result(name="typecheck", exit_code=1, output="src/a.py:1: error: bad  [misc]\n"),
        result(exit_code=1, output=long_output),
        result(name="lint", exit_code=1, output=long_output),
    ]
    text = failure_feedback(results, limit_chars=6000)
    assert len(text) <= 6000
    assert "src/a.py:1: error: bad  [misc]" in text
    assert text.count("the last line") == 2
    assert text.count("output trimmed to the last") == 2
