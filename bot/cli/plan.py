"""Plan tools and local mode on the command line.

`schema`, `config validate|schema` and `plan` help write plans and configs; `run`, `resume`,
`status` and `demo` run the engine on a local repository with the terminal in place of
GitHub (see :mod:`bot.local`). Errors are PlanCascadeErrors: `bot.cli.main` prints their one
line (and problem lines) and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from bot.cli.registry import command
from bot.errors import RepoConfigError


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the plan-related and local-mode sub-commands."""
    sub.add_parser("schema", help="print the JSON Schema of the PRD (plan) format")
    config = sub.add_parser("config", help="validate .github/plan-cascade.yml or print its schema")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    validate = config_sub.add_parser("validate", help="check a config file; exit 1 on problems")
    validate.add_argument("path", nargs="?", help="default: .github/plan-cascade.yml of this repository")
    config_sub.add_parser("schema", help="print the JSON Schema of the config file")

    plan = sub.add_parser("plan", help="plan a change with the configured LLM and print the PRD YAML")
    plan.add_argument("description", help="what to build, in a sentence or a paragraph")
    plan.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default .)")
    plan.add_argument("--output", "-o", type=Path, help="write the PRD here instead of stdout")

    run = sub.add_parser("run", help="plan (or read a PRD), approve and run it on a local repository")
    run.add_argument("description", nargs="?", help="what to build (planned with the LLM), or use --prd")
    run.add_argument("--prd", type=Path, help="a PRD YAML/JSON file to run instead of planning")
    _run_options(run)
    run.add_argument("--allow-dirty", action="store_true", help="run from HEAD despite uncommitted changes")

    resume = sub.add_parser("resume", help="go on with an interrupted, paused or failed local run")
    resume.add_argument("run_id", nargs="?", help="default: the most recent unfinished run")
    _run_options(resume)

    status = sub.add_parser("status", help="list the local runs of a repository, most recent first")
    status.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default .)")

    demo = sub.add_parser("demo", help="run a sample plan with an example agent (no App, no API key)")
    demo.add_argument("--dir", type=Path, help="create the demo under this directory (default: temp)")


NAMES = ("schema", "config", "plan", "run", "resume", "status", "demo")


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default .)")
    parser.add_argument("--yes", "-y", action="store_true", help="approve without asking")
    parser.add_argument(
        "--approve-batch", type=int, metavar="N", help="approve (without asking) batches 1..N only"
    )


def _console() -> Any:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=120)
    return console


def _context(args: argparse.Namespace, *, interactive: bool = True) -> Any:
    """The local edges from the settings: console, prompt, LLM, data dir, tool PATH."""
    from bot.app.wiring import make_llm_factory
    from bot.local.runner import LocalContext
    from bot.runtime.services import Services
    from bot.runtime.settings import load_settings

    settings = load_settings(args.env_file)
    console = _console()
    ask = None
    if interactive and sys.stdin.isatty():

        def ask(question: str) -> bool:
            try:
                return console.input(question).strip().lower() in ("y", "yes")
            except EOFError:
                return False

    return LocalContext(
        console=console,
        ask=ask,
        llm_for=make_llm_factory(Services(settings=settings)),
        data_root=settings.data_dir if "data_dir" in settings.model_fields_set else None,
        tool_path=settings.tool_path,
        sandbox=settings.sandbox_policy(default="auto"),
    )


@command("schema")
def _schema(args: argparse.Namespace) -> int:
    from bot.plan import prd_json_schema

    print(json.dumps(prd_json_schema(), indent=2))
    return 0


@command("config")
def _config(args: argparse.Namespace) -> int:
    from bot.config.load import load_repo_config, repo_config_json_schema
    from bot.config.repo import CONFIG_PATH

    if args.config_command == "schema":
        print(json.dumps(repo_config_json_schema(), indent=2))
        return 0
    if args.path is not None:
        path = Path(args.path)
    else:
        from bot.local.publisher import repo_root

        path = asyncio.run(repo_root(Path.cwd())) / CONFIG_PATH
    if not path.is_file():
        raise RepoConfigError(
            f"{path} does not exist: create it (`plan-cascade config schema` gives its format) or pass a path"
        )
    try:
        load_repo_config(path.read_text(encoding="utf-8"))
    except RepoConfigError as exc:
        print(f"{path}: {len(exc.problems)} problem(s)")
        for line in exc.problems:
            print(f"  - {line}")
        return 1
    print(f"ok: {path} is valid")
    return 0


@command("plan")
def _plan(args: argparse.Namespace) -> int:
    from bot.local.planning import plan_description
    from bot.local.runner import load_config
    from bot.plan import prd_to_yaml

    ctx = _context(args, interactive=False)

    async def plan() -> Any:
        from bot.local.publisher import repo_root

        root = await repo_root(args.repo.expanduser().resolve())
        config, _ = await load_config(root)
        ctx.llm_for(config, None)  # fail fast, naming the missing key
        return await plan_description(root, args.description, config=config, ctx=ctx)

    result = asyncio.run(plan())
    text = prd_to_yaml(result.prd)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(result.prd.stories)} stories)", file=sys.stderr)
    return 0


@command("run")
def _run(args: argparse.Namespace) -> int:
    from bot.errors import PlanValidationError
    from bot.local.runner import RunRequest, start_run

    if (args.prd is None) == (args.description is None):
        raise PlanValidationError('give either a description ("add a --verbose flag") or --prd FILE')
    request = RunRequest(
        repo=args.repo,
        prd_file=args.prd,
        description=args.description,
        yes=args.yes,
        approve_batch=args.approve_batch,
        allow_dirty=args.allow_dirty,
    )
    return asyncio.run(start_run(request, _context(args)))


@command("resume")
def _resume(args: argparse.Namespace) -> int:
    from bot.local.runner import resume_run

    ctx = _context(args)
    return asyncio.run(
        resume_run(args.run_id, repo=args.repo, ctx=ctx, yes=args.yes, approve_batch=args.approve_batch)
    )


@command("status")
def _status(args: argparse.Namespace) -> int:
    from bot.local.publisher import repo_root
    from bot.local.render import status_table
    from bot.local.runner import data_dir
    from bot.local.store import RunStore

    ctx = _context(args, interactive=False)

    async def records() -> tuple[Path, list[Any]]:
        root = await repo_root(args.repo.expanduser().resolve())
        store = RunStore(await data_dir(root, ctx.data_root))
        return store.runs, store.all()

    where, found = asyncio.run(records())
    if not found:
        ctx.console.print(f"no local runs in {where}: start one with `plan-cascade run`")
        return 0
    ctx.console.print(status_table(found))
    return 0


@command("demo")
def _demo(args: argparse.Namespace) -> int:
    from bot.local.demo import run_demo
    from bot.local.runner import LocalContext

    parent = args.dir.absolute() if args.dir is not None else None  # `--dir .` too
    if parent is not None:  # `--dir` names where the demo goes: made when it is not there yet
        parent.mkdir(parents=True, exist_ok=True)
    return asyncio.run(run_demo(LocalContext(console=_console()), parent=parent))
