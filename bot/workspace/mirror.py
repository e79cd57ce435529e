"""A bare mirror of one repository, the shared object store of all its worktrees.

Layout: ``<root>/mirrors/<slug>.git``. Remote branches are fetched into
``refs/remotes/origin/*``, tags into ``refs/tags/*`` as the remote has them (a project's
version may come from them, inside the sandbox too); ``refs/heads/*`` holds the branches
we build locally and push. Use ``origin/<branch>`` as a base ref. For https URLs the installation token
comes from ``token_provider`` on every network call and travels only through env.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from bot.environment.setup import ENV_DIRS
from bot.errors import WorkspaceError
from bot.workspace.git import OUTPUT_LIMIT, GitResult, PushRejected, failure_message, git_env, run_git
from bot.workspace.turns import TurnLock

TokenProvider = Callable[[], Awaitable[str | None]]


class Pusher(Protocol):
    """Publishes a local branch of a mirror (see `Mirror.push`): `git push` by default, or GitHub
    making the commits through its API (`bot.publishing.verified`). Returns the sha the remote
    branch holds afterwards, which the mirror's local branch then holds too."""

    async def push(
        self, mirror: Mirror, branch: str, *, expected_remote_sha: str | None, force: bool
    ) -> str: ...


FETCH_REFSPEC = "+refs/heads/*:refs/remotes/origin/*"
FETCH = ("-c", "maintenance.auto=true", "fetch", "--prune", "--prune-tags", "--force", "origin")
"""Every fetch: branches as configured, tags exactly as the remote has them (without `--prune-tags
--force` a tag deleted or moved there stays, and `git describe` names a version gone), and git's
automatic upkeep (`maintenance run --auto`), once a run, which every other call leaves out."""
MIRROR_CONFIG_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "core.logallrefupdates",
        "extensions.objectformat",
        "remote.origin.url",
        "remote.origin.fetch",
        "user.useconfigonly",
    }
)
"""What `git clone --bare` and the bot write into a mirror's config; anything else is foreign."""
MADE_FILE = "plan-cascade-made"
"""In a mirror: `<local commit> <GitHub's copy>` per line, for commits GitHub made through its API."""
PUSHED_FILE = "plan-cascade-pushed"
"""In a mirror: `<sha> <branch>` per line, written before each push: the heads the bot pushed."""


def mirror_slug(clone_url: str) -> str:
    """A filesystem-safe name for ``clone_url``: host and path, credentials dropped."""
    parts = urlsplit(clone_url)
    if parts.scheme:
        raw = f"{parts.hostname or ''}/{parts.path}"
    else:  # scp-like ssh: git@github.com:owner/repo.git
        raw = clone_url.split("@", 1)[-1].replace(":", "/", 1)
    raw = re.sub(r"\.git/?$", "", raw.strip("/"))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("_.")
    return slug or "repo"


_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def file_bytes(path: str) -> bytes:
    """The file's bytes, read without the cost of a text file object (git's small files)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_ref(git_dir: Path, ref: str) -> str | None:
    """The sha `ref` names, read from the files as git writes them (a loose ref, else
    `packed-refs`) without starting git: "" when it is surely absent, None when unsure."""
    if ".." in ref.split("/") or not ref.startswith("refs/"):
        return None
    try:
        loose = file_bytes(str(git_dir / ref)).strip().decode("latin-1")  # a sha is ASCII: byte for char
    except FileNotFoundError:
        loose = None
    except OSError:
        return None
    if loose is not None:
        return loose if _SHA.match(loose) else None
    try:
        packed = (git_dir / "packed-refs").read_text()
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha if _SHA.match(sha) else None
    return ""


class Mirror:
    """A bare clone under ``root`` that fetches from and pushes to ``clone_url``."""

    def __init__(
        self,
        *,
        root: Path,
        clone_url: str,
        token_provider: TokenProvider | None = None,
        env: Mapping[str, str] | None = None,
        pusher: Pusher | None = None,
    ) -> None:
        self.root = root
        self.pusher = pusher
        """How `push` publishes; None: `git push`."""
        self._published: dict[str, str] | None = None
        """Local commit → the commit GitHub made of it through its API (`MADE_FILE`, read once)."""
        self.clone_url = clone_url
        self.path = root / "mirrors" / f"{mirror_slug(clone_url)}.git"
        self._token_provider = token_provider
        self._base_env = dict(env or {})
        self._lock = asyncio.Lock()
        self.worktree_lock = TurnLock()  # `git worktree add/remove/prune` write its config; adds first
        self.worktree_admins: dict[Path, Path] = {}
        """Worktree path → its entry in ``worktrees/`` as `admin_dir` last found it (a hint it confirms)."""
        self._verified: tuple[int, int, int, int] | None = None
        """The config file's (inode, size, mtime, ctime) when `verify_config` last passed it."""

    def local_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Env for git commands that do not talk to the remote (no token)."""
        return git_env(base={**self._base_env, **(extra or {})})

    async def remote_env(self) -> dict[str, str]:
        """Env for git commands that talk to the remote: with the token for https URLs.

        The mirror's config is checked first: a remote call (which carries the token) is never
        made with a config that someone other than the bot changed.
        """
        if self.exists():
            await self.verify_config()
        token = None
        if self._token_provider is not None and urlsplit(self.clone_url).scheme == "https":
            token = await self._token_provider()
        return git_env(token=token, base=self._base_env)

    async def verify_config(self) -> None:
        """Refuse to go on when the mirror's config holds anything the bot did not put there.

        Checked again whenever the file changed (its inode, size, mtime or ctime; ctime cannot be
        set back by anyone but the kernel), not on every remote call.
        """
        try:
            st = (self.path / "config").stat()
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            stamp = None
        if stamp is not None and stamp == self._verified:
            return
        await self._verify_config()
        self._verified = stamp

    async def _verify_config(self) -> None:
        result = await run_git(["config", "--file", "config", "--list"], cwd=self.path, env=self.local_env())
        problems = []
        fetch = []
        for line in result.stdout.splitlines():
            key, _, value = line.partition("=")
            key = key.lower()
            if key == "remote.origin.url" and value != self.clone_url:
                problems.append(f"remote.origin.url is {value!r}")
            elif key == "remote.origin.fetch":
                fetch.append(value)
            elif key not in MIRROR_CONFIG_KEYS:
                problems.append(key)
        if fetch not in ([], [FETCH_REFSPEC]):
            problems.append(f"remote.origin.fetch is {fetch}")
        if problems:
            raise WorkspaceError(
                f"the config of mirror {self.path.name} was changed outside the bot ({', '.join(problems)}): "
                "no fetch or push is made with it; delete the mirror directory to rebuild it"
            )

    async def git(
        self,
        *args: str,
        check: bool = True,
        remote: bool = False,
        max_output: int = OUTPUT_LIMIT,
        partial: bool = False,
        raw: bool = False,
    ) -> GitResult:
        """Run git inside the mirror; ``remote`` adds the token for commands that reach the remote.

        ``max_output`` and ``partial`` bound what is read of stdout, ``raw`` keeps its bytes
        (see `run_git`).
        """
        env = await self.remote_env() if remote else self.local_env()
        return await run_git(
            args, cwd=self.path, env=env, check=check, max_output=max_output, partial=partial, raw=raw
        )

    def exists(self) -> bool:
        """True when the bare clone is on disk."""
        return (self.path / "HEAD").is_file()

    async def ensure(self) -> None:
        """Clone the mirror if it is missing (idempotent, safe to call concurrently)."""
        async with self._lock:
            await self._ensure_locked()

    async def _ensure_locked(self) -> None:
        if self.exists():
            self.exclude_environments()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        try:
            env = await self.remote_env()
            await run_git(
                ["clone", "--bare", "--", self.clone_url, str(staging)], cwd=self.path.parent, env=env
            )
            for key, value in (
                ("remote.origin.fetch", FETCH_REFSPEC),
                ("user.useConfigOnly", "true"),
            ):
                await run_git(["config", "--local", key, value], cwd=staging, env=self.local_env())
            os.rename(staging, self.path)
            self.exclude_environments()
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        await self.git(*FETCH, remote=True)

    def exclude_environments(self) -> None:
        """Keep what setup installs in a worktree (`.venv/`, `node_modules/`) out of every commit."""
        if not self.exists():
            return  # the clone writes it when it is made
        exclude = self.path / "info" / "exclude"
        wanted = "".join(f"/{d}\n" for d in ENV_DIRS)
        current = exclude.read_text(errors="replace") if exclude.is_file() else ""
        if wanted not in current:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text(current + ("" if current.endswith("\n") or not current else "\n") + wanted)

    async def fetch(self) -> None:
        """Clone if needed (which fetches), else `FETCH` into ``refs/remotes/origin/*`` and
        ``refs/tags/*``: `ensure` and a fetch, with one fetch."""
        async with self._lock:
            if not self.exists():
                await self._ensure_locked()
                return
            self.exclude_environments()
            await self.git(*FETCH, remote=True)

    async def resolve(self, ref: str) -> str:
        """The commit sha ``ref`` names in the mirror (e.g. ``origin/main``, a sha, a local branch)."""
        result = await self.git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
        )
        if result.returncode != 0:
            raise WorkspaceError(f"ref {ref!r} does not name a commit in mirror {self.path.name}")
        return result.stdout.strip()

    async def default_branch(self) -> str:
        """The remote's default branch, asked from the remote (``ls-remote --symref``)."""
        result = await self.git("ls-remote", "--symref", "origin", "HEAD", remote=True)
        for line in result.stdout.splitlines():
            if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
                return line.removeprefix("ref: refs/heads/").removesuffix("\tHEAD")
        local = await self.git("symbolic-ref", "--short", "HEAD", check=False)
        if local.returncode == 0 and local.stdout.strip():
            return local.stdout.strip()
        raise WorkspaceError(f"cannot tell the default branch of {self.path.name}: the remote has no HEAD")

    async def tracking_sha(self, branch: str) -> str | None:
        """What the mirror last saw of the remote `branch` (its fetch or our push), or None."""
        ref = f"refs/remotes/origin/{branch}"
        found = read_ref(self.path, ref)
        if found is not None:
            return found or None
        result = await self.git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
        )
        return result.stdout.strip() if result.returncode == 0 else None

    async def remote_sha(self, branch: str) -> str | None:
        """The sha of ``branch`` on the remote right now, or None when it does not exist."""
        result = await self.git("ls-remote", "origin", f"refs/heads/{branch}", remote=True)
        for line in result.stdout.splitlines():
            sha, _, ref = line.partition("\t")
            if ref == f"refs/heads/{branch}":
                return sha
        return None

    async def push(self, branch: str, *, expected_remote_sha: str | None, force: bool = False) -> str:
        """Publish local ``refs/heads/<branch>`` to the remote branch of the same name; the sha
        the remote branch holds afterwards.

        ``expected_remote_sha`` is what we believe the remote holds: the push only lands if
        that still holds (``--force-with-lease``); without ``force`` the local branch must also
        contain it (a fast-forward). ``None`` means a new branch that must not exist yet,
        unless ``force``, which then pushes unconditionally. Raises :class:`PushRejected`.

        With a `pusher` it decides how: GitHub may make the commits itself (new shas, signed),
        and then the local branch (and every local branch on those commits) holds GitHub's.
        """
        local = read_ref(self.path, f"refs/heads/{branch}") or await self.resolve(f"refs/heads/{branch}")
        with (self.path / PUSHED_FILE).open("a") as out:  # before the push: a crash after it adopts it
            out.write(f"{local} {branch}\n")
        if self.pusher is not None:
            return await self.pusher.push(self, branch, expected_remote_sha=expected_remote_sha, force=force)
        await self.git_push(branch, expected_remote_sha=expected_remote_sha, force=force)
        return read_ref(self.path, f"refs/heads/{branch}") or await self.resolve(f"refs/heads/{branch}")

    def pushed(self, branch: str, sha: str) -> bool:
        """Whether the bot pushed `sha` to `branch` from this mirror (or GitHub made it of a commit
        the bot pushed there): the proof that a remote head is the bot's, never its author."""
        try:
            text = (self.path / PUSHED_FILE).read_text()
        except OSError:
            return False
        made = self._made()
        return any(
            name == branch and sha in (local, made.get(local))
            for local, _, name in (line.partition(" ") for line in text.splitlines())
        )

    def published_as(self, sha: str) -> str:
        """What the remote holds for local commit `sha`: GitHub's commit made of it, or itself."""
        return self._made().get(sha, sha)

    def remember(self, made: Mapping[str, str]) -> None:
        """Keep `made` (local commit → GitHub's copy) in the mirror, before GitHub's branch moves:
        after a crash the next push knows GitHub's copy of its commit and adopts it."""
        if not made:
            return
        known = self._made()
        with (self.path / MADE_FILE).open("a") as out:
            out.write("".join(f"{local} {github}\n" for local, github in made.items()))
        known.update(made)

    def _made(self) -> dict[str, str]:
        if self._published is None:
            self._published = {}
            try:
                text = (self.path / MADE_FILE).read_text()
            except OSError:
                text = ""
            for line in text.splitlines():
                local, _, github = line.partition(" ")
                if _SHA.match(local) and _SHA.match(github):
                    self._published[local] = github
        return self._published

    async def git_push(self, branch: str, *, expected_remote_sha: str | None, force: bool = False) -> None:
        """`git push` of local ``refs/heads/<branch>`` (see `push`); raises :class:`PushRejected`."""
        ref = f"refs/heads/{branch}"
        if expected_remote_sha is not None and not force:
            ancestor = await self.git("merge-base", "--is-ancestor", expected_remote_sha, ref, check=False)
            if ancestor.returncode != 0:
                raise PushRejected(
                    f"push of {branch} refused: {expected_remote_sha[:12]} is not an ancestor of the local "
                    "branch (not a fast-forward)"
                )
        args = ["push", "--porcelain", "--no-verify"]
        if expected_remote_sha is not None:
            args.append(f"--force-with-lease={ref}:{expected_remote_sha}")
        elif force:
            args.append("--force")
        else:
            args.append(f"--force-with-lease={ref}:")
        args += ["origin", f"{ref}:{ref}"]
        env = await self.remote_env()
        result = await run_git(args, cwd=self.path, env=env, check=False)
        if result.returncode == 0:
            return
        message = failure_message(args, cwd=self.path, env=env, result=result)
        rejected = [line for line in result.stdout.splitlines() if line.startswith("!")]
        if rejected:
            raise PushRejected(f"push of {branch} rejected ({rejected[0].split(chr(9))[-1]}): {message}")
        raise WorkspaceError(message)
