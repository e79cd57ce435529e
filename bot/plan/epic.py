"""An epic's features and where they live: pure rules over the PRD's `features`.

A feature names the repository its child issue is opened in (`repository:`, the epic's own
when absent). A repository may be a target only when the epic repository's config allows it
(`epics.repositories:`, entries `owner/name` or `owner/*`); the epic's own repository always
may. Child issues are named by references `owner/name#number`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.plan.graph import dependency_problems
from bot.plan.model import FEATURE_ID_PATTERN, PRD, REPOSITORY_PATTERN, Feature, Story, Strategy

_FEATURE_ID = re.compile(FEATURE_ID_PATTERN)
_REPOSITORY = re.compile(REPOSITORY_PATTERN)
_NAMED = re.compile(
    r"(?<![\w./-])(?:https?://[^/\s]+/)?([A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100})(?![\w-])(?!/[\w-])"
)
_REF = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100})#(\d+)$")


@dataclass(frozen=True, order=True)
class IssueRef:
    """An issue of a repository: `owner/name#number`."""

    repo: str
    number: int

    def __str__(self) -> str:
        return f"{self.repo}#{self.number}"

    def shown_from(self, repo: str) -> str:
        """`#12` in its own repository, `owner/name#12` from another (GitHub links both)."""
        return f"#{self.number}" if same_repository(self.repo, repo) else str(self)


def parse_ref(text: str, *, default_repo: str) -> IssueRef | None:
    """`owner/name#12` or `12` (an issue of `default_repo`); None when it is neither."""
    text = text.strip()
    if text.isdigit():
        return IssueRef(default_repo, int(text))
    found = _REF.match(text)
    return IssueRef(found.group(1), int(found.group(2))) if found else None


def same_repository(a: str, b: str) -> bool:
    """GitHub's repository names are case-insensitive."""
    return a.lower() == b.lower()


def feature_repository(feature: Feature, own: str) -> str:
    """The repository a feature's child issue is opened in."""
    return feature.repository or own


def target_repositories(prd: PRD, own: str) -> list[str]:
    """The repositories other than `own` that the epic's features name, in order, once each."""
    seen: dict[str, str] = {}
    for feature in prd.features:
        repo = feature_repository(feature, own)
        if not same_repository(repo, own):
            seen.setdefault(repo.lower(), repo)
    return list(seen.values())


def spans_repositories(prd: PRD, own: str) -> bool:
    """Whether an epic opens children outside its own repository (then its plan is approved first)."""
    return prd.strategy is Strategy.MEGA and bool(target_repositories(prd, own))


def allows(patterns: Sequence[str], repo: str, *, own: str) -> bool:
    """Whether `repo` may hold an epic's child: `own`, or matched by an `owner/name` or `owner/*`
    entry of `epics.repositories` (case-insensitive)."""
    if same_repository(repo, own):
        return True
    owner = repo.split("/", 1)[0].lower()
    for pattern in patterns:
        head, _, tail = pattern.partition("/")
        if tail == "*" and head.lower() == owner:
            return True
        if same_repository(pattern, repo):
            return True
    return False


def named_repositories(text: str) -> list[str]:
    """The `owner/name` repositories a text names (plain or as a GitHub URL), in order, once each."""
    seen: dict[str, str] = {}
    for match in _NAMED.finditer(text):
        name = match.group(1).rstrip(".").removesuffix(".git")
        if _REPOSITORY.match(name) and not name.split("/")[1].startswith("."):
            seen.setdefault(name.lower(), name)
    return list(seen.values())


def feature_problems(prd: PRD) -> list[str]:
    """Problems of the PRD's features on their own (ids, stories, dependencies, repository names)."""
    if not prd.features:
        return []
    problems: list[str] = []
    if prd.strategy is not Strategy.MEGA:
        problems.append("features: only an epic (strategy: mega) has features; remove them or use mega")
    known = {story.id for story in prd.stories}
    for index, feature in enumerate(prd.features):
        if not _FEATURE_ID.match(feature.id):
            problems.append(f'features[{index}].id: "{feature.id}" does not match {FEATURE_ID_PATTERN}')
        if not feature.title.strip():
            problems.append(f"{feature.id} has an empty title")
        problems.extend(
            f"{feature.id} covers unknown story {sid}" for sid in feature.stories if sid not in known
        )
        if feature.repository is not None and not _REPOSITORY.match(feature.repository):
            problems.append(
                f'{feature.id} repository: "{feature.repository[:100]}" is not owner/name '
                "(leave it out for this repository)"
            )
    # The story graph checks duplicates, unknown dependencies and cycles; features have the same shape.
    as_stories = [Story(id=f.id, title=f.title, depends_on=f.depends_on) for f in prd.features]
    problems.extend(line.replace("story", "feature") for line in dependency_problems(as_stories))
    return problems


def placement_problems(features: Sequence[Feature], *, own: str, patterns: Sequence[str]) -> list[str]:
    """A line for each feature whose repository the epic's repository does not allow, with the fix."""
    return [
        f"{f.id} names {f.repository}, which is not on this repository's allowed list: add it (or "
        f"`{(f.repository or own).split('/')[0]}/*`) to `epics.repositories` in .github/plan-cascade.yml "
        "of this repository, or plan the feature here"
        for f in features
        if not allows(patterns, feature_repository(f, own), own=own)
    ]


def feature_order(features: Sequence[Feature]) -> list[str]:
    """Feature ids with every feature after the features it depends on (stable)."""
    done: list[str] = []
    left = list(features)
    while left:
        ready = [f for f in left if all(d in done for d in f.depends_on)]
        if not ready:  # a cycle: validation refuses these, keep the listed order
            ready = left[:1]
        done.append(ready[0].id)
        left.remove(ready[0])
    return done
