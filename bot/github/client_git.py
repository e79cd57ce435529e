"""The port's Git database calls: commits GitHub makes itself (a part of `GitHubKitPort`).

A commit an App's installation token creates through `POST /repos/{o}/{r}/git/commits` with no
`author`, `committer` or `signature` is signed by GitHub and shows Verified, authored by the
App's bot; one with a custom author or committer is not signed (GitHub's "signature
verification for bots"). So `create_commit` sends only the message, the tree and the parents.

Moving a branch is a compare-and-swap: GraphQL `updateRefs` takes the value the ref must hold
before (`beforeOid`, all zeros for "must not exist") and applies the update only then, for a
fast-forward as for a forced one (a restack replaces history). A GitHub without `updateRefs`
(an older Enterprise Server) gets the REST calls that are still safe: `POST /git/refs` for a
new branch (refused when it exists) and `PATCH /git/refs/heads/{b}` with `force: false`
(refused unless it fast-forwards); a forced update is refused there, never made blind.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from githubkit import GitHub
from githubkit.exception import GitHubException, GraphQLFailed

from bot.errors import GitHubError, NotFound
from bot.github.client_base import github_errors, split_repo, translate

ZERO_OID = "0" * 40
UPDATE_REFS = """
mutation($repo: ID!, $updates: [RefUpdate!]!) {
  updateRefs(input: {repositoryId: $repo, refUpdates: $updates}) { clientMutationId }
}
"""


class RefUpdateRefused(GitHubError):
    """GitHub refused to move a branch: it is not where the caller said (someone pushed), the
    update would not fast-forward it, or a rule of the repository forbids it (`message` says)."""


@dataclass(frozen=True)
class MadeCommit:
    """A commit GitHub created: its sha and what GitHub says of its signature."""

    sha: str
    verified: bool
    reason: str


def _lacks_update_refs(said: str) -> bool:
    """Whether a GraphQL error says the schema has no `updateRefs` (an older Enterprise Server)."""
    named = "updateRefs" in said or "RefUpdate" in said
    return named and any(words in said for words in ("doesn't exist", "does not exist", "isn't a defined"))


def _path(value: str) -> str:
    return quote(value, safe="/")


class GitDataCalls:
    """Blobs, trees, commits and refs through the API, over the port's githubkit client."""

    _github: GitHub[Any]
    _headers: dict[str, str]
    _no_update_refs: bool = False
    """This GitHub answered that GraphQL has no `updateRefs` (asked once per port)."""

    async def _pace(self, *, creates: bool = True) -> None:
        raise NotImplementedError

    async def _call(self, method: str, url: str, doing: str, *, json: Any = None) -> Any:
        with github_errors(doing):
            resp = await self._github.arequest(method, url, json=json, headers=self._headers)
        return resp.json() if resp.content else None

    async def create_blob(self, repo: str, content: bytes) -> str:
        """Store `content` as a blob; its sha."""
        owner, name = split_repo(repo)
        await self._pace()
        body = {"content": base64.b64encode(content).decode(), "encoding": "base64"}
        data = await self._call(
            "POST", f"/repos/{owner}/{name}/git/blobs", f"store a blob in {repo}", json=body
        )
        return str(data["sha"])

    async def create_tree(self, repo: str, *, base_tree: str | None, entries: list[dict[str, Any]]) -> str:
        """A tree: `base_tree` with `entries` (`{path, mode, type, sha|content}`; `sha: None` removes)."""
        owner, name = split_repo(repo)
        await self._pace()
        body: dict[str, Any] = {"tree": entries}
        if base_tree:
            body["base_tree"] = base_tree
        data = await self._call(
            "POST", f"/repos/{owner}/{name}/git/trees", f"make a tree in {repo}", json=body
        )
        return str(data["sha"])

    async def create_commit(self, repo: str, *, message: str, tree: str, parents: list[str]) -> MadeCommit:
        """A commit GitHub makes and signs (no author, committer or signature is sent)."""
        owner, name = split_repo(repo)
        await self._pace()
        body = {"message": message, "tree": tree, "parents": parents}
        data = await self._call(
            "POST", f"/repos/{owner}/{name}/git/commits", f"make a commit in {repo}", json=body
        )
        verification = data.get("verification") or {}
        return MadeCommit(
            sha=str(data["sha"]),
            verified=bool(verification.get("verified")),
            reason=str(verification.get("reason") or ""),
        )

    async def has_commit(self, repo: str, sha: str) -> bool:
        """Whether GitHub has commit `sha` in `repo`."""
        owner, name = split_repo(repo)
        try:
            await self._call("GET", f"/repos/{owner}/{name}/git/commits/{sha}", f"read commit {sha[:12]}")
        except NotFound:
            return False
        except GitHubError as exc:
            if exc.status == 422:
                return False
            raise
        return True

    async def branch_rules(self, repo: str, branch: str) -> list[str]:
        """The types of the active rules that apply to `branch` (it need not exist), from every
        ruleset the token can see: e.g. `required_signatures`, `non_fast_forward`."""
        owner, name = split_repo(repo)
        url = f"/repos/{owner}/{name}/rules/branches/{_path(branch)}"
        found: list[str] = []
        for page in range(1, 11):  # 1,000 rules: far more than any branch has
            with github_errors(f"read the rules of {branch} in {repo}"):
                resp = await self._github.arequest(
                    "GET", url, params={"per_page": 100, "page": page}, headers=self._headers
                )
            items = resp.json()
            if not isinstance(items, list):
                break
            found += [str(i["type"]) for i in items if isinstance(i, dict) and i.get("type")]
            if len(items) < 100:
                break
        return found

    async def get_user_id(self, login: str) -> int | None:
        """The numeric id of the account `login` (a bot's is `<slug>[bot]`), or None if none."""
        try:
            data = await self._call("GET", f"/users/{quote(login, safe='')}", f"read the account {login}")
        except NotFound:
            return None
        value = (data or {}).get("id")
        return int(value) if isinstance(value, int) else None

    async def move_branch(
        self, repo: str, branch: str, *, new: str, old: str | None, force: bool, repository_id: str
    ) -> None:
        """Point `branch` at `new` only if it is at `old` now (None: it must not exist; with
        `force` and `old` None: whatever it holds). `force` allows a non-fast-forward.
        Raises `RefUpdateRefused` when GitHub refuses because of where the branch is."""
        if not self._no_update_refs and repository_id:
            update: dict[str, Any] = {"name": f"refs/heads/{branch}", "afterOid": new, "force": force}
            if old is not None or not force:
                update["beforeOid"] = old or ZERO_OID
            await self._pace(creates=old is None)
            try:
                await self._github.async_graphql(UPDATE_REFS, {"repo": repository_id, "updates": [update]})
                return
            except GraphQLFailed as exc:
                said = "; ".join(e.message for e in exc.response.errors or [])
                if not _lacks_update_refs(said):
                    raise RefUpdateRefused(
                        f"GitHub refused to move {branch} in {repo}: {said}", status=422
                    ) from exc
                self._no_update_refs = True  # an older Enterprise Server: the REST calls below
            except GitHubException as exc:
                error = translate(exc, f"move {branch} in {repo}")
                raise error if isinstance(error, GitHubError) else GitHubError(str(exc)) from exc
        await self._move_branch_rest(repo, branch, new=new, old=old, force=force)

    async def _move_branch_rest(
        self, repo: str, branch: str, *, new: str, old: str | None, force: bool
    ) -> None:
        """Without `updateRefs`: a new branch by `POST /git/refs` (refused when it exists), anything
        else by `PATCH` with `force: false` (refused unless it fast-forwards the branch); a forced
        update only when the caller asked for one unconditionally (`old` None)."""
        owner, name = split_repo(repo)
        doing = f"move {branch} in {repo}"
        ref_url = f"/repos/{owner}/{name}/git/refs/heads/{_path(branch)}"
        try:
            if old is None:
                await self._pace()
                try:
                    created = {"ref": f"refs/heads/{branch}", "sha": new}
                    await self._call("POST", f"/repos/{owner}/{name}/git/refs", doing, json=created)
                    return
                except GitHubError as exc:
                    if exc.status != 422 or not force:
                        raise
                await self._pace(creates=False)  # it exists, and the caller asked to push anyway
                await self._call("PATCH", ref_url, doing, json={"sha": new, "force": True})
                return
            await self._pace(creates=False)
            await self._call("PATCH", ref_url, doing, json={"sha": new, "force": False})
        except GitHubError as exc:
            if exc.status != 422:
                raise
            why = exc.message
            if force and old is not None:
                why += (
                    " (this GitHub has no GraphQL `updateRefs`, the compare-and-swap a branch whose history "
                    "is replaced needs: the bot never forces such an update blind)"
                )
            raise RefUpdateRefused(why, status=422) from exc
