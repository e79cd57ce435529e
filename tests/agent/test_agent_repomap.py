"""repo_map on a small real tree: ranking by relevance, symbols, skipped paths, token budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent import repo_map


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    files = {
        "src/limiter.py": "class Limiter:\n    def allow(self, key: str) -> bool:\n        return True\n"
        "    def _private(self):\n        pass\n\ndef _helper():\n    pass\n",
        "src/other.py": "def other() -> None:\n    pass\n",
        "app/main.py": "from src.limiter import Limiter\n\n"
        "async def serve(port: int = 8000) -> None:\n    pass\n",
        "app/unrelated.py": "def unrelated():\n    return 'limiter is just a word here'\n",
        "web/ui.ts": "export function render(x: number): string {\n  return ''\n}\nexport class View {}\n",
        "lib/big.py": "x = 1\n" * 2000,
        "lib/small.py": "y = 2\n",
        "node_modules/dep/index.js": "function hidden() {}\n",
        ".venv/lib/site.py": "def hidden(): pass\n",
        "build/out.py": "def hidden(): pass\n",
        ".cache/thing.py": "def hidden(): pass\n",
        ".github/workflows/ci.yml": "on: push\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\0\0")
    (root / "data.bin").write_bytes(b"abc\0def")
    return root


def paths(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith((" ", "["))]


def test_focus_files_first_then_neighbours_then_importers_then_by_size(tree: Path) -> None:
    order = paths(repo_map(tree, focus_files=["./src/limiter.py", "src/new_module.py"], token_budget=5000))
    assert order[:3] == ["src/limiter.py", "src/other.py", "app/main.py"]
    rest = order[3:]
    assert rest.index("lib/big.py") < rest.index("lib/small.py")
    assert set(order) == {
        "src/limiter.py", "src/other.py", "app/main.py", "app/unrelated.py", "web/ui.ts",
        "lib/big.py", "lib/small.py", ".github/workflows/ci.yml",
    }  # fmt: skip


def test_symbols_come_with_their_signatures(tree: Path) -> None:
    text = repo_map(tree, focus_files=["src/limiter.py"], token_budget=5000)
    block = text.split("src/other.py")[0]
    assert block == "src/limiter.py\n  class Limiter\n    def allow(self, key: str) -> bool\n"
    assert "app/main.py\n  async def serve(port: int=8000) -> None\n" in text
    assert "web/ui.ts\n  export function render(x: number): string\n  export class View\n" in text


def test_the_map_respects_the_token_budget(tree: Path) -> None:
    text = repo_map(tree, focus_files=["src/limiter.py"], token_budget=30)
    assert len(text) <= 30 * 4
    assert text.startswith("src/limiter.py\n")
    assert text.splitlines()[-1].endswith("more files]")
    assert len(repo_map(tree, focus_files=[], token_budget=5000)) > len(text)
