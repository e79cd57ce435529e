"""Which directories of a confined process's PATH it sees (`bot.sandbox.tooldirs`), and that the
event loop can ask for its argv without listing any of them."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from bot.sandbox import tooldirs
from bot.sandbox.confinement import Confinement
from bot.sandbox.tooldirs import kept_runtime, within
from tests.support import audit_threads


def test_within_answers_as_is_relative_to_does() -> None:
    names = ["/", "/usr", "/usr/bin", "/usrx", "/usr/binx", "//usr", "usr", "usr/bin", ".", "/a/../b", "/a"]
    for path, folder in itertools.product(map(Path, names), repeat=2):
        assert within(path, folder) == path.is_relative_to(folder), (path, folder)


def test_the_loops_argv_lists_no_directory_and_is_the_one_a_thread_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`known_argv` (what the event loop asks) never lists a tool directory: None until each was
    read (by `argv`, in a thread), then the very argv `argv` makes; None again once one changed."""
    monkeypatch.setattr(tooldirs, "RUNTIME_KEEP", 1e9)  # no minute of keeping ends mid-test
    venv, base = tmp_path / "venv", tmp_path / "base"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    box = Confinement(
        confined=True, worktree=tmp_path / "wt", home=tmp_path / "home", hidden=(tmp_path / "data",)
    )
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin"}

    def on_the_loop() -> list[str] | None:
        with audit_threads("os.scandir", lambda args: True) as listed:
            made = box.known_argv(["python", "-V"], cwd=tmp_path / "wt", env=env)
        assert listed == []
        return made

    kept_runtime.clear()
    assert on_the_loop() is None
    made = box.argv(["python", "-V"], cwd=tmp_path / "wt", env=env)
    assert str(base) in made and str(venv) in made
    assert on_the_loop() == made
    os.utime(venv / "bin", ns=(1, 1))  # a python added or retargeted
    assert on_the_loop() is None
