"""git_env and run_git: isolation, token handling and redacted errors."""

from __future__ import annotations

import asyncio
import base64
import http.server
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from bot.errors import WorkspaceError
from bot.workspace import Mirror, git_env, redact, run_git
from bot.workspace.git import OUTPUT_LIMIT, STDERR_KEEP, OutputTooLarge
from tests.processes import live_with_arg, unique_sleep

TOKEN = "ghs_S3cretTokenValue0123456789abcdefXYZ"
ENCODED = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()


def test_git_env_is_minimal_and_isolated() -> None:
    env = git_env(base={"HOME": "/srv/home"})
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/srv/home",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }


def test_git_env_isolation_cannot_be_overridden_by_base() -> None:
    env = git_env(base={"GIT_CONFIG_GLOBAL": "/home/me/.gitconfig", "GIT_CONFIG_COUNT": "3"})
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert "GIT_CONFIG_COUNT" not in env


def test_git_env_passes_token_as_env_config_header() -> None:
    env = git_env(token=TOKEN)
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"] == f"AUTHORIZATION: basic {ENCODED}"


def test_redact_masks_tokens_headers_and_url_credentials() -> None:
    text = (
        f"fatal: https://x-access-token:{TOKEN}@github.com/o/r.git "
        f"header AUTHORIZATION: basic {ENCODED} and https://user:pw@example.com/x"
    )
    cleaned = redact(text)
    assert TOKEN not in cleaned
    assert ENCODED not in cleaned
    assert "pw@" not in cleaned
    assert "github.com/o/r.git" in cleaned


async def test_run_git_returns_output(tmp_path: Path, home: Path) -> None:
    result = await run_git(
        ["init", "-q", "-b", "trunk", "repo"], cwd=tmp_path, env=git_env(base={"HOME": str(home)})
    )
    assert result.returncode == 0
    branch = await run_git(["symbolic-ref", "HEAD"], cwd=tmp_path / "repo", env=git_env())
    assert branch.stdout.strip() == "refs/heads/trunk"


async def test_run_git_failure_raises_with_command_and_stderr(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as caught:
        await run_git(["rev-parse", "--verify", "no-such-ref"], cwd=tmp_path, env=git_env())
    assert "git rev-parse --verify no-such-ref" in caught.value.message
    assert "not a git repository" in caught.value.message


async def test_run_git_check_false_returns_failure(tmp_path: Path) -> None:
    result = await run_git(["rev-parse", "HEAD"], cwd=tmp_path, env=git_env(), check=False)
    assert result.returncode != 0
    assert "not a git repository" in result.stderr


async def test_env_token_is_visible_to_git_but_not_written_to_config(tmp_path: Path, home: Path) -> None:
    env = git_env(token=TOKEN, base={"HOME": str(home)})
    await run_git(["init", "-q", "repo"], cwd=tmp_path, env=env)
    shown = await run_git(
        ["config", "--show-scope", "--get-all", "http.extraheader"], cwd=tmp_path / "repo", env=env
    )
    assert shown.stdout.strip() == f"command\tAUTHORIZATION: basic {ENCODED}"
    assert TOKEN not in (tmp_path / "repo" / ".git" / "config").read_text()
    assert ENCODED not in (tmp_path / "repo" / ".git" / "config").read_text()


async def test_https_mirror_error_never_shows_the_token(tmp_path: Path, home: Path) -> None:
    async def token() -> str:
        return TOKEN

    mirror = Mirror(
        root=tmp_path, clone_url="https://127.0.0.1:9/x.git", token_provider=token, env={"HOME": str(home)}
    )
    with pytest.raises(WorkspaceError) as caught:
        await mirror.ensure()
    message = caught.value.message
    assert "git clone --bare -- https://127.0.0.1:9/x.git" in message
    assert TOKEN not in message
    assert ENCODED not in message
    assert not mirror.exists()
    assert list((tmp_path / "mirrors").iterdir()) == []  # the failed clone left nothing behind


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(403)
        self.end_headers()
        self.wfile.write(b"denied")

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[str | None]]]:
    """A loopback HTTP server that records the Authorization header git sends."""
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/o/r.git", _Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


async def test_token_reaches_the_server_only_as_a_header(
    tmp_path: Path, home: Path, recording_server: tuple[str, list[str | None]]
) -> None:
    url, seen = recording_server
    env = git_env(token=TOKEN, base={"HOME": str(home)})
    with pytest.raises(WorkspaceError) as caught:
        await run_git(["ls-remote", url], cwd=tmp_path, env=env, timeout=30)
    assert seen and seen[0] == f"basic {ENCODED}"
    assert TOKEN not in caught.value.message
    assert ENCODED not in caught.value.message


async def test_run_git_timeout_raises_and_kills(tmp_path: Path, home: Path) -> None:
    env = git_env(base={"HOME": str(home), "GIT_SSH_COMMAND": "sleep 30;"})
    with pytest.raises(WorkspaceError, match=r"timed out after 0\.5s"):
        await run_git(["ls-remote", "ssh://example.invalid/x.git"], cwd=tmp_path, env=env, timeout=0.5)


def flood(marker: str, *, to_stderr: bool = False) -> list[str]:
    """git arguments that print `marker` lines forever (an alias: git runs it in its group)."""
    return ["-c", f"alias.flood=!yes {marker}{' >&2' if to_stderr else ''}", "flood"]


async def test_run_git_stops_reading_at_its_limit_and_kills_git(tmp_path: Path) -> None:
    marker = f"flood-{uuid.uuid4().hex}"
    result = await run_git(
        flood(marker), cwd=tmp_path, env=git_env(), max_output=100_000, partial=True, timeout=20
    )
    assert result.truncated is True
    assert len(result.stdout) == 100_000 and result.stdout.startswith(f"{marker}\n")
    assert live_with_arg(marker) == []  # the endless printer was killed, not left writing


async def test_run_git_refuses_output_over_its_limit_unless_partial_is_asked(tmp_path: Path) -> None:
    with pytest.raises(OutputTooLarge, match="printed more than 4,096 bytes"):
        await run_git(flood(f"flood-{uuid.uuid4().hex}"), cwd=tmp_path, env=git_env(), max_output=4096)
    assert OUTPUT_LIMIT == 16 * 2**20  # every other read is bounded too


async def test_run_git_keeps_only_the_end_of_stderr(tmp_path: Path) -> None:
    marker = f"flood-{uuid.uuid4().hex}"
    args = ["-c", f"alias.noisy=!yes {marker} | head -c 3000000 >&2; exit 3", "noisy"]
    result = await run_git(args, cwd=tmp_path, env=git_env(), check=False, timeout=20)
    assert result.returncode == 3 and result.truncated is False
    assert len(result.stderr) == STDERR_KEEP and marker in result.stderr[-200:]  # the end, kept


async def test_run_git_output_exactly_at_the_limit_is_whole(tmp_path: Path) -> None:
    args = ["-c", "alias.some=!head -c 5000 /dev/zero", "some"]
    result = await run_git(args, cwd=tmp_path, env=git_env(), max_output=5000, partial=True)
    assert result.truncated is False and len(result.stdout) == 5000


async def test_run_git_starts_git_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a process holds its thread for a millisecond or more: never the event loop's."""
    import subprocess

    threads: list[str] = []
    real = subprocess.Popen

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            threads.append(threading.current_thread().name)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    result = await run_git(["--version"], cwd=tmp_path, env=git_env())
    assert result.stdout.startswith("git version")
    assert threads and threading.main_thread().name not in threads


async def test_run_git_cancelled_kills_git_and_what_it_started(tmp_path: Path) -> None:
    marker = unique_sleep()
    task = asyncio.ensure_future(
        run_git(["-c", f"alias.slow=!sleep {marker}", "slow"], cwd=tmp_path, env=git_env())
    )
    for _ in range(100):  # until git has started its alias
        await asyncio.sleep(0.05)
        if live_with_arg(marker):
            break
    assert live_with_arg(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if not live_with_arg(marker):
            break
        await asyncio.sleep(0.05)
    assert live_with_arg(marker) == []


async def test_run_git_timeout_kills_what_git_started(tmp_path: Path) -> None:
    marker = unique_sleep()
    with pytest.raises(WorkspaceError, match=r"timed out after 0\.5s"):
        await run_git(["-c", f"alias.slow=!sleep {marker}", "slow"], cwd=tmp_path, env=git_env(), timeout=0.5)
    for _ in range(100):
        if not live_with_arg(marker):
            break
        await asyncio.sleep(0.05)
    assert live_with_arg(marker) == []
