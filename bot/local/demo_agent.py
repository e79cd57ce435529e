"""The demo's EXAMPLE AGENT: writes canned, story-specific changes. It is not an AI.

`python -m bot.local.demo_agent STORY-ID WORKTREE` writes the files the demo's story asks
for. STORY-002 is written with a bug first, so the demo shows a failing gate and a retry:
on the second run the file is there with the bug, and the agent fixes it. Standard library
only, so it runs with the scrubbed environment agents get.
"""

from __future__ import annotations

import sys
from pathlib import Path

SLUG = '''"""Turn titles into URL slugs."""

import re


def slugify(text: str) -> str:
    """`Hello, World!` -> `hello-world`."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''

COUNT_BUGGY = '''"""Count words."""


def word_count(text: str) -> int:
    """How many words `text` has."""
    return len(text.split(" "))  # canned bug: runs of spaces count as words
'''

COUNT = '''"""Count words."""


def word_count(text: str) -> int:
    """How many words `text` has."""
    return len(text.split())
'''

CLI = '''"""`python -m textkit.cli TEXT` prints the slug and the word count of TEXT."""

import sys

from textkit.count import word_count
from textkit.slug import slugify


def main(argv: list[str]) -> str:
    """The line printed for the arguments."""
    text = " ".join(argv)
    return f"{slugify(text)} {word_count(text)}"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
'''

USAGE = """
## Usage

- `textkit.slug.slugify("Hello, World!")` returns `"hello-world"`.
- `textkit.count.word_count("a b  c")` returns `3`.
- `python -m textkit.cli Hello World` prints `hello-world 2`.
"""

TEST_CLI = '''"""Tests of the command line."""

from textkit.cli import main


def test_main() -> None:
    assert main(["Hello", "World"]) == "hello-world 2"


if __name__ == "__main__":
    test_main()
    print("ok")
'''


def write_story(story_id: str, root: Path) -> str:
    """Write the canned change of one story under `root`; returns what was done."""
    package = root / "textkit"
    if story_id == "STORY-001":
        (package / "slug.py").write_text(SLUG)
        return "wrote textkit/slug.py"
    if story_id == "STORY-002":
        target = package / "count.py"
        if target.exists() and "canned bug" in target.read_text():
            target.write_text(COUNT)
            return "fixed the bug in textkit/count.py (retry after the failing gate)"
        target.write_text(COUNT_BUGGY)
        return "wrote textkit/count.py (with a deliberate bug, to show a retry)"
    if story_id == "STORY-003":
        (package / "cli.py").write_text(CLI)
        return "wrote textkit/cli.py"
    if story_id == "STORY-004":
        readme = root / "README.md"
        readme.write_text(readme.read_text().rstrip("\n") + "\n" + USAGE)
        return "added a Usage section to README.md"
    if story_id == "STORY-005":
        (root / "tests" / "test_cli.py").write_text(TEST_CLI)
        return "wrote tests/test_cli.py"
    raise SystemExit(f"example agent: no canned change for {story_id}")


def main(argv: list[str]) -> int:
    """Entry point: `STORY-ID WORKTREE`."""
    if len(argv) != 2:
        print("usage: python -m bot.local.demo_agent STORY-ID WORKTREE", file=sys.stderr)
        return 2
    done = write_story(argv[0], Path(argv[1]))
    print(f"example agent (canned changes, not an AI): {argv[0]}: {done}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
