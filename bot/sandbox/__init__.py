"""The sandbox: confining untrusted processes (agents' commands, CLI agents, gates, setup, local
MCP servers) under bubblewrap, with the operator's limits, recorded for the reaper, and removing
what they wrote.

One spawn lifecycle serves them all (`bot.sandbox.process.confined_child`): the bubblewrap argv,
the limit gate, the registry's record, the cgroup removed and the record forgotten at the end.
"""

from bot.config.globs import is_denied
from bot.sandbox.confinement import Confinement, Sandbox, SandboxUnavailable, bwrap_problem
from bot.sandbox.paths import resolve_path
from bot.sandbox.process import ProcessResult, run_process, scrubbed_env

__all__ = [
    "Confinement",
    "ProcessResult",
    "Sandbox",
    "SandboxUnavailable",
    "bwrap_problem",
    "is_denied",
    "resolve_path",
    "run_process",
    "scrubbed_env",
]
