"""Toolchains that the tool PATH reaches through a manager: rustup's proxies need rustup's home.

rustup, the usual way to install Rust, puts proxies in `~/.cargo/bin` (`cargo`, `rustc`, … are
links to `rustup`) that find the toolchain in `RUSTUP_HOME` (default `~/.rustup` of the user who
installed it). Setup, agents and gates run with a HOME of their own, where a proxy finds nothing
("rustup could not choose a version of cargo to run"). When the tool PATH's `cargo` is such a
proxy, the server's `RUSTUP_HOME` is handed to them and mounted read-only: the toolchains it
holds run, and none can be installed or changed from the sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bot.sandbox.process import tool_program


def rustup_env(tool_path: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """`RUSTUP_HOME` when the tool PATH's `cargo` is rustup's proxy and that home exists, else nothing."""
    cargo = tool_program("cargo", tool_path)
    if cargo is None or Path(cargo).resolve().name != "rustup":
        return {}
    home = environ.get("RUSTUP_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".rustup")
    return {"RUSTUP_HOME": home} if Path(home).is_absolute() and Path(home).is_dir() else {}
