"""A setup command that exits 127 names the program missing from the server's tool PATH and the
setting that adds it (issue 46, item 4): a Rust project on a server whose tool PATH has no cargo
was told "Fix the project", as if its own code were broken."""

from __future__ import annotations

from pathlib import Path

from bot.environment.setup import missing_program
from bot.plan.state import PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from tests.harness import Harness
from tests.test_setup_env import needs_bwrap, plan_and_run

CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'


def test_the_program_is_read_from_the_shells_own_words() -> None:
    assert missing_program(127, "sh: 1: cargo: not found\n") == "cargo"  # dash
    assert missing_program(127, "bash: line 2: go: command not found") == "go"
    assert missing_program(127, "/bin/sh: 3: /opt/rust/bin/cargo: not found") == "/opt/rust/bin/cargo"
    assert missing_program(127, "error: something else") is None
    assert missing_program(1, "sh: 1: cargo: not found") is None  # not the shell's "not found"
    assert missing_program(127, "sh: 1: `@evil`: not found") is None  # nothing but a program's name


@needs_bwrap
async def test_a_rust_project_on_a_tool_path_without_cargo_is_told_it_is_the_servers_setup(
    tmp_path: Path,
) -> None:
    files = {"README.md": "# calc\n", "Cargo.toml": CARGO_TOML, "src/lib.rs": "pub fn one() -> u8 { 1 }\n"}
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_TOOL_PATH="/usr/local/bin:/usr/bin:/bin") as h:
        calls = await plan_and_run(h, tmp_path, files)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.setup == ["cargo fetch"]
        assert state.status == PlanStatus.FAILED and not calls.exists()
        check = state.base_check
        assert check is not None and check.setup == "failure" and check.setup_exit_code == 127
        assert all(s.status == StoryStatus.PENDING for s in state.stories.values())
        [notice] = [c for c in h.comments(1) if "unchanged base" in c]
        assert "`cargo` is not on the server's tool PATH (exit 127: command not found)" in notice
        assert "to `PLAN_CASCADE_TOOL_PATH` (rustup's `~/.cargo/bin`, for example)" in notice
        assert "Fix the project" not in notice
        assert "/plan-cascade retry" in notice


def test_a_story_whose_setup_cannot_find_a_program_says_so_too() -> None:
    from bot.gates.report import GateResult
    from bot.orchestration.setup import setup_failure

    result = GateResult(
        name="setup",
        command="go mod download",
        exit_code=127,
        output="/bin/bash: line 3: go: command not found\n",
        duration_s=0.1,
    )
    reason = setup_failure(result)
    assert reason.startswith("setup failed (exited with code 127: `go` is not on the server's tool PATH")
    assert "`PLAN_CASCADE_TOOL_PATH`" in reason and "rustup" not in reason
