"""What the planner knows about an issue and its repository, as one Markdown document.

The caller gathers the data (this package makes no GitHub calls) and decides whose
words may reach the model: `IssueContext.comments` must hold ONLY comments by users
with write access to the repository, filtered by the caller. Everything written by
people is sanitised and fenced as untrusted data; the document is trimmed to a
token budget (README and file tree first, never the issue title).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pydantic import BaseModel, Field

from bot.llm.sanitize import fence_untrusted, sanitize_untrusted

CHARS_PER_TOKEN = 4
TRIMMED = "(trimmed)"

MANIFEST_NAMES = frozenset(
    "pyproject.toml setup.py setup.cfg requirements.txt Pipfile environment.yml package.json deno.json "
    "Cargo.toml go.mod pom.xml build.gradle build.gradle.kts settings.gradle Gemfile composer.json "
    "mix.exs pubspec.yaml Package.swift CMakeLists.txt meson.build Makefile Dockerfile "
    "docker-compose.yml compose.yaml".split()
)
"""File names that say how a project is built, what it depends on and how it runs."""
MANIFEST_SUFFIXES = (".csproj", ".fsproj", ".cabal", ".gemspec", ".nimble")
SKIPPED_DIRS = frozenset({"node_modules", "vendor", "third_party", "dist", "build", "target", ".git"})


class IssueContext(BaseModel):
    """The issue being planned, as the caller read it from GitHub."""

    repo: str = Field(description="Repository as owner/name.")
    number: int = Field(description="Issue number.")
    title: str = Field(description="Issue title (never trimmed).")
    body: str = Field(default="", description="Issue body, raw Markdown.")
    author: str = Field(default="", description="Login of the issue's author.")
    comments: list[tuple[str, str]] = Field(
        default_factory=list,
        description="(login, body) of comments by users WITH WRITE ACCESS only; the caller filters.",
    )
    notes: str = Field(default="", description="Text after `/plan-cascade plan` in the command comment.")
    labels: list[str] = Field(default_factory=list, description="Names of the issue's labels.")


class RepoContext(BaseModel):
    """What the planner sees of the repository's default branch."""

    readme: str | None = Field(default=None, description="README text, None when there is none.")
    file_tree: list[str] = Field(default_factory=list, description="Repository-relative file paths.")
    manifests: dict[str, str] = Field(
        default_factory=dict, description="Manifest path -> text (pyproject.toml, package.json, ...)."
    )


README_NAMES = ("README.md", "README.rst", "README")
MANIFESTS = ("pyproject.toml", "package.json", "Cargo.toml", "go.mod", "Makefile", "requirements.txt")


async def read_repo_context(
    read: Callable[[str], Awaitable[str | None]], file_tree: list[str]
) -> RepoContext:
    """The planner's view of a repository: the first README there is and the manifests (8,000
    characters each), each read with `read` (None when absent), beside `file_tree`."""
    readme = None
    for name in README_NAMES:
        readme = await read(name)
        if readme:
            break
    manifests = {}
    for name in MANIFESTS:
        text = await read(name)
        if text:
            manifests[name] = text[:8000]
    return RepoContext(readme=readme, file_tree=file_tree, manifests=manifests)


def select_manifests(paths: list[str]) -> list[str]:
    """The manifests among `paths` worth reading: top level and one directory deep, top level first."""
    chosen = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if not 1 <= len(parts) <= 2 or (len(parts) == 2 and parts[0] in SKIPPED_DIRS):
            continue
        if parts[-1] in MANIFEST_NAMES or parts[-1].endswith(MANIFEST_SUFFIXES):
            chosen.append(path)
    return sorted(dict.fromkeys(chosen), key=lambda p: (p.count("/"), p))


@dataclass
class _Parts:
    """The sanitised pieces of the document, trimmed in place until it fits."""

    header: str
    title: str
    body: str
    notes: str
    comments: list[tuple[str, str]]
    readme: str | None
    tree: list[str]
    manifests: dict[str, str]
    trimmed: set[str] = field(default_factory=set)
    dropped_paths: int = 0
    dropped_comments: int = 0


def _mark(parts: _Parts, name: str) -> str:
    return f" {TRIMMED}" if name in parts.trimmed else ""


def _render(parts: _Parts) -> str:
    out = [parts.header, "## Issue title", fence_untrusted("the issue title", parts.title)]
    body = fence_untrusted("the issue body", parts.body or "(empty)")
    out += [f"## Issue body{_mark(parts, 'body')}", body]
    if parts.notes:
        out += [
            f"## Notes given with the plan command{_mark(parts, 'notes')}",
            fence_untrusted("the plan command", parts.notes),
        ]
    if parts.comments or parts.dropped_comments:
        out.append("## Comments by collaborators with write access")
        if parts.dropped_comments:
            out.append(f"{TRIMMED} {parts.dropped_comments} earlier comment(s) left out.\n")
        out += [fence_untrusted(f"a comment by @{login}", body) for login, body in parts.comments]
    out.append("## Repository")
    if parts.readme is not None:
        readme = fence_untrusted("the README", parts.readme or "(empty)")
        out += [f"### README{_mark(parts, 'readme')}", readme]
    if parts.tree or parts.dropped_paths:
        more = [f"… and {parts.dropped_paths} more paths {TRIMMED}"] if parts.dropped_paths else []
        listing = "\n".join([*parts.tree, *more])
        out += [f"### File tree{_mark(parts, 'tree')}", fence_untrusted("the file tree", listing)]
    for path, text in parts.manifests.items():
        out += [f"### {path}{_mark(parts, path)}", fence_untrusted(path, text)]
    return "\n".join(out)


def _cut(text: str, excess: int) -> str:
    """`text` shortened by at least `excess` characters, at a line end when one is near."""
    keep = max(0, len(text) - excess)
    cut = text[:keep]
    newline = cut.rfind("\n")
    if newline >= keep * 0.8:
        cut = cut[:newline]
    return cut.rstrip() + ("\n…" if cut.strip() else "…")


def _shrink(parts: _Parts, excess: int) -> bool:
    """Trim the next piece in order (README, tree, manifests, comments, notes, body); False when done."""
    slack = excess + 64
    manifest = max(parts.manifests, key=lambda path: len(parts.manifests[path]), default=None)
    if parts.readme is not None and len(parts.readme) > 1:
        parts.readme = _cut(parts.readme, slack)
        parts.trimmed.add("readme")
    elif parts.tree:
        while parts.tree and slack > 0:
            slack -= len(parts.tree.pop()) + 1
            parts.dropped_paths += 1
        parts.trimmed.add("tree")
    elif manifest is not None and len(parts.manifests[manifest]) > 1:
        parts.manifests[manifest] = _cut(parts.manifests[manifest], slack)
        parts.trimmed.add(manifest)
    elif parts.comments:
        parts.comments.pop(0)
        parts.dropped_comments += 1
    elif len(parts.notes) > 1:
        parts.notes = _cut(parts.notes, slack)
        parts.trimmed.add("notes")
    elif len(parts.body) > 1:
        parts.body = _cut(parts.body, slack)
        parts.trimmed.add("body")
    else:
        return False
    return True


def _login(login: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\[\]-]", "", login)[:60] or "unknown"


def build_context(issue: IssueContext, repo: RepoContext, *, token_budget: int = 12000) -> str:
    """The issue and repository as sanitised, fenced Markdown of at most ~`token_budget` tokens."""
    labels = ", ".join(sanitize_untrusted(label, max_chars=60) for label in issue.labels) or "none"
    header = (
        f"# Issue {issue.repo}#{issue.number}\n"
        f"Author: @{_login(issue.author)} · Labels: {labels.replace(chr(10), ' ')}\n"
    )
    parts = _Parts(
        header=header,
        title=" ".join(sanitize_untrusted(issue.title, max_chars=1000).split()),
        body=sanitize_untrusted(issue.body),
        notes=sanitize_untrusted(issue.notes, max_chars=4000),
        comments=[(_login(login), sanitize_untrusted(body)) for login, body in issue.comments],
        readme=None if repo.readme is None else sanitize_untrusted(repo.readme),
        tree=[path for path in repo.file_tree if path.strip()],
        manifests={path: sanitize_untrusted(text) for path, text in repo.manifests.items()},
    )
    budget = token_budget * CHARS_PER_TOKEN
    document = _render(parts)
    while len(document) > budget and _shrink(parts, len(document) - budget):
        document = _render(parts)
    return document
