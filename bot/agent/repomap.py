"""A compact map of a repository for the story prompt: files and their main symbols, most relevant first.

Relevance to a story: its own files first, then files in the same directories, then files that
import one of its modules by name, then the rest, largest first. Hidden directories (except
``.github``), dependencies, caches and build output are skipped. Python symbols come from
:mod:`ast` (classes and functions with their signatures); other languages from line regexes.
The map is trimmed to a token budget (about four characters a token).

Reads files synchronously; call it through ``asyncio.to_thread`` from async code.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "env", "__pycache__", "build", "dist",
        "target", "out", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".next",
        ".idea", ".vscode", "coverage", "htmlcov", "vendor", ".gradle", ".terraform", "site-packages",
    }
)  # fmt: skip
"""Directory names never mapped: VCS metadata, dependencies, caches and build output."""

BINARY_SUFFIXES = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".ico", ".webp", ".pdf", ".zip", ".gz", ".tgz", ".bz2", ".xz",
        ".7z", ".jar", ".whl", ".so", ".dylib", ".dll", ".exe", ".bin", ".pyc", ".class", ".o", ".a",
        ".woff", ".woff2", ".ttf", ".otf", ".mp3", ".mp4", ".mov", ".sqlite", ".db", ".lock",
    }
)  # fmt: skip

MAX_FILES = 5000
"""Files looked at, at most (huge repositories get a partial map)."""

MAX_SCAN_BYTES = 256_000
"""Larger files are listed without symbols and not searched for mentions."""

MAX_SYMBOLS = 30
"""Symbols shown per file."""

_SYMBOL_LINE = re.compile(
    r"^\s*(?:export\s+(?:default\s+)?)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?"
    r"(?:function\*?|class|def|fn|func|interface|struct|trait|enum|type|const|impl)\b"
)
"""A line that declares something in JavaScript/TypeScript, Rust, Go, Ruby, Java-like code."""


@dataclass
class _File:
    rel: str
    size: int
    text: str | None  # None: too large or not text


def _skipped_dir(name: str) -> bool:
    hidden = name.startswith(".") and name != ".github"
    return hidden or name in SKIP_DIRS or name.endswith(".egg-info")


def _files(root: Path) -> list[_File]:
    found: list[_File] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(d))
        for name in sorted(names):
            path = Path(folder, name)
            if path.suffix.lower() in BINARY_SUFFIXES or path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            data = path.read_bytes() if size <= MAX_SCAN_BYTES else None
            if data is not None and b"\0" in data[:8192]:
                continue
            text = data.decode("utf-8", errors="replace") if data is not None else None
            found.append(_File(path.relative_to(root).as_posix(), size, text))
            if len(found) >= MAX_FILES:
                return found
    return found


def _python_symbols(text: str) -> list[str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []

    def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"

    symbols: list[str] = []
    for node in tree.body:
        if getattr(node, "name", "").startswith("_"):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            symbols.append(signature(node))
        elif isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(base) for base in node.bases)
            symbols.append(f"class {node.name}({bases})" if bases else f"class {node.name}")
            symbols += [
                "  " + signature(item)
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and (not item.name.startswith("_") or item.name == "__init__")
            ]
    return symbols


def _symbols(entry: _File) -> list[str]:
    if entry.text is None:
        return []
    if entry.rel.endswith(".py"):
        symbols = _python_symbols(entry.text)
    else:
        lines = entry.text.splitlines()
        # the declaration up to its body: "export function render(x: number): string {" -> "... string"
        symbols = [line.strip().split("{", 1)[0].rstrip()[:120] for line in lines if _SYMBOL_LINE.match(line)]
    return symbols[:MAX_SYMBOLS]


def _rank(files: list[_File], focus: list[str]) -> list[_File]:
    focus_order = {path: n for n, path in enumerate(focus)}
    focus_dirs = {PurePosixPath(path).parent.as_posix() for path in focus}
    stems = {PurePosixPath(path).stem for path in focus if PurePosixPath(path).stem not in ("__init__", "")}
    names = "|".join(map(re.escape, sorted(stems)))
    # a line that imports one of the focus modules: import/from/use/require/include ... <stem>
    mention = (
        re.compile(rf"(?m)^.*\b(?:import|from|use|require|include)\b.*\b(?:{names})\b") if stems else None
    )

    def key(entry: _File) -> tuple[int, int, str]:
        if entry.rel in focus_order:
            return (0, focus_order[entry.rel], entry.rel)
        if PurePosixPath(entry.rel).parent.as_posix() in focus_dirs:
            return (1, 0, entry.rel)
        if mention is not None and entry.text is not None and mention.search(entry.text):
            return (2, 0, entry.rel)
        return (3, -entry.size, entry.rel)

    return sorted(files, key=key)


def _normalise(path: str) -> str:
    return PurePosixPath(path.strip().removeprefix("./")).as_posix()


def repo_map(root: Path, *, focus_files: list[str], token_budget: int = 2000) -> str:
    """Files of ``root`` with their main symbols, most relevant to ``focus_files`` first, within budget."""
    budget = token_budget * 4 - 40  # room kept for the "more files" line
    ranked = _rank(_files(root), [_normalise(path) for path in focus_files])
    blocks: list[str] = []
    used = 0
    for shown, entry in enumerate(ranked):
        block = "\n".join([entry.rel, *("  " + symbol for symbol in _symbols(entry))])
        if used + len(block) + 1 > budget:
            block = entry.rel  # no room for its symbols: the path alone
        if used + len(block) + 1 > budget:
            blocks.append(f"[... {len(ranked) - shown} more files]")
            break
        blocks.append(block)
        used += len(block) + 1
    return "\n".join(blocks)
