"""User repositories (normal, non-bare), PRDs and config files for the local-mode tests."""

from __future__ import annotations

import json
from pathlib import Path

from tests.execution_support import git

WRITE_DONE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'


def make_user_repo(tmp: Path, *, config: str | None = None, name: str = "project") -> Path:
    """A developer's repository on `main` with one commit (and the config, when given)."""
    repo = tmp / name
    repo.mkdir()
    git("init", "-q", cwd=repo)
    git("symbolic-ref", "HEAD", "refs/heads/main", cwd=repo)
    (repo / "README.md").write_text("# project\n")
    if config is not None:
        (repo / ".github").mkdir()
        (repo / ".github" / "plan-cascade.yml").write_text(config)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "initial", cwd=repo)
    return repo


def script_config(script: Path, gates: str = "gates:\n  detect: false\n  strict: true\n") -> str:
    """A repo config whose only agent is the script (`$1` story id, `$2` worktree)."""
    return (
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        f"  sandbox: none\n{gates}"
    )


def prd(stories: list[tuple[str, list[str]]], *, title: str = "Story files") -> str:
    """A PRD whose stories each write `<id>.txt` containing `done` (checked by verification)."""
    lines = [f"version: 1\ntitle: {json.dumps(title)}\nsummary: Write one file per story.\nstories:"]
    for sid, deps in stories:
        name = sid.lower()
        lines.append(
            f"  - id: {sid}\n    title: Write {name}.txt\n    depends_on: [{', '.join(deps)}]\n"
            f"    acceptance_criteria: [\"{name}.txt contains the line 'done'\"]\n"
            f"    verification: grep -qx done {name}.txt"
        )
    return "\n".join(lines) + "\n"


CHAIN_OF_THREE_BATCHES = [
    ("STORY-001", []),
    ("STORY-002", []),
    ("STORY-003", ["STORY-001"]),
    ("STORY-004", ["STORY-003"]),
]


def branches(repo: Path, prefix: str = "plan-cascade") -> list[str]:
    """Local branches of the user's repository under `prefix/`."""
    out = git("for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}", cwd=repo)
    return sorted(out.splitlines())


def cli(*args: str) -> int:
    """`plan-cascade <args>` in this process, never reading a developer's .env."""
    from bot.cli import main

    return main(["--env-file", "/nonexistent/.env", *args])
