"""The server's TLS trust settings, which setup and gates get: where a network that inspects TLS
keeps its certificate authority.

Behind a proxy that re-signs TLS with its own CA, each tool trusts that CA through its own setting:
OpenSSL, Python, Go and uv read `SSL_CERT_FILE`/`SSL_CERT_DIR`, requests `REQUESTS_CA_BUNDLE`, pip
`PIP_CERT`, curl `CURL_CA_BUNDLE`, git `GIT_SSL_CAINFO`, cargo `CARGO_HTTP_CAINFO`, and Node (npm,
corepack) trusts only its bundled roots plus `NODE_EXTRA_CA_CERTS`. They name public files, not
secrets: setup, and the gates and agents of a plan with setup, get the server's values without
`PLAN_CASCADE_SETUP_ENV`, and the files they name are mounted read-only in the sandbox (the system
directories already are). A file in a path the sandbox hides (the data dir, the App's key) is
never mounted; `plan-cascade doctor` says so, and when a file cannot be read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from bot.sandbox.confinement import SYSTEM_DIRS

CA_VARIABLES = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
)
"""The trust settings taken from the server's environment (each names a CA file, or a directory)."""
DIRECTORIES = ("SSL_CERT_DIR",)


def ca_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The trust settings `environ` sets (blank ones left out)."""
    return {name: environ[name] for name in CA_VARIABLES if environ.get(name, "").strip()}


def _paths(env: Mapping[str, str]) -> list[tuple[str, Path]]:
    """Each setting's path (`SSL_CERT_DIR` may list several, `:`-separated)."""
    found = []
    for name, value in env.items():
        parts = value.split(":") if name in DIRECTORIES else [value]
        found += [(name, Path(part.strip())) for part in parts if part.strip()]
    return found


def _inside(path: Path, folders: Iterable[Path]) -> bool:
    return any(path == f or path.is_relative_to(f) or f.is_relative_to(path) for f in folders)


def env_mounts(env: Mapping[str, str], *, hidden: Iterable[Path]) -> list[Path]:
    """What to mount read-only so the sandbox sees the files and folders `env`'s values name: each
    path (and where a symbolic link leads), unless the system directories show it already or the
    sandbox hides it."""
    hidden = [Path(h) for h in hidden]
    mounts: list[Path] = []
    for _, path in _paths(env):
        if not path.is_absolute() or not path.exists():
            continue
        for candidate in dict.fromkeys([path, path.resolve()]):
            system = any(candidate.is_relative_to(d) for d in SYSTEM_DIRS)
            if not system and not _inside(candidate, hidden) and candidate not in mounts:
                mounts.append(candidate)
    return mounts


def ca_problems(env: Mapping[str, str], *, hidden: Iterable[Path]) -> list[str]:
    """Why setup could not read a file the trust settings name (none when it can)."""
    hidden = [Path(h) for h in hidden]
    problems = []
    for name, path in _paths(env):
        wanted = "directory" if name in DIRECTORIES else "file"
        if not path.is_absolute():
            problems.append(f"{name}={path} is a relative path: the sandbox runs elsewhere")
        elif not (path.is_dir() if wanted == "directory" else path.is_file()):
            problems.append(f"{name}={path}: no such {wanted}")
        elif not os.access(path, os.R_OK):
            problems.append(f"{name}={path} cannot be read by this server's user")
        elif _inside(path.resolve(), hidden):
            problems.append(f"{name}={path} is in the data dir or the App key's path: the sandbox hides it")
    return problems
