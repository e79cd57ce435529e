"""Judging a gate against the base: the pure rules (issue #26)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.gates.baseline import base_gate, failures, headline, judge
from bot.gates.report import GateResult, check_output, conclusion, failure_feedback
from bot.orchestration.envcopy import relocate
from bot.plan.baseline import BaseCheck, summary_line

PYTEST_BASE = """\
..F.F
=========================== short test summary info ============================
FAILED tests/test_a.py::test_old - AssertionError: boom
FAILED tests/test_b.py::test_param[a b] - assert 1 == 2
2 failed, 3 passed in 0.12s
"""
MYPY_BASE = """\
calc/__init__.py:1: error: Function is missing a type annotation  [no-untyped-def]
calc/util.py:4: error: Incompatible return value type (got "str", expected "int")  [return-value]
Found 2 errors in 2 files (checked 3 source files)
"""


def result(output: str, *, code: int | None = 1, timed_out: bool = False, command: str = "cmd") -> GateResult:
    return GateResult(
        name="gate", command=command, exit_code=code, timed_out=timed_out, output=output, duration_s=1
    )


def base_of(output: str, code: int = 1) -> object:
    return base_gate(result(output, code=code), root="/base")


def test_failures_reads_test_ids_and_errors_by_file_code_and_message() -> None:
    assert failures(PYTEST_BASE) is not None and len(failures(PYTEST_BASE) or []) == 2
    assert failures(MYPY_BASE) is not None and len(failures(MYPY_BASE) or []) == 2
    ruff = "src/x.py:3:1: F401 [*] `os` imported but unused\nFound 1 error.\n"
    assert len(failures(ruff) or []) == 1
    jest = "FAIL src/sum.test.js\n  ● sum › adds\n\nTests:       1 failed, 4 passed, 5 total\n"
    assert len(failures(jest) or []) == 2
    tap = "not ok 3 - parses dates # time=1.2ms\n# fail 1\n"
    assert len(failures(tap) or []) == 1
    assert failures("Traceback (most recent call last):\nImportError: no module\n") is None


def test_a_moved_line_is_the_same_error_but_a_second_one_of_its_kind_is_new() -> None:
    moved = MYPY_BASE.replace("calc/util.py:4:", "calc/util.py:9:")
    assert failures(moved) == failures(MYPY_BASE)
    twice = MYPY_BASE + MYPY_BASE.splitlines()[1].replace(":4:", ":20:") + "\n"
    assert len(failures(twice) or []) == 3


def test_absolute_paths_under_the_worktree_compare_as_relative() -> None:
    base = failures("FAILED /base/tests/test_a.py::test_old - x\n", root="/base")
    story = failures("FAILED /work/story-001/tests/test_a.py::test_old - x\n", root="/work/story-001")
    assert base == story


def test_headline_finds_the_tools_own_summary() -> None:
    assert headline(PYTEST_BASE) == "2 failed, 3 passed in 0.12s"
    assert headline("====== 212 passed in 3.10s ======\n") == "212 passed in 3.10s"
    assert headline(MYPY_BASE) == "Found 2 errors in 2 files (checked 3 source files)"
    assert headline("Success: no issues found in 3 source files\n").startswith("Success")
    assert headline("something else\n") == ""


def test_a_gate_that_passes_on_the_base_must_pass() -> None:
    base = base_gate(result("5 passed in 0.1s\n", code=0), root=None)
    assert judge(result("5 passed in 0.1s", code=0), base, root=None).judged is None
    failed = judge(result(PYTEST_BASE), base, root=None)
    assert conclusion(failed) == "failure" and not failed.passed
    assert "passes on the base" in (failed.judgement or "")


def test_the_same_failures_as_the_base_are_neutral_and_a_new_one_fails() -> None:
    base = base_gate(result(PYTEST_BASE), root=None)
    same = judge(result(PYTEST_BASE.replace("0.12s", "0.30s")), base, root=None, label="main@abc1234")
    assert conclusion(same) == "neutral" and same.passed
    assert "not held against the story" in (same.judgement or "")
    worse = PYTEST_BASE.replace("2 failed", "3 failed") + "FAILED tests/test_c.py::test_new - boom\n"
    judged = judge(result(worse), base, root=None, label="main@abc1234")
    assert conclusion(judged) == "failure" and not judged.passed
    assert "1 failure(s) not on main@abc1234" in (judged.judgement or "")
    assert "tests/test_c.py::test_new" in (judged.judgement or "")
    fixed = judge(result("5 passed in 0.1s", code=0), base, root=None)
    assert conclusion(fixed) == "success"


def test_output_that_cannot_be_itemised_is_neutral_only_when_it_is_the_same() -> None:
    base = base_gate(result("make: *** [test] Error 2\n", code=2), root=None)
    assert base.failures is None
    judged = judge(result("make: *** [test] Error 2\n", code=2), base, root=None)
    assert conclusion(judged) == "neutral" and "fails exactly as on the base" in (judged.judgement or "")


def test_a_story_that_breaks_the_runner_is_not_hidden_behind_the_bases_failures() -> None:
    base = base_gate(result(PYTEST_BASE), root=None)
    crashed = judge(result("ImportError while loading conftest\n", code=4), base, root=None)
    assert conclusion(crashed) == "failure"
    timed = judge(result("", code=None, timed_out=True), base, root=None)
    assert conclusion(timed) == "failure"


def test_a_changed_command_or_no_base_is_judged_on_its_exit_alone() -> None:
    base = base_gate(result(PYTEST_BASE, command="pytest"), root=None)
    plain = judge(result(PYTEST_BASE, command="pytest -x"), base, root=None)
    assert plain.judged is None and conclusion(plain) == "failure"
    assert judge(result(PYTEST_BASE), None, root=None).judged is None


def test_check_output_and_feedback_say_the_verdict() -> None:
    base = base_gate(result(MYPY_BASE), root=None)
    worse = MYPY_BASE + "calc/new.py:1: error: Incompatible types in assignment  [assignment]\n"
    judged = judge(result(worse), base, root=None)
    summary = check_output(judged)["summary"]
    assert "**Against the base:**" in summary and "calc/new.py" in summary
    assert "Against the base:" in failure_feedback([judged])
    neutral = judge(result(MYPY_BASE), base, root=None)
    assert check_output(neutral)["title"] == "gate: no worse than the base"
    assert failure_feedback([neutral]) == ""


def test_summary_line_for_the_plan_comment() -> None:
    check = BaseCheck(
        key="k",
        base_sha="abc1234def",
        base_label="main@abc1234",
        setup="success",
        gates=[
            base_gate(result("212 passed in 3.0s\n", code=0, command="pytest"), root=None),
            base_gate(result(MYPY_BASE, command="mypy ."), root=None).model_copy(
                update={"name": "typecheck"}
            ),
        ],
    )
    line = summary_line(check)
    assert line.startswith("checked on main@abc1234: setup ✓, gate ✓ (212 passed in 3.0s), typecheck ✗")
    assert "typecheck already fails there" in line
    failed = check.model_copy(update={"setup": "failure", "gates": []})
    assert "no story runs until setup passes on the base" in summary_line(failed)


@pytest.mark.skipif(sys.platform != "linux", reason="venv layout")
def test_relocate_makes_a_copied_venv_work_at_its_new_path(tmp_path: Path) -> None:
    """A console script and an editable-style .pth of a venv made at one path work after a copy."""
    old, new = tmp_path / "base-check", tmp_path / "story-001"
    (old / "src").mkdir(parents=True)
    (old / "src" / "mine.py").write_text("VALUE = 42\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(old / ".venv")], check=True)
    site = next((old / ".venv").glob("lib/python*/site-packages"))
    (site / "_mine.pth").write_text(f"{old / 'src'}\n")
    script = old / ".venv" / "bin" / "show"
    script.write_text(f"#!{old / '.venv' / 'bin' / 'python'}\nimport mine\nprint(mine.VALUE)\n")
    script.chmod(0o755)
    subprocess.run(["cp", "-a", str(old), str(new)], check=True)
    subprocess.run(["rm", "-rf", str(old)], check=True)
    assert relocate(new / ".venv", old=str(old), new=str(new)) >= 2
    done = subprocess.run([str(new / ".venv" / "bin" / "show")], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "42"
