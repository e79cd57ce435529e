"""The Git database in the fake GitHub, on its bare repository, and `GET /users/{login}`.

- `POST /git/blobs`, `/git/trees` (`base_tree`, entries by `sha` or `content`, `sha: null`
  removes), `/git/commits`, `GET /git/commits/{sha}`, `POST /git/refs`,
  `PATCH /git/refs/heads/{b}` (`force: false` refuses a non-fast-forward), and GraphQL
  `updateRefs` (`beforeOid` a compare-and-swap, all zeros: must not exist; atomic).
- A commit made through `POST /git/commits` by an App's token with no `author`, `committer` or
  `signature` is signed by GitHub (a `gpgsig` header; GitHub is the committer, the App's bot the
  author): its `verification` says `verified: true`. Every other commit is `unsigned`; the
  merge button's merge and squash commits are GitHub's and signed, rebased ones are not.
- `GET /rules/branches/{branch}` lists the rules `fake_github_rules` keeps; a ref update to
  commits GitHub did not sign is refused where a `required_signatures` rule covers the branch.
"""

from __future__ import annotations

import base64
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing import fake_github_git as g
from bot.testing import fake_github_gitwrite as gw
from bot.testing.fake_github_branches import pushed
from bot.testing.fake_github_model import FakeRepo, HttpError, invalid, now_iso
from bot.testing.fake_github_rules import (
    RULE_VIOLATION,
    check_rules,
    requires_signatures,
    rules_for,
    sign,
    unsigned_new,
)

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"
SIGNATURE = (
    "-----BEGIN PGP SIGNATURE-----\n\nwsBcBAABCAAQBQJ{stamp}FAKEGITHUB\n=fake\n-----END PGP SIGNATURE-----"
)
MODES = {"100644": "blob", "100755": "blob", "120000": "blob", "160000": "commit", "040000": "tree"}


def _hash(git_dir: Path, kind: str, content: bytes) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "hash-object", "-t", kind, "-w", "--stdin"],
        input=content,
        capture_output=True,
        check=False,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
    )
    if done.returncode != 0:
        raise HttpError(422, f"invalid {kind}: {done.stderr.decode(errors='replace').strip()[:200]}")
    return done.stdout.decode().strip()


def _exists(git_dir: Path, sha: str, kind: str | None = None) -> bool:
    if not g.is_sha(sha):
        return False
    done = g.run_git(git_dir, "cat-file", "-t", sha)
    return done.returncode == 0 and (kind is None or done.stdout.strip() == kind)


def signed_commit(fake: FakeGitHub, repo: FakeRepo, *, tree: str, parents: list[str], message: str) -> str:
    """A commit GitHub makes for the App: the App's bot the author, GitHub the committer, signed."""
    git_dir = repo.git_dir
    assert git_dir is not None
    stamp = f"{int(time.time())} +0000"
    bot = fake.actor
    author = f"{bot} <{fake.noreply(bot)}> {stamp}"
    web_flow = fake.web_flow
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents), f"author {author}"]
    lines.append(f"committer {web_flow.name} <{web_flow.email}> {stamp}")
    signature = SIGNATURE.format(stamp=stamp.split()[0])
    lines.append("gpgsig " + signature.replace("\n", "\n "))
    raw = "\n".join(lines) + "\n\n" + message
    sha = _hash(git_dir, "commit", raw.encode())
    sign(repo, sha)
    return sha


def verification(repo: FakeRepo, sha: str) -> dict[str, Any]:
    """A commit's `verification` as the commits APIs show it."""
    if sha in repo.signed:
        return {"verified": True, "reason": "valid", "signature": "-----BEGIN PGP SIGNATURE-----…",
                "payload": f"tree …\n(commit {sha})", "verified_at": now_iso()}  # fmt: skip
    return {"verified": False, "reason": "unsigned", "signature": None, "payload": None, "verified_at": None}


def git_commit_json(fake: FakeGitHub, repo: FakeRepo, sha: str) -> dict[str, Any]:
    git_dir = repo.git_dir
    commit = g.read_commit(git_dir, sha) if git_dir is not None else None
    if commit is None:
        raise HttpError(404, "Not Found")
    tree = gw.tree_of(git_dir, sha) if git_dir is not None else ""
    api = f"{fake.urls.api}/repos/{repo.full_name}/git"
    committer = {
        "name": commit.committer_name,
        "email": commit.committer_email,
        "date": commit.committer_date,
    }
    return {
        "sha": sha,
        "node_id": f"C_{sha[:12]}",
        "url": f"{api}/commits/{sha}",
        "html_url": f"{fake.urls.html}/{repo.full_name}/commit/{sha}",
        "author": {"name": commit.author_name, "email": commit.author_email, "date": commit.author_date},
        "committer": committer,
        "message": commit.message,
        "tree": {"sha": tree, "url": f"{api}/trees/{tree}"},
        "parents": [{"sha": p, "url": f"{api}/commits/{p}", "html_url": ""} for p in commit.parents],
        "verification": verification(repo, sha),
    }  # fmt: skip


def write_tree(repo: FakeRepo, base: str | None, entries: list[Any]) -> str:
    """`base` (a tree) with `entries` applied, as `POST /git/trees` does."""
    git_dir = repo.git_dir
    if git_dir is None:
        raise HttpError(404, "Not Found")
    if base is not None and not _exists(git_dir, base, "tree"):
        raise invalid("Tree", "base_tree")
    with tempfile.TemporaryDirectory(prefix="fake-github-tree-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        done = g.run_git(git_dir, "read-tree", base or gw.EMPTY_TREE, env=env)
        if done.returncode != 0:
            raise invalid("Tree", "base_tree")
        lines = []
        for entry in entries:
            if not isinstance(entry, dict):
                raise invalid("Tree", "tree")
            path, mode, kind = entry.get("path"), str(entry.get("mode") or ""), entry.get("type")
            if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
                raise invalid("Tree", "tree.path")
            if MODES.get(mode) != kind:
                raise invalid("Tree", "tree.mode")
            if "content" in entry:
                if "sha" in entry:
                    raise invalid("Tree", "tree.sha")
                sha = _hash(git_dir, "blob", str(entry["content"]).encode())
            elif entry.get("sha") is None:
                lines.append(f"0 {gw.ZERO}\t{path}\n")
                continue
            else:
                sha = str(entry["sha"])
                if kind != "commit" and not _exists(git_dir, sha, kind):
                    raise HttpError(422, f"GitRPC::BadObjectState: {sha} is not a {kind} in this repository")
            lines.append(f"{mode} {sha}\t{path}\n")
        done = g.run_git(git_dir, "update-index", "--index-info", env=env, stdin="".join(lines))
        if done.returncode != 0:
            raise invalid("Tree", "tree")
        written = g.run_git(git_dir, "write-tree", env=env)
        if written.returncode != 0:
            raise invalid("Tree", "tree")
        return written.stdout.strip()


def gitdata_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Any]]:
    def git_dir_of(request: Request) -> tuple[FakeRepo, Path]:
        repo = fake._repo(request)
        if repo.git_dir is None:
            raise HttpError(409, "Git Repository is empty.")
        return repo, repo.git_dir

    def blobs(request: Request, data: Any) -> Response:
        repo, git_dir = git_dir_of(request)
        content = (data or {}).get("content")
        if not isinstance(content, str):
            raise invalid("Blob", "content", "missing_field")
        encoding = (data or {}).get("encoding") or "utf-8"
        raw = base64.b64decode(content) if encoding == "base64" else content.encode()
        sha = _hash(git_dir, "blob", raw)
        return JSONResponse(
            {"sha": sha, "url": f"{fake.urls.api}/repos/{repo.full_name}/git/blobs/{sha}"}, 201
        )

    def trees(request: Request, data: Any) -> Response:
        repo, _ = git_dir_of(request)
        entries = (data or {}).get("tree")
        if not isinstance(entries, list):
            raise invalid("Tree", "tree", "missing_field")
        sha = write_tree(repo, (data or {}).get("base_tree"), entries)
        url = f"{fake.urls.api}/repos/{repo.full_name}/git/trees/{sha}"
        return JSONResponse({"sha": sha, "url": url, "tree": [], "truncated": False}, 201)

    def commits(request: Request, data: Any) -> Response:
        repo, git_dir = git_dir_of(request)
        data = data if isinstance(data, dict) else {}
        message, tree, parents = data.get("message"), data.get("tree"), data.get("parents") or []
        if not isinstance(message, str):
            raise invalid("Commit", "message", "missing_field")
        if not isinstance(tree, str) or not _exists(git_dir, tree, "tree"):
            raise invalid("Commit", "tree")
        if not isinstance(parents, list) or not all(_exists(git_dir, str(p), "commit") for p in parents):
            raise invalid("Commit", "parents")
        custom = any(data.get(key) for key in ("author", "committer", "signature"))
        if not custom and fake.actor.endswith("[bot]"):
            sha = signed_commit(fake, repo, tree=tree, parents=[str(p) for p in parents], message=message)
        else:  # a custom identity (or a person's token): GitHub does not sign it
            author = data.get("author") or {"name": fake.actor, "email": fake.noreply(fake.actor)}
            committer = data.get("committer") or author
            sha = gw.commit(
                git_dir, tree=tree, parents=[str(p) for p in parents], message=message,
                author=gw.Person(author["name"], author["email"]),
                committer=gw.Person(committer["name"], committer["email"]),
            )  # fmt: skip
        fake.made_commits.append(sha)
        return JSONResponse(git_commit_json(fake, repo, sha), 201)

    def commit(request: Request, data: Any) -> Response:
        repo, _ = git_dir_of(request)
        return JSONResponse(git_commit_json(fake, repo, request.path_params["sha"]))

    def create_ref(request: Request, data: Any) -> Response:
        repo, git_dir = git_dir_of(request)
        ref, sha = (data or {}).get("ref"), (data or {}).get("sha")
        if not isinstance(ref, str) or not ref.startswith("refs/heads/") or not isinstance(sha, str):
            raise invalid("Reference", "ref")
        if not _exists(git_dir, sha, "commit"):
            raise HttpError(422, "Object does not exist")
        branch = ref.removeprefix("refs/heads/")
        if fake.branch_head(repo.full_name, branch) is not None:
            raise HttpError(422, "Reference already exists")
        move(fake, repo, branch, sha, None)
        return JSONResponse(ref_json(fake, repo, branch, sha), 201)

    def update_ref(request: Request, data: Any) -> Response:
        repo, git_dir = git_dir_of(request)
        ref = request.path_params["ref"]
        sha, force = (data or {}).get("sha"), bool((data or {}).get("force"))
        if not ref.startswith("heads/") or not isinstance(sha, str):
            raise invalid("Reference", "sha")
        branch = ref.removeprefix("heads/")
        old = fake.branch_head(repo.full_name, branch)
        if old is None:
            raise HttpError(422, "Reference does not exist")
        if not _exists(git_dir, sha, "commit"):
            raise HttpError(422, "Object does not exist")
        if not force and g.run_git(git_dir, "merge-base", "--is-ancestor", old, sha).returncode != 0:
            raise HttpError(422, "Update is not a fast forward")
        move(fake, repo, branch, sha, old)
        return JSONResponse(ref_json(fake, repo, branch, sha))

    def branch_rules(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        found = [
            {"type": rule, "ruleset_source_type": "Repository", "ruleset_source": repo.full_name,
             "ruleset_id": ruleset.id}
            for ruleset, rule in rules_for(repo, request.path_params["branch"])
        ]  # fmt: skip
        return fake._page(request, found)

    def user(request: Request, data: Any) -> Response:
        return JSONResponse(fake._user(request.path_params["login"]))

    return [
        (f"{REPO}/git/blobs", ["POST"], blobs),
        (f"{REPO}/git/trees", ["POST"], trees),
        (f"{REPO}/git/commits", ["POST"], commits),
        (f"{REPO}/git/commits/{{sha}}", ["GET"], commit),
        (f"{REPO}/git/refs", ["POST"], create_ref),
        (f"{REPO}/git/refs/{{ref:path}}", ["PATCH"], update_ref),
        (f"{REPO}/rules/branches/{{branch:path}}", ["GET"], branch_rules),
        ("/users/{login}", ["GET"], user),
    ]


def ref_json(fake: FakeGitHub, repo: FakeRepo, branch: str, sha: str) -> dict[str, Any]:
    api = f"{fake.urls.api}/repos/{repo.full_name}/git"
    return {"ref": f"refs/heads/{branch}", "node_id": f"REF_{branch}", "url": f"{api}/refs/heads/{branch}",
            "object": {"type": "commit", "sha": sha, "url": f"{api}/commits/{sha}"}}  # fmt: skip


def move(fake: FakeGitHub, repo: FakeRepo, branch: str, new: str, old: str | None) -> None:
    """Move `branch` from `old` to `new` as a push through the API does (rules checked first)."""
    check_rules(repo, branch, new)
    git_dir = repo.git_dir
    assert git_dir is not None
    try:
        gw.move_branch(git_dir, branch, new, old)
    except gw.GitWriteError as exc:
        raise HttpError(422, f"Reference update failed: {exc}") from exc
    pushed(fake, repo, branch, old=old, new=new, sender=fake.actor)


def update_refs(fake: FakeGitHub, variables: dict[str, Any]) -> Response:
    """GraphQL `updateRefs`: every update is checked first (its `beforeOid`, a fast-forward unless
    `force`, the rules), then all are made; one refused, none is made."""
    if not fake.graphql_update_refs:
        error = {"message": "Field 'updateRefs' doesn't exist on type 'Mutation'", "path": ["mutation"]}
        return JSONResponse({"errors": [error]})
    repo = next((r for r in fake.repos.values() if f"R_{r.id}" == variables.get("repo")), None)
    if repo is None or repo.git_dir is None:
        message = f"Could not resolve to a node with the global id of '{variables.get('repo')}'"
        return JSONResponse(
            {"data": {"updateRefs": None}, "errors": [{"type": "NOT_FOUND", "message": message}]}
        )
    git_dir, planned = repo.git_dir, []
    for update in variables.get("updates") or []:
        name, after = str(update.get("name") or ""), str(update.get("afterOid") or "")
        branch, before = name.removeprefix("refs/heads/"), update.get("beforeOid")
        current = fake.branch_head(repo.full_name, branch)
        problem = None
        if not name.startswith("refs/heads/") or not _exists(git_dir, after, "commit"):
            problem = f"{name}: no such commit {after}"
        elif before is not None and (current or gw.ZERO) != before:
            problem = f"{name}: the reference is at {current or 'nothing'}, not at {before}"
        elif current and not update.get("force"):
            if g.run_git(git_dir, "merge-base", "--is-ancestor", current, after).returncode != 0:
                problem = f"{name}: not a fast-forward update"
        if problem is None and requires_signatures(repo, branch) and unsigned_new(repo, after):
            problem = RULE_VIOLATION.format(branch=branch)
        if problem is not None:
            error = {"type": "UNPROCESSABLE", "message": f"A ref update was refused: {problem}"}
            return JSONResponse({"data": {"updateRefs": None}, "errors": [error]})
        planned.append((branch, after, current))
    for branch, after, current in planned:
        move(fake, repo, branch, after, current)
    return JSONResponse({"data": {"updateRefs": {"clientMutationId": None}}})
