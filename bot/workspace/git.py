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
import contextlib
import os
import re
import selectors
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from bot.errors import WorkspaceError

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
    "-c", "maintenance.auto=false",
)  # fmt: skip
"""Options on every git call: nothing a repository or an agent wrote makes our git run a program.
Nor does git start its own upkeep after each commit (`maintenance.auto`, ~2.5 ms and a process
a commit, a dozen a run): the mirror's fetch asks for it once a run (`bot.workspace.mirror.FETCH`)."""

STDERR_TAIL = 2000
"""How many characters of stderr an error message keeps (the end, where git explains)."""

OUTPUT_LIMIT = 16 * 2**20
"""Bytes of stdout a git call reads at most unless it asks for less (`run_git`'s ``max_output``).

Repository content decides the size of much of git's output (a few KB pushed can print
hundreds of MB): nothing is read whole without a bound."""

STDERR_KEEP = 65536
"""Bytes of stderr kept (the end, where git explains); the rest is read and dropped."""

READ_CHUNK = 65536

_REDACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"x-access-token:[^@\s'\"]*", re.IGNORECASE), "x-access-token:***"),
    (re.compile(r"(authorization:\s*)[^\r\n'\"]*", re.IGNORECASE), r"\1***"),
    (re.compile(r"(\w+://)[^/@\s:]*:[^/@\s]*@"), r"\1***@"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), "***"),
)


class PushRejected(WorkspaceError):
    """The remote refused a push: not a fast-forward, or the lease no longer holds."""


class OutputTooLarge(WorkspaceError):
    """A git command printed more than its call's limit; git was killed, the rest never read."""


class GitResult(BaseModel):
    """What one git command returned."""

    model_config = ConfigDict(frozen=True)

    returncode: int = Field(description="Exit status of git.")
    stdout: str = Field(description="Standard output, decoded as UTF-8 (invalid bytes replaced).")
    stderr: str = Field(description="The end of standard error, decoded as UTF-8 (invalid bytes replaced).")
    truncated: bool = Field(
        default=False,
        description="stdout stopped at the call's limit: git was killed and the rest never read.",
    )
    raw: bytes = Field(default=b"", description="stdout as bytes, when the call asked for them (`raw`).")


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
    max_output: int = OUTPUT_LIMIT,
    partial: bool = False,
    raw: bool = False,
) -> GitResult:
    """Run ``git <args>`` in ``cwd`` with exactly ``env``.

    With ``raw`` the result also holds stdout's bytes as git wrote them (a blob's content).

    stdout is read in chunks and never past ``max_output`` bytes: at the limit git's process
    group is killed and the rest is never read. With ``partial`` the result then holds the
    first ``max_output`` bytes and says ``truncated``; without, :class:`OutputTooLarge` is
    raised. Of stderr only the last `STDERR_KEEP` bytes are kept.

    With ``check`` a non-zero exit raises :class:`WorkspaceError` naming the redacted
    command and the end of stderr (not for a result cut on purpose). A timeout always raises;
    the process group is killed on timeout and on cancellation.

    git is started, read and reaped by a worker thread (`GitProcess`), never on the event loop:
    starting a process holds its thread for a millisecond or more (longer on a busy machine),
    and the engine starts a dozen git processes a story.
    """
    running = GitProcess(["git", *HARDENING, *args], cwd=cwd, env=dict(env), max_output=max_output)
    job = asyncio.get_running_loop().run_in_executor(_THREADS, running.run)
    try:
        async with asyncio.timeout(timeout):
            returncode, out, err, truncated = await asyncio.shield(job)
    except TimeoutError:
        running.kill()
        raise WorkspaceError(f"`{describe(args, env)}` timed out after {timeout:g}s in {cwd}") from None
    except BaseException:
        running.kill()
        raise
    result = GitResult(
        returncode=returncode,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        truncated=truncated,
        raw=bytes(out) if raw else b"",
    )
    if truncated and not partial:
        raise OutputTooLarge(
            f"`{describe(args, env)}` printed more than {max_output:,} bytes in {cwd}: "
            "stopped reading (the repository's content is too large to read whole)"
        )
    if check and not truncated and result.returncode != 0:
        raise WorkspaceError(failure_message(args, cwd=cwd, env=env, result=result))
    return result


_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="plan-cascade-git")
"""Where git processes are started and read: each thread waits on its pipes with the GIL released."""


class GitProcess:
    """One git process, run to its end by a worker thread (`run`); `kill` may come from any thread."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], max_output: int) -> None:
        self.argv, self.cwd, self.env, self.max_output = argv, cwd, env, max_output
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False

    def kill(self) -> None:
        """SIGKILL git's process group (a session of its own); a git not started yet never starts."""
        with self._lock:
            self._stopped = True
            proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def run(self) -> tuple[int, bytearray, bytes, bool]:
        """Start git, read its stdout (at most `max_output` bytes) and its stderr's end, and reap it:
        (exit status, stdout, stderr's last `STDERR_KEEP` bytes, whether stdout was cut)."""
        with self._lock:
            if self._stopped:
                return -1, bytearray(), b"", False
            proc = self._proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        assert proc.stdout is not None and proc.stderr is not None
        out, tail, truncated = bytearray(), b"", False
        try:
            with selectors.PollSelector() as pipes:  # no descriptor of its own to make and close
                pipes.register(proc.stdout, selectors.EVENT_READ)
                pipes.register(proc.stderr, selectors.EVENT_READ)
                while pipes.get_map():
                    ready = pipes.select(timeout=1.0)
                    if not ready and self._stopped and proc.poll() is not None:
                        break  # killed: what an escaped child still holds open is not waited for
                    for key, _ in ready:
                        if key.fileobj is proc.stderr:
                            chunk = os.read(key.fd, READ_CHUNK)
                            tail = (tail + chunk)[-STDERR_KEEP:]
                        else:
                            chunk = os.read(key.fd, min(READ_CHUNK, self.max_output + 1 - len(out)))
                            out += chunk
                            if len(out) > self.max_output:
                                del out[self.max_output :]
                                truncated = True
                                pipes.unregister(key.fileobj)
                                self.kill()
                                continue
                        if not chunk:
                            pipes.unregister(key.fileobj)
            proc.wait()
        finally:
            if proc.returncode is None:
                self.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        return (proc.returncode if proc.returncode is not None else -1), out, tail, truncated


def failure_message(args: Sequence[str], *, cwd: Path, env: Mapping[str, str], result: GitResult) -> str:
    """A redacted one-paragraph explanation of a failed git command."""
    tail = result.stderr.strip()[-STDERR_TAIL:] or result.stdout.strip()[-STDERR_TAIL:]
    message = f"`{describe(args, env)}` failed with exit code {result.returncode} in {cwd}: {tail}"
    return redact(message, secrets=_secrets_in(env))
