"""Repository rules and GitHub's signatures in the fake GitHub (a part of `fake_github_gitdata`).

Rulesets (`FakeRuleset`: `~DEFAULT_BRANCH`, `~ALL` or `refs/heads/<glob>`) answer
`GET /rules/branches/{branch}`. A `required_signatures` rule refuses, on the branches it covers,
a `git push` of commits GitHub did not sign (a `pre-receive` hook in the bare repository says
`GH013 … Commits must have verified signatures`, as GitHub does), a ref update through the API
to such commits, and the merge methods that would put such commits there (a rebase, which
GitHub cannot sign; a merge commit of unsigned commits). GitHub signs the commits it makes
for an App through the API and its merge button's merge and squash commits.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bot.github.urls import noreply_email
from bot.testing import fake_github_git as g
from bot.testing import fake_github_gitwrite as gw
from bot.testing.fake_github_model import FakeRepo, HttpError

SIGNED_FILE = "fake-github-signed"
RULE_VIOLATION = (
    "Repository rule violations found for refs/heads/{branch}. Commits must have verified signatures."
)


@dataclass
class FakeRuleset:
    """A ruleset: the branches it covers (`include` minus `exclude`) and its rule types."""

    id: int
    name: str
    rules: list[str]
    include: list[str] = field(default_factory=lambda: ["~DEFAULT_BRANCH"])
    exclude: list[str] = field(default_factory=list)
    classic: bool = False
    """A classic branch protection rule: enforced, but not listed by `GET /rules/branches/{b}`."""

    def covers(self, repo: FakeRepo, branch: str) -> bool:
        def match(pattern: str) -> bool:
            if pattern == "~ALL":
                return True
            if pattern == "~DEFAULT_BRANCH":
                return branch == repo.default_branch
            return fnmatch.fnmatchcase(f"refs/heads/{branch}", pattern)

        return any(match(p) for p in self.include) and not any(match(p) for p in self.exclude)


class GitDataHelpers:
    """`FakeGitHub`'s helpers for signatures and rulesets (a part of it)."""

    repos: dict[str, FakeRepo]
    urls: Any
    actor: str
    graphql_update_refs: bool = True
    """False: a GitHub whose GraphQL has no `updateRefs` (an older Enterprise Server)."""

    def _user(self, login: str) -> dict[str, Any]:
        raise NotImplementedError

    def noreply(self, login: str) -> str:
        """The commit address GitHub gives an account: `<id>+<login>@users.noreply.<its host>`."""
        return noreply_email(self._user(login)["id"], login, self.urls.html)

    @property
    def web_flow(self) -> gw.Person:
        """The committer of what GitHub commits itself (`GitHub <noreply@…>` of its host)."""
        host = urlsplit(self.urls.html).hostname or "github.com"
        if getattr(self, "enterprise", False):
            return gw.Person("GitHub Enterprise", f"noreply@{host}")
        return gw.GITHUB

    def add_ruleset(
        self,
        repo: str,
        rules: list[str],
        *,
        include: list[str] | None = None,
        name: str = "protect",
        classic: bool = False,
    ) -> FakeRuleset:
        """An active ruleset on `repo` (default: the default branch) with these rule types;
        `classic`: a branch protection rule instead (enforced, not in the rules endpoint)."""
        fake = self.repos[repo]
        ruleset = FakeRuleset(
            900 + len(fake.rulesets), name, list(rules), list(include or ["~DEFAULT_BRANCH"]), classic=classic
        )
        fake.rulesets.append(ruleset)
        install_hook(fake)
        return ruleset

    def verified(self, repo: str, sha: str) -> bool:
        """Whether GitHub shows commit `sha` Verified (it signed it)."""
        return sha in self.repos[repo].signed


def rules_for(repo: FakeRepo, branch: str, *, listed: bool = True) -> list[tuple[FakeRuleset, str]]:
    """The rules that apply to `branch`; `listed`: only those the rules endpoint shows."""
    return [
        (rs, rule)
        for rs in repo.rulesets
        if rs.covers(repo, branch) and not (listed and rs.classic)
        for rule in rs.rules
    ]


def requires_signatures(repo: FakeRepo, branch: str) -> bool:
    """Whether GitHub enforces signed commits on `branch` (a ruleset or a protection rule)."""
    return any(rule == "required_signatures" for _, rule in rules_for(repo, branch, listed=False))


def sign(repo: FakeRepo, sha: str) -> None:
    """GitHub verified `sha` (it made it): the pre-receive hook and `verification` know."""
    repo.signed.add(sha)
    git_dir = repo.git_dir
    if git_dir is not None:
        with (git_dir / SIGNED_FILE).open("a") as out:
            out.write(sha + "\n")


def install_hook(repo: FakeRepo) -> None:
    """The bare repository's `pre-receive` hook: pushes of unsigned commits to the branches a
    `required_signatures` rule covers are refused as GitHub refuses them."""
    git_dir = repo.git_dir
    if git_dir is None:
        return
    patterns = []
    for ruleset in repo.rulesets:
        if "required_signatures" not in ruleset.rules:
            continue
        for pattern in ruleset.include:
            glob = {"~ALL": "*", "~DEFAULT_BRANCH": repo.default_branch}.get(pattern, pattern)
            patterns.append(glob.removeprefix("refs/heads/").replace("**", "*"))
    hook = git_dir / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    cases = "|".join(f'"{p}"' if "*" not in p else p for p in patterns) or '"-never-"'
    hook.write_text(
        "#!/bin/sh\n"
        f'signed="$GIT_DIR/{SIGNED_FILE}"\n'
        "while read old new ref; do\n"
        '  branch="${ref#refs/heads/}"\n'
        '  case "$branch" in ' + cases + ") ;; *) continue ;; esac\n"
        '  [ "$new" = 0000000000000000000000000000000000000000 ] && continue\n'
        '  for c in $(git rev-list "$new" --not --all); do\n'
        '    if ! grep -qxF "$c" "$signed" 2>/dev/null; then\n'
        '      echo "error: GH013: Repository rule violations found for $ref." >&2\n'
        '      echo "- Commits must have verified signatures." >&2\n'
        '      echo "  Found 1 violation: $c" >&2\n'
        "      exit 1\n"
        "    fi\n"
        "  done\n"
        "done\n"
    )
    hook.chmod(0o755)


def unsigned_new(repo: FakeRepo, new: str) -> list[str]:
    """Commits `new` brings that no branch has and GitHub did not sign."""
    git_dir = repo.git_dir
    if git_dir is None:
        return []
    done = g.run_git(git_dir, "rev-list", new, "--not", "--branches")
    return [c for c in done.stdout.split() if c not in repo.signed]


def check_rules(repo: FakeRepo, branch: str, new: str) -> None:
    """Refuse (422) an update of `branch` to `new` that a rule forbids."""
    if requires_signatures(repo, branch) and unsigned_new(repo, new):
        raise HttpError(422, RULE_VIOLATION.format(branch=branch))


def check_merge(repo: FakeRepo, base_ref: str, *, base: str, head: str, method: str) -> None:
    """Refuse (405) a merge method that would put commits GitHub did not sign on a branch whose
    rules require signatures: a rebase (GitHub cannot sign rebased commits), a merge commit of
    unsigned commits. A squash is GitHub's own signed commit."""
    if not requires_signatures(repo, base_ref) or method == "squash":
        return
    if method == "rebase":
        raise HttpError(405, "Base branch requires signed commits: rebase merges cannot be signed by GitHub.")
    git_dir = repo.git_dir
    landing = g.run_git(git_dir, "rev-list", head, f"^{base}").stdout.split() if git_dir is not None else []
    if any(c not in repo.signed for c in landing):
        raise HttpError(405, "Base branch requires signed commits: this pull request has unsigned commits.")
