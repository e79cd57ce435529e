"""Judging against the base fails closed (issue #37 item 2, issue #41 item 4): a story passes a
gate that fails on the base only when its result is provably no worse.

The outputs under `tests/fixtures/gates/` are real: go 1.19's `go test ./...` and `go vet ./...`,
cargo 1.95's `cargo test --no-fail-fast`, jest 29 and mocha 10, each run on a small project whose
base has a failing test, then on a copy a story changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.gates.baseline import base_gate, failures, headline, judge
from bot.gates.failures import counts, fingerprint
from bot.gates.report import GateResult, check_output, conclusion, failure_feedback
from bot.plan.baseline import BaseGate

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gates"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def result(output: str, *, code: int | None = 1, timed_out: bool = False) -> GateResult:
    return GateResult(
        name="test", command="cmd", exit_code=code, timed_out=timed_out, output=output, duration_s=1
    )


def base_of(
    output: str, *, code: int | None = 1, timed_out: bool = False, root: str | None = None
) -> BaseGate:
    return base_gate(result(output, code=code, timed_out=timed_out), root=root)


def verdict(base: BaseGate, output: str, *, code: int | None = 1, root: str | None = None) -> GateResult:
    return judge(result(output, code=code), base, root=root, label="main@abc1234")


# --- (a) output no parser read: a story that does not even compile passed -----------------------


def test_a_custom_gate_whose_story_breaks_the_build_fails_although_the_base_fails_too() -> None:
    """`make test` on the base: a failing check nobody itemises. The story breaks the build;
    make exits 2 either way. It is not provably no worse: it fails."""
    base = base_of("./check.sh: 1 known problem\nmake: *** [Makefile:3: test] Error 2\n", code=2)
    broken = (
        "cc -c calc.c\ncalc.c:3:1: error: expected ';' before '}' token\n"
        "make: *** [Makefile:2: calc.o] Error 1\n"
    )
    judged = verdict(base, broken + "make: *** [Makefile:3: test] Error 2\n", code=2)
    assert conclusion(judged) == "failure" and not judged.passed
    assert "not provably no worse" in (judged.judgement or "") and "its output differs" in (
        judged.judgement or ""
    )
    exits = verdict(base, "Segmentation fault\n", code=139)
    assert conclusion(exits) == "failure" and "exit 139 here, exit 2 there" in (exits.judgement or "")
    # The same failure, printed again with other timings and paths, is no worse.
    timed = "./check.sh: 1 known problem (0.31s)\nmake: *** [Makefile:3: test] Error 2\n"
    base = base_of(timed.replace("0.31s", "0.12s"), code=2)
    same = verdict(base, timed, code=2)
    assert conclusion(same) == "neutral" and "fails exactly as on main@abc1234" in (same.judgement or "")


def test_cargo_a_story_that_does_not_compile_fails_where_the_base_has_a_failing_test() -> None:
    base = base_of(fixture("cargo_test_base.txt"), code=101, root="/tmp/jg/rs")
    assert base.failures is not None and len(base.failures) == 1  # test src/lib.rs::tests::subs
    judged = verdict(base, fixture("cargo_test_compile_error.txt"), code=101, root="/tmp/jg/rs")
    assert conclusion(judged) == "failure"
    assert "2 failure(s) not on main@abc1234" in (judged.judgement or "")
    assert "error[E0277]: cannot add `&str` to `i32`" in (judged.judgement or "")


def test_cargo_test_ids_by_binary_an_unchanged_story_is_neutral_another_failing_test_fails() -> None:
    base = base_of(fixture("cargo_test_base.txt"), code=101, root="/tmp/jg/rs")
    rerun = (
        fixture("cargo_test_base.txt")
        .replace("finished in 0.00s", "finished in 0.02s")
        .replace("10201", "777")
    )
    assert conclusion(verdict(base, rerun, code=101, root="/tmp/jg/rs")) == "neutral"
    judged = verdict(base, fixture("cargo_test_another_fails.txt"), code=101, root="/tmp/jg/rs")
    assert conclusion(judged) == "failure"
    assert "1 failure(s) not on main@abc1234" in (judged.judgement or "")
    assert "test integration ... FAILED" in (judged.judgement or "")
    assert headline(fixture("cargo_test_base.txt")) == "test result: FAILED. 1 passed; 1 failed"


def test_go_vet_a_new_error_fails_the_same_one_is_neutral() -> None:
    vet = fixture("go_vet.txt")
    base = base_of(vet, code=2)
    assert failures(vet) is not None
    assert conclusion(verdict(base, vet, code=2)) == "neutral"
    more = vet + "util/more.go:4:2: unreachable code\n"
    judged = verdict(base, more, code=2)
    assert conclusion(judged) == "failure" and "util/more.go:4:2: unreachable code" in (
        judged.judgement or ""
    )


def test_mocha_counts_that_grew_fail_and_a_run_that_stops_before_its_tests_fails() -> None:
    """mocha's failures are not itemised: its own `1 failing` is compared; a file that fails
    to load stops the run before any test (same exit status, no summary): it fails."""
    base = base_of(fixture("mocha_base.txt"), code=1)
    assert base.failures is None and base.counts == {"mocha failing": 1}
    unchanged = fixture("mocha_base.txt").replace("(9ms)", "(14ms)")
    same = verdict(base, unchanged, code=1)
    assert conclusion(same) == "neutral" and "counts no more of them" in (same.judgement or "")
    worse = verdict(base, fixture("mocha_another_fails.txt"), code=2)
    assert conclusion(worse) == "failure" and "mocha failing 1 → 2" in (worse.judgement or "")
    crashed = verdict(base, fixture("mocha_load_error.txt"), code=1)
    assert conclusion(crashed) == "failure" and "not provably no worse" in (crashed.judgement or "")


# --- (b) jest: a suite that fails to run is a failure ------------------------------------------


def test_jest_a_suite_that_fails_to_run_is_a_failure_even_where_the_base_has_a_failing_test() -> None:
    """The base: `sum.test.js` has one failing test. The story breaks that file so that none of
    its tests run (`● Test suite failed to run`): the base's failing test is no longer reported,
    nothing new was named by id — yet the suite is gone."""
    base = base_of(fixture("jest_base.txt"), root="/tmp/jg/js")
    judged = verdict(base, fixture("jest_suite_failed_to_run.txt"), root="/tmp/jg/js")
    assert conclusion(judged) == "failure" and not judged.passed
    assert "● Test suite failed to run" in (judged.judgement or "")
    assert "Against the base:" in failure_feedback([judged])
    assert headline(fixture("jest_suite_failed_to_run.txt")).startswith("Test Suites: 1 failed")


def test_jest_counts_are_a_second_check_where_failures_are_itemised() -> None:
    """A failure the ids miss but the tool's own summary counts still fails the story."""
    base = base_of(fixture("jest_base.txt"))
    more = fixture("jest_base.txt").replace(
        "Tests:       1 failed, 2 passed", "Tests:       2 failed, 1 passed"
    )
    judged = verdict(base, more)
    assert conclusion(judged) == "failure" and "jest tests failed 1 → 2" in (judged.judgement or "")


# --- issue #41: go test's ids without their timings ---------------------------------------------


def test_go_test_an_unchanged_story_is_neutral_whatever_its_timings() -> None:
    """`FAIL\tpkg\t0.002s` was read as a test id with its timing: the base's own failure was new
    in every story."""
    base = base_of(fixture("go_test_base.txt"))
    rerun = fixture("go_test_base.txt").replace("0.002s", "0.005s").replace("(0.00s)", "(0.01s)")
    assert failures(rerun) == base.failures
    judged = verdict(base, rerun)
    assert conclusion(judged) == "neutral", judged.judgement


def test_go_test_a_story_that_breaks_another_test_or_the_build_fails() -> None:
    base = base_of(fixture("go_test_base.txt"))
    judged = verdict(base, fixture("go_test_another_fails.txt"))
    assert conclusion(judged) == "failure"
    assert "--- FAIL: TestTwice (0.00s)" in (judged.judgement or "")
    built = verdict(base, fixture("go_test_build_failed.txt"), code=2)
    assert conclusion(built) == "failure"
    assert "undefined: undefinedThing" in (built.judgement or "")
    assert "[build failed]" in (built.judgement or "")


def test_a_go_test_of_the_same_name_in_another_package_is_another_test() -> None:
    one = "--- FAIL: TestX (0.00s)\nFAIL\nFAIL\texample.com/m/a\t0.001s\nFAIL\n"
    two = one.replace("example.com/m/a", "example.com/m/b")
    assert failures(one) != failures(two)


# --- a run cut short proves nothing ------------------------------------------------------------


def test_a_gate_that_times_out_on_the_base_and_here_fails() -> None:
    base = base_of("collected 80 items\n....", code=None, timed_out=True)
    assert base.conclusion == "timed_out"
    judged = judge(result("collected 80 items\n..", code=None, timed_out=True), base, root=None)
    assert conclusion(judged) == "failure" and "cut short" in (judged.judgement or "")
    finished = judge(result("FAILED tests/test_a.py::test_x - boom\n1 failed in 2.0s\n"), base, root=None)
    assert conclusion(finished) == "failure" and "timed out" in (finished.judgement or "")


def test_a_base_kept_before_its_output_was_fingerprinted_compares_closed() -> None:
    """A base gate of an older plan state (no counts, no fingerprint) shows nothing is no worse."""
    old = BaseGate(name="test", command="cmd", conclusion="failure", exit_code=2, headline="")
    judged = judge(result("make: *** [test] Error 2\n", code=2), old, root=None)
    assert conclusion(judged) == "failure"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("2 failed, 3 passed in 0.12s\n", {"pytest failed": 2, "pytest error": 0}),
        ("Found 3 errors in 2 files (checked 9 source files)\n", {"mypy error": 3}),
        ("# pass 4\n# fail 2\n", {"tap fail": 2}),
        ("✖ 3 problems (2 errors, 1 warning)\n", {"eslint error": 2}),
        ("something else\n", None),
    ],
)
def test_counts_of_the_tools_own_summaries(output: str, expected: dict[str, int] | None) -> None:
    assert counts(output) == expected


def test_fingerprint_ignores_timings_paths_and_hashes_but_not_counts() -> None:
    one = "/work/base-check/x.py failed after 1.2s (build 3f9a1c0d2e4b5a6c)\n3 problems\n"
    two = "/work/story-001/x.py failed after 3.4s (build 0a1b2c3d4e5f6a7b)\n3 problems\n"
    assert fingerprint(one, root="/work/base-check") == fingerprint(two, root="/work/story-001")
    assert fingerprint(one.replace("3 problems", "4 problems")) != fingerprint(one)


def test_the_check_run_says_why_it_could_not_be_compared() -> None:
    base = base_of("make: *** [test] Error 2\n", code=2)
    judged = verdict(base, "linker error\nmake: *** [test] Error 2\n", code=2)
    summary = check_output(judged)["summary"]
    assert "**Against the base:** fails on main@abc1234 too" in summary
    assert "cannot be compared one by one" in summary
