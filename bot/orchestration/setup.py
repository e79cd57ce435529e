"""A worktree's environment: the plan's setup commands, and what agents and gates then run with.

Setup runs once per worktree (each story's, each batch's integration worktree, a gate re-run's),
in the sandbox like a gate but **with network through the bot's egress proxy**: its own network
namespace, out only to the registries the operator allows (`bot.network.proxy`), never to the
server's loopback services, the private network or the cloud's metadata. Its package caches
(uv, pip, npm, yarn, Go modules, Cargo) live under `<data dir>/cache/<repository>`: one
repository's cache never serves another's. Agents and gates then run without network, with the
environment's tools (`.venv/bin`, `node_modules/.bin`) first on PATH and the caches read-only.
Setup is reported as the check run `plan-cascade / <scope> / setup`; a failed setup fails the
story with "setup failed" and is not retried: the agent cannot fix the machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

from bot.environment.node import corepack_runs, corepack_shims
from bot.environment.setup import missing_program, missing_program_hint, setup_env, with_env_path
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult
from bot.gates.run import run_gate
from bot.network.route import egress_route
from bot.orchestration.run import Run
from bot.plan.blocked import blocked_requests
from bot.sandbox.certs import env_mounts
from bot.sandbox.confinement import Confinement
from bot.sandbox.process import scrubbed_env, tool_program, uv_program
from bot.workspace.mirror import mirror_slug
from bot.workspace.policy import protected_paths
from bot.workspace.worktree import Worktree, sandbox_view

SETUP_GATE = "setup"
SETUP_FAILED = "setup failed"
"""How every story failure reason caused by setup begins (the plan comment and PR body show it)."""
SETUP_OUTPUT_CHARS = 60_000
_first_setup: dict[tuple[int, Path], asyncio.Lock] = {}
"""Per cache: held by a repository's first setup in this process, so parallel stories wait for it
and then install from the filled cache instead of all downloading the same packages at once."""
_warm: set[Path] = set()


def setup_spec(run: Run) -> GateSpec:
    """The plan's setup commands as one gate-like command (stops at the first failure)."""
    return GateSpec(name=SETUP_GATE, kind="setup", command="set -e\n" + "\n".join(run.state.setup))


def cache_root(run: Run) -> Path:
    """This repository's package caches (created on first use)."""
    root = run.mirror.root / "cache" / mirror_slug(run.mirror.clone_url)
    root.mkdir(parents=True, exist_ok=True)
    return root


def shared_dirs(run: Run) -> list[Path]:
    """Directories agents and gates see read-only outside their worktree: the repository's caches,
    and what the server's settings name (CA files, rustup's toolchains).

    A virtualenv made by uv may link to a Python uv installed into the cache, and node tools
    read theirs, so both need them; none may write them.
    """
    return [cache_root(run), *server_files(run)] if run.state.setup else []


def server_files(run: Run) -> list[Path]:
    """What the sandbox mounts read-only so setup and gates can read what the server's settings
    name (its CA files, rustup's toolchains)."""
    return env_mounts(run.sandbox.server_env, hidden=run.sandbox.hidden)


def shims_dir(run: Run) -> Path | None:
    """corepack's programs (`pnpm`, `yarn`, …) for the managers the plan's setup runs through it,
    at the versions it asks for, so a script that calls `pnpm` finds it (None: setup runs none).

    Written once into the repository's caches, in a folder named for their text; read-only to
    setup, gates and agents alike.
    """
    runs = corepack_runs(run.state.setup)
    corepack = tool_program("corepack", run.tool_path) if runs else None
    if corepack is None:
        return None
    scripts = corepack_shims(runs, corepack)
    digest = hashlib.sha256(json.dumps(scripts, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_root(run) / "corepack-bin" / digest
    for name, text in scripts.items():
        program = folder / name
        if not program.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f".{name}.{os.getpid()}"
            partial.write_text(text)
            partial.chmod(0o755)
            partial.replace(program)
    return folder


def setup_variables(run: Run, wt: Worktree, home: Path) -> dict[str, str]:
    """What setup adds to the environment of this worktree's agents and gates (none without setup):
    its caches and tools, and the server's settings for them (TLS trust, rustup's home)."""
    if not run.state.setup:
        return {}
    return {**run.sandbox.server_env, **setup_env(wt.path, cache_root(run), home=home, shims=shims_dir(run))}


def tool_env(run: Run, wt: Worktree, home: Path) -> dict[str, str]:
    """The scrubbed environment agents and gates run with (no token, no key), plus setup's."""
    base = scrubbed_env(home=home, extra={"PATH": run.tool_path} if run.tool_path else None)
    return with_env_path(base, setup_variables(run, wt, home))


async def protected(run: Run, wt: Worktree) -> list[Path]:
    """`protected_paths` of a worktree, listed once while it lives: every agent run's changes to
    denied paths are undone, so the tracked denied paths cannot change under it."""
    found = run.protected.get(wt.path)
    if found is None:
        found = run.protected[wt.path] = await protected_paths(wt, run.config.paths.deny)
    return found


async def gate_confinement(run: Run, wt: Worktree, home: Path) -> Confinement:
    """Where a gate runs: the run's sandbox, no network, `.git`, denied paths and caches read-only,
    the repository's history read-only (`git describe`, `git log` work)."""
    return await asyncio.to_thread(  # its git copy is made in a thread, off the event loop
        run.sandbox.confinement,
        worktree=wt.path,
        home=home,
        repo_setting=run.config.agent.sandbox,
        readonly=[*await protected(run, wt), *shared_dirs(run)],
        git=sandbox_view(wt),
    )


async def prepare(run: Run, wt: Worktree, home: Path) -> GateResult | None:
    """Run the plan's setup commands in `wt`; their result (None when the plan has none).

    With network (confined: only through the egress proxy to `PLAN_CASCADE_SETUP_EGRESS`) and the
    caches writable; without any secret of ours: the environment is the scrubbed one plus the
    caches' variables and the operator's `PLAN_CASCADE_SETUP_ENV`.
    """
    if not run.state.setup:
        return None
    caches = cache_root(run)
    env = {**tool_env(run, wt, home), "UV_PYTHON_INSTALL_DIR": str(caches / "uv-python")}
    env["UV_VENV_CLEAR"] = "1"  # setup again in the same worktree (after a story's change) starts clean
    env.update(run.sandbox.setup_env)
    uv = uv_program(run.tool_path)
    if uv is not None:  # uv comes with Plan Cascade: setup finds it after the tools of the PATH
        env["PATH"] = f"{env['PATH']}:{Path(uv).parent}"
    confinement = await asyncio.to_thread(  # its git copy is made in a thread, off the event loop
        run.sandbox.confinement,
        worktree=wt.path,
        home=home,
        repo_setting=run.config.agent.sandbox,
        readonly=[*await protected(run, wt), *server_files(run), *filter(None, [shims_dir(run)])],
        writable=[caches],
        git=sandbox_view(wt),  # a version taken from git tags (setuptools-scm, hatch-vcs) needs it
    )

    async def setup() -> GateResult:
        spec = setup_spec(run)
        if not confinement.confined:  # PLAN_CASCADE_SANDBOX=off: the host's network, like the bot
            return await _run_setup(run, spec, wt, env, confinement)
        hook = run.sandbox.on_blocked
        counted = (lambda: hook("setup")) if hook is not None else None
        async with egress_route(run.sandbox.setup_egress, on_blocked=counted) as route:
            routed = spec.model_copy(update={"command": route.command(spec.command)})
            jail = confinement.going_out(route)
            result = await _run_setup(run, routed, wt, {**env, **route.env}, jail)
            refused = route.proxy.blocked.entries()
        blocked = blocked_requests(refused, by="setup")
        return result.model_copy(update={"command": spec.command, "blocked": blocked})

    if caches in _warm:
        return await setup()
    async with _first_setup.setdefault((id(asyncio.get_running_loop()), caches), asyncio.Lock()):
        result = await setup()
        if result.passed:
            _warm.add(caches)
        return result


async def _run_setup(
    run: Run, spec: GateSpec, wt: Worktree, env: dict[str, str], confinement: Confinement
) -> GateResult:
    result, _ = await run_gate(
        spec,
        cwd=wt.path,
        env=env,
        default_timeout=run.config.setup_timeout_seconds,
        attempt=1,
        confinement=confinement,
        output_limit=SETUP_OUTPUT_CHARS,
    )
    return result


async def report_setup(run: Run, result: GateResult, *, scope: str, head: str) -> None:
    """The setup check run `plan-cascade / <scope> / setup` on `head`, completed at once."""
    spec = setup_spec(run)
    handle = await run.reporter.gate_started(scope=scope, gate=spec, head_sha=head, attempt=1)
    await run.reporter.gate_finished(
        handle, scope=scope, gate=spec, result=result, annotations=[], head_sha=head
    )


def setup_failure(result: GateResult, *, agent_ran: bool = False) -> str:
    """The story's failure reason for a failed setup, with the output's tail (and, when a program
    was not found, whose it is to provide)."""
    why = "timed out" if result.timed_out else f"exited with code {result.exit_code}"
    missing = missing_program(result.exit_code, result.output)
    if missing is not None:
        why += f": {missing_program_hint(missing)}"
    tail = result.output.strip()[-1500:]
    if agent_ran:
        return f"{SETUP_FAILED} ({why}) after the story's change, though it passes on the base.\n{tail}"
    return f"{SETUP_FAILED} ({why}): the agent was not run, the environment could not be prepared.\n{tail}"


def setup_feedback(result: GateResult) -> str:
    """What the agent reads when setup passes on the base but fails in its worktree."""
    why = "timed out" if result.timed_out else f"exited with code {result.exit_code}"
    return (
        f"The environment setup ({why}) fails in this worktree, though it passes on the unchanged base: "
        "a change here (a manifest, a dependency, the package layout) broke it. Fix that as part of "
        "the story; the setup commands run again after your change.\n"
        f"Setup commands:\n{result.command}\n\nTheir output's tail:\n{result.output.strip()[-4000:]}"
    )


def setup_passes_on_base(run: Run) -> bool:
    """Whether setup passed on the plan's unchanged base (or is taken to: the base check's gates
    still run, which only start once its setup passed)."""
    check = run.state.base_check
    if run.base_pending is not None:
        return True
    return check is not None and check.setup == "success"
