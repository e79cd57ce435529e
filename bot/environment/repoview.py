"""A repository as detection sees it: its file paths and a way to read one. Pure.

Setup detection (at the plan's base, from GitHub or git) and gate detection (in a story's
worktree) both look at a repository through a `RepoView`, so they agree on what a project
declares. The view remembers which files were consulted: the plan shows them.
"""

from __future__ import annotations

import configparser
import json
import tomllib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RepoView:
    """The repository's file paths (relative, `/`-separated) and `read`, which gives a file's text."""

    paths: frozenset[str]
    read: Callable[[str], str | None]
    consulted: set[str] = field(default_factory=set)
    """Files whose presence or text detection used (recorded by `has` and `text`)."""

    @classmethod
    def of(cls, paths: Collection[str], read: Callable[[str], str | None]) -> RepoView:
        return cls(frozenset(paths), read)

    def has(self, path: str) -> bool:
        """Whether the file `path` exists (recorded when it does)."""
        if path in self.paths:
            self.consulted.add(path)
            return True
        return False

    def text(self, path: str) -> str | None:
        """The text of `path`, or None when it is absent or unreadable."""
        if path not in self.paths:
            return None
        found = self.read(path)
        if found is not None:
            self.consulted.add(path)
        return found

    def toml(self, path: str) -> dict[str, Any]:
        """`path` parsed as TOML; an empty dict when absent or invalid."""
        try:
            return tomllib.loads(self.text(path) or "")
        except tomllib.TOMLDecodeError:
            return {}

    def json(self, path: str) -> dict[str, Any]:
        """`path` parsed as a JSON object; an empty dict when absent, invalid or not an object."""
        try:
            data = json.loads(self.text(path) or "{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def ini(self, path: str) -> configparser.ConfigParser:
        """`path` parsed as INI (tox.ini, setup.cfg, pytest.ini); empty when absent or invalid."""
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(self.text(path) or "")
        except configparser.Error:
            return configparser.ConfigParser(interpolation=None)
        return parser

    def under(self, folder: str) -> list[str]:
        """Every file path below `folder` (at any depth), sorted."""
        prefix = folder.rstrip("/") + "/"
        return sorted(p for p in self.paths if p.startswith(prefix))

    def top_level(self) -> list[str]:
        """The files at the repository's top."""
        return sorted(p for p in self.paths if "/" not in p)


def table(data: Any, *keys: str) -> dict[str, Any]:
    """`data[k1][k2]...` if every step is a table, else an empty dict."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def strings(items: Any) -> list[str]:
    """The string entries of a list (anything else gives an empty list)."""
    return [item for item in items if isinstance(item, str)] if isinstance(items, list) else []
