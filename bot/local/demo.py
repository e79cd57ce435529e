"""`plan-cascade demo`: the whole local flow with no GitHub App and no API key.

It creates a tiny Python package as a git repository in a temporary directory, commits a
config whose agent is the EXAMPLE AGENT (`bot.local.demo_agent`: canned changes, not an AI)
and whose gates really run, writes a PRD of five stories in three batches, and runs it with
`--yes` semantics. Everything stays in the temporary directory, which is kept so the user
can look at the branches.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from bot.local import demo_agent
from bot.local.render import EXAMPLE_AGENT_NOTE
from bot.local.runner import LocalContext, RunRequest, start_run
from bot.sandbox.process import SAFE_PATH
from bot.workspace.git import git_env, run_git

FILES = {
    "README.md": "# textkit\n\nA tiny text utility package.\n",
    ".gitignore": "__pycache__/\n*.pyc\n",
    "textkit/__init__.py": '"""textkit: tiny text helpers."""\n\n__version__ = "0.1.0"\n',
    "tests/test_version.py": (
        "from textkit import __version__\n\n\ndef test_version() -> None:\n"
        '    assert __version__ == "0.1.0"\n'
    ),
}

PRD_YAML = """\
version: 1
title: Text helpers and a command line
summary: Add slugify and word_count to textkit, a command line using both, docs and a test.
stories:
  - id: STORY-001
    title: Add slugify
    acceptance_criteria:
      - "textkit.slug.slugify('Hello, World!') returns 'hello-world'"
    files: [textkit/slug.py]
    verification: python3 -c "from textkit.slug import slugify as f; assert f('Hi, World!') == 'hi-world'"
  - id: STORY-002
    title: Add word_count
    acceptance_criteria:
      - "textkit.count.word_count('a b  c') returns 3 (runs of spaces separate words)"
    files: [textkit/count.py]
    verification: python3 -c "from textkit.count import word_count; assert word_count('a b  c') == 3"
  - id: STORY-003
    title: Add a command line
    depends_on: [STORY-001, STORY-002]
    acceptance_criteria:
      - "python -m textkit.cli Hello World prints the line 'hello-world 2'"
    files: [textkit/cli.py]
    verification: test "$(python3 -m textkit.cli Hello World)" = "hello-world 2"
  - id: STORY-004
    title: Document the helpers
    type: docs
    depends_on: [STORY-001]
    acceptance_criteria:
      - "README.md has a '## Usage' section that names slugify"
    files: [README.md]
    verification: grep -q '^## Usage' README.md && grep -q slugify README.md
  - id: STORY-005
    title: Test the command line
    type: test
    depends_on: [STORY-003]
    acceptance_criteria:
      - "tests/test_cli.py checks that main(['Hello', 'World']) returns 'hello-world 2'"
    files: [tests/test_cli.py]
    verification: python3 -m tests.test_cli
"""


def demo_config(python: str, agent: Path) -> str:
    """The demo repository's `.github/plan-cascade.yml`: the example agent and real gates."""
    script = shlex.quote(str(agent))
    py = shlex.quote(python)
    return f"""\
# Plan Cascade demo: the agent is an EXAMPLE AGENT (canned changes, not an AI).
agent:
  default: example
  commands:
    example: "{py} {script} {{story_id}} {{worktree}}"
gates:
  detect: false
  max_retries: 1
  custom:
    - name: compile
      command: "{py} -m compileall -q ."
    - name: readme
      command: "grep -q '^# textkit' README.md"
execution:
  max_parallel: 2
"""


async def create_sample_repo(root: Path, *, python: str, agent: Path) -> None:
    """A git repository at `root` on `main`: the package, its README, a test and the config."""
    files = {**FILES, ".github/plan-cascade.yml": demo_config(python, agent)}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    identity = {"GIT_AUTHOR_NAME": "Demo", "GIT_AUTHOR_EMAIL": "demo@example.com"}
    identity |= {"GIT_COMMITTER_NAME": "Demo", "GIT_COMMITTER_EMAIL": "demo@example.com"}
    env = git_env(base=identity)
    for args in (
        ["init", "-q"],
        ["symbolic-ref", "HEAD", "refs/heads/main"],
        ["add", "-A"],
        ["commit", "-q", "--no-gpg-sign", "-m", "textkit 0.1.0"],
    ):
        await run_git(args, cwd=root, env=env)


async def run_demo(ctx: LocalContext, *, parent: Path | None = None) -> int:
    """Create the sample repository and PRD, run the plan, say where everything is.

    `parent` must be absolute: the example agent is run by its path from inside a worktree."""
    base = Path(tempfile.mkdtemp(prefix="plan-cascade-demo-", dir=parent))
    root = base / "textkit"
    root.mkdir()
    # The example agent is copied beside the repository: agents run sandboxed and see only
    # their worktree, system directories and their own program's directory.
    agent = base / "tools" / "demo_agent.py"
    agent.parent.mkdir()
    shutil.copyfile(demo_agent.__file__, agent)
    await create_sample_repo(root, python=sys.executable, agent=agent)
    prd = base / "prd.yaml"
    prd.write_text(PRD_YAML)
    console = ctx.console
    console.print(f"[bold]Plan Cascade demo[/bold] in {base}", highlight=False)
    console.print(f"[bold yellow]{EXAMPLE_AGENT_NOTE}[/bold yellow]", highlight=False)
    console.print("gates that really run: compile (python -m compileall), readme, each story's verification")
    tool_path = f"{Path(sys.executable).parent}:{SAFE_PATH}"
    demo_ctx = LocalContext(
        console=console, ask=None, llm_for=None, data_root=None, tool_path=tool_path, sandbox=ctx.sandbox
    )
    code = await start_run(RunRequest(repo=root, prd_file=prd, yes=True), demo_ctx)
    for line in closing_lines(base=base, root=root, prd=prd):
        console.print(line, soft_wrap=True, highlight=False)
    return code


def closing_lines(*, base: Path, root: Path, prd: Path) -> list[str]:
    """What the demo showed, where it is, and the next step on the user's own repository."""
    return [
        "STORY-002 failed its first attempt on purpose: the example agent plants a bug there (runs of "
        "spaces counted as words) to show a failing gate fed back to the agent, and the retry that passes.",
        f"demo repository: {root}",
        f"the PRD: {prd}",
        f"look at the branches: git -C {root} log --oneline --graph --all",
        f"{EXAMPLE_AGENT_NOTE}; remove {base} when done",
        "Next, on your own repository (any git repository with a commit), with a real agent: set "
        "ANTHROPIC_API_KEY (or PLAN_CASCADE_LLM_PROVIDER and that provider's key), then in it run",
        '  plan-cascade run "what to build, in a sentence"',
        f"or run a PRD you wrote, like {prd}:",
        "  plan-cascade run --prd prd.yaml",
    ]
