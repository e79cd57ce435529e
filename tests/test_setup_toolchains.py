"""Rust installed with rustup runs in the sandbox (issue 41): setup and gates find its toolchain.

rustup's `cargo` (in `~/.cargo/bin`) is a proxy that reads `RUSTUP_HOME` (default `~/.rustup` of
the user who installed it); in the sandbox HOME is another directory, and before, every Rust
setup ended "rustup could not choose a version of cargo to run". This runs where rustup is
installed (the project's machines have it in /root/.cargo/bin).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bot.plan.state_block import decode_state
from tests.harness import Harness
from tests.test_setup_env import check_runs, needs_bwrap, plan_and_run

CARGO_BIN = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo") / "bin"
RUSTUP = shutil.which("cargo", path=str(CARGO_BIN))
pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(
        RUSTUP is None or Path(RUSTUP).resolve().name != "rustup", reason="Rust is not installed with rustup"
    ),
]


async def test_rustups_cargo_runs_in_setup_and_gates(tmp_path: Path) -> None:
    show = "cargo --version && rustc --version"
    extra = (
        f"setup:\n  - {json.dumps(show)}\ngates:\n  detect: false\n  max_retries: 0\n  custom:\n"
        f"    - name: toolchain\n      command: {json.dumps(show)}\n"
    )
    tool_path = f"{CARGO_BIN}:/usr/local/bin:/usr/bin:/bin"
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_TOOL_PATH=tool_path) as h:
        await plan_and_run(h, tmp_path, {"README.md": "# x\n"}, extra=extra)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.base_check is not None
        assert state.base_check.setup == "success", state.base_check.setup_output  # on the unchanged base
        runs = check_runs(h)
        for name in ("setup", "toolchain"):
            found = runs[f"plan-cascade / STORY-001 / {name}"]
            text = found[0].output.get("text", "")
            assert [r.conclusion for r in found] == ["success"], text[-1500:]
            assert "cargo 1." in text and "rustc 1." in text
