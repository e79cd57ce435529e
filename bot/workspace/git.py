"""Run git as a subprocess with an explicit, minimal environment.

Every call names its ``cwd`` and its ``env``; nothing here reads or changes the
process-wide state (no ``os.chdir``, no ``os.environ`` edits, no global git config).
An installation token travels only through ``GIT_CONFIG_*`` environment variables,
so it never lands in ``.git/config`` nor in a command line, and error messages are
redacted before they leave this module.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from bot.errors import WorkspaceError
from bot.workspace.process import kill_process_group

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH used when the caller's ``base`` does not provide one."""

DEFAULT_HOME = "/nonexistent"
"""HOME used when the caller's ``base`` does not provide one; git copes with a missing HOME."""

HARDENING = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.untrackedCache=false",
    "-c", "credential.helper=",
    "-c", "protocol.ext.allow=never",
)  # fmt: skip
"""Options on every git call: nothing a repository or an agent wrote makes our git run a program."""

STDERR_TAIL = 2000
"""How many characters of stderr an error message keeps (the end, where git explains)."""

_REDACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"x-access-token:[^@\s'\"]*", re.IGNORECASE), "x-access-token:***"),
    (re.compile(r"(authorization:\s*)[^\r\n'\"]*", re.IGNORECASE), r"\1***"),
    (re.compile(r"(\w+://)[^/@\s:]*:[^/@\s]*@"), r"\1***@"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), "***"),
)


class PushRejected(WorkspaceError):
    """The remote refused a push: not a fast-forward, or the lease no longer holds."""


class GitResult(BaseModel):
    """What one git command returned."""

    model_config = ConfigDict(frozen=True)

    returncode: int = Field(description="Exit status of git.")
    stdout: str = Field(description="Standard output, decoded as UTF-8 (invalid bytes replaced).")
    stderr: str = Field(description="Standard error, decoded as UTF-8 (invalid bytes replaced).")


def redact(text: str, *, secrets: Sequence[str] = ()) -> str:
    """Return ``text`` with tokens, auth headers, URL credentials and the given secrets masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def auth_header(token: str) -> str:
    """The ``http.extraHeader`` value GitHub accepts for an installation token."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return f"AUTHORIZATION: basic {basic}"


def git_env(*, token: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Build the whole environment for a git subprocess.

    ``base`` supplies extra variables (HOME, SSH_AUTH_SOCK, GIT_AUTHOR_NAME, ...) and may
    override PATH and HOME; the isolation variables below always win. With ``token``
    the https auth header is passed as environment config (``GIT_CONFIG_COUNT``).
    """
    env: dict[str, str] = {"PATH": DEFAULT_PATH, "HOME": DEFAULT_HOME}
    env.update(base or {})
    env.update(
        {
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
        }
    )
    for name in [name for name in env if name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))]:
        del env[name]
    env.pop("GIT_CONFIG_COUNT", None)
    if token:
        env.update(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": auth_header(token),
            }
        )
    return env


def _secrets_in(env: Mapping[str, str]) -> list[str]:
    """Values in ``env`` that must never appear in a message (the auth header and its parts)."""
    secrets: list[str] = []
    for name, value in env.items():
        if name.startswith("GIT_CONFIG_VALUE_") and value:
            secrets.append(value)
            secrets.extend(part for part in value.split() if len(part) >= 8)
    return secrets


def describe(args: Sequence[str], env: Mapping[str, str]) -> str:
    """A printable, redacted form of ``git <args>`` (never any env value)."""
    return redact(" ".join(["git", *args]), secrets=_secrets_in(env))


async def run_git(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 300,  # noqa: ASYNC109 - the timeout must kill git's process group
    check: bool = True,
) -> GitResult:
    """Run ``git <args>`` in ``cwd`` with exactly ``env``.

    With ``check`` a non-zero exit raises :class:`WorkspaceError` naming the redacted
    command and the end of stderr. A timeout always raises; the process group is killed
    on timeout and on cancellation.
    """
    proc = await asyncio.create_subprocess_exec(
        "git",
        *HARDENING,
        *args,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        await kill_process_group(proc)
        raise WorkspaceError(f"`{describe(args, env)}` timed out after {timeout:g}s in {cwd}") from None
    except BaseException:
        await kill_process_group(proc)
        raise
    result = GitResult(
        returncode=proc.returncode if proc.returncode is not None else -1,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
    )
    if check and result.returncode != 0:
        raise WorkspaceError(failure_message(args, cwd=cwd, env=env, result=result))
    return result


def failure_message(args: Sequence[str], *, cwd: Path, env: Mapping[str, str], result: GitResult) -> str:
    """A redacted one-paragraph explanation of a failed git command."""
    tail = result.stderr.strip()[-STDERR_TAIL:] or result.stdout.strip()[-STDERR_TAIL:]
    message = f"`{describe(args, env)}` failed with exit code {result.returncode} in {cwd}: {tail}"
    return redact(message, secrets=_secrets_in(env))
