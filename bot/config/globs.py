"""Path globs as `.gitignore` writes them, shared by the deny list, the sandbox and the tools. Pure."""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable


def is_denied(path: str, globs: Iterable[str]) -> bool:
    """Whether the repository-relative `path`, or a directory above it, matches one of `globs`.

    fnmatch-style, as in ``.gitignore``: ``*`` and ``?`` stay within one directory, ``[abc]``
    is a character class, ``**`` crosses directories (``**/`` also matches no directory). A glob
    without ``/`` matches a name at any depth (``*.pem``), a leading ``/`` anchors it to the
    root, and a glob matching a directory covers everything below it. ``./``, ``..`` and a
    leading ``/`` in `path` are resolved first: ``./.github/workflows/ci.yml`` is denied by
    ``.github/workflows/**``.
    """
    parts = posixpath.normpath("/" + path).lstrip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    for glob in globs:
        glob = glob.strip().removeprefix("./").rstrip("/")
        anywhere = "/" not in glob
        pattern = _glob_regex(glob.lstrip("/"))
        if glob and any(pattern.fullmatch(p.rsplit("/", 1)[-1] if anywhere else p) for p in prefixes):
            return True
    return False


@functools.lru_cache(maxsize=256)
def _glob_regex(glob: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(glob):
        end = glob.find("]", i + 2 + (glob[i + 1 : i + 2] == "!")) if glob[i] == "[" else -1
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] in "*?":
            out.append("[^/]*" if glob[i] == "*" else "[^/]")
            i += 1
        elif end > 0:  # a class; "]" right after "[" or "[!" is a member, as in fnmatch
            body = glob[i + 1 : end].replace("\\", "\\\\").replace("[", "\\[")
            out.append("(?!/)[" + ("^" + body[1:] if body[:1] == "!" else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)
