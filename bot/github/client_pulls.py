"""The port's check-run, pull-request and workflow calls (a part of `GitHubKitPort`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from githubkit import GitHub

from bot.errors import GitHubError
from bot.github.client_base import (
    check_runs_list,
    drop_none,
    github_errors,
    json_list,
    json_object,
    split_repo,
)
from bot.github.idempotent import (
    already_exists,
    create_once,
    matching_check_runs,
    matching_pull,
    matching_review,
)
from bot.github.identity import Identity
from bot.github.models import CheckRun, PullCommit, PullRequest, Review, ReviewComment
from bot.redaction import redact, redact_value

if TYPE_CHECKING:
    from bot.metrics import Metrics

DUPLICATE_OUTPUT = {
    "title": "Duplicate",
    "summary": "A second copy of this check run, made while GitHub was failing; the other one counts.",
}


def _check_run_fields(
    status: str | None,
    conclusion: str | None,
    external_id: str | None,
    details_url: str | None,
    output: Mapping[str, Any] | None,
    actions: Sequence[Mapping[str, str]] | None,
) -> dict[str, Any]:
    """The fields a check run is created or updated with: the ones given, output redacted."""
    return drop_none(
        status=status,
        conclusion=conclusion,
        external_id=external_id,
        details_url=details_url,
        output=redact_value(dict(output)) if output is not None else None,
        actions=[dict(action) for action in actions] if actions is not None else None,
    )


class PullsAndChecks:
    """Checks, pull requests and Actions dispatches over the same githubkit client."""

    _github: GitHub[Any]
    _headers: dict[str, str]
    _metrics: Metrics | None
    _create_delays: Sequence[float]

    async def _pace(self, *, creates: bool = True) -> None:
        raise NotImplementedError

    async def _own(self) -> Identity | None:
        raise NotImplementedError

    async def _all(self, request: Any, map_func: Any = json_list, **kwargs: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def create_check_run(
        self,
        repo: str,
        *,
        name: str,
        head_sha: str,
        status: str | None = None,
        conclusion: str | None = None,
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, str]] | None = None,
    ) -> CheckRun:
        owner, repo_name = split_repo(repo)
        body = {
            "name": name,
            "head_sha": head_sha,
            **_check_run_fields(status, conclusion, external_id, details_url, output, actions),
        }
        doing = f"create check run {name!r} in {repo}"

        async def send() -> CheckRun:
            await self._pace()
            with github_errors(doing):
                resp = await self._github.rest.checks.async_create(
                    owner, repo_name, data=cast(Any, body), headers=self._headers
                )
            return CheckRun.from_api(json_object(resp))

        async def mine(keep: int | None) -> list[CheckRun]:
            own = await self._own()
            if own is None:
                return []
            runs = await self.list_check_runs_for_ref(repo, head_sha, check_name=name)
            same = matching_check_runs(runs, name=name, head_sha=head_sha, external_id=external_id, own=own)
            keep = keep if keep is not None else (same[0].id if same else None)
            for extra in same:  # a copy that slipped through is completed, never left running
                if extra.id != keep and extra.status != "completed":
                    await self.update_check_run(repo, extra.id, conclusion="neutral", output=DUPLICATE_OUTPUT)
            return [r for r in same if r.id == keep]

        async def find() -> CheckRun | None:
            return next(iter(await mine(None)), None)

        async def after_resend(made: CheckRun) -> None:
            await mine(made.id)

        return await create_once(
            send,
            find,
            kind="check_run",
            doing=doing,
            metrics=self._metrics,
            delays=self._create_delays,
            after_resend=after_resend,
        )

    async def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: str | None = None,
        conclusion: str | None = None,
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, str]] | None = None,
    ) -> CheckRun:
        owner, name = split_repo(repo)
        body = _check_run_fields(status, conclusion, external_id, details_url, output, actions)
        await self._pace(creates=False)
        with github_errors(f"update check run {check_run_id} in {repo}"):
            resp = await self._github.rest.checks.async_update(
                owner, name, check_run_id, data=cast(Any, body), headers=self._headers
            )
        return CheckRun.from_api(json_object(resp))

    async def list_check_runs_for_ref(
        self, repo: str, ref: str, *, check_name: str | None = None
    ) -> list[CheckRun]:
        owner, name = split_repo(repo)
        with github_errors(f"list check runs for {ref} in {repo}"):
            items = await self._all(
                self._github.rest.checks.async_list_for_ref,
                check_runs_list,
                owner=owner,
                repo=name,
                ref=ref,
                **drop_none(check_name=check_name),
            )
        return [CheckRun.from_api(item) for item in items]

    async def find_pull_request(
        self, repo: str, head_branch: str, *, state: str = "all"
    ) -> PullRequest | None:
        """The newest pull request from `head_branch` of this repository, if any."""
        owner, name = split_repo(repo)
        with github_errors(f"look for a pull request from {head_branch} in {repo}"):
            resp = await self._github.rest.pulls.async_list(
                owner, name, head=f"{owner}:{head_branch}", state=cast(Any, state), headers=self._headers
            )
        items = json_list(resp)
        return PullRequest.from_api(items[0]) if items else None

    async def list_pull_requests(self, repo: str, *, base: str, state: str = "open") -> list[PullRequest]:
        """Pull requests of this repository into `base` (every page)."""
        owner, name = split_repo(repo)
        with github_errors(f"list pull requests into {base} in {repo}"):
            items = await self._all(
                self._github.rest.pulls.async_list, owner=owner, repo=name, base=base, state=state
            )
        return [PullRequest.from_api(item) for item in items]

    async def get_pull_request(self, repo: str, number: int) -> PullRequest:
        owner, name = split_repo(repo)
        with github_errors(f"read pull request {repo}#{number}"):
            resp = await self._github.rest.pulls.async_get(owner, name, number, headers=self._headers)
        return PullRequest.from_api(json_object(resp))

    async def create_pull_request(
        self, repo: str, *, title: str, body: str, head: str, base: str, draft: bool = False
    ) -> PullRequest:
        owner, name = split_repo(repo)
        title, body = redact(title), redact(body)
        doing = f"open a pull request from {head} into {base} in {repo}"

        async def send() -> PullRequest:
            await self._pace()
            with github_errors(doing):
                resp = await self._github.rest.pulls.async_create(
                    owner,
                    name,
                    title=title,
                    body=body,
                    head=head,
                    base=base,
                    draft=draft,
                    headers=self._headers,
                )
            return PullRequest.from_api(json_object(resp))

        async def find() -> PullRequest | None:
            found = await self.find_pull_request(repo, head.rpartition(":")[2], state="open")
            return matching_pull([found] if found else [], head=head.rpartition(":")[2], base=base)

        try:
            return await create_once(
                send,
                find,
                kind="pull_request",
                doing=doing,
                metrics=self._metrics,
                delays=self._create_delays,
            )
        except GitHubError as exc:
            existing = await find() if already_exists(exc) else None
            if existing is None:
                raise
            if self._metrics is not None:
                self._metrics.github_adopted.labels("pull_request").inc()
            return existing

    async def update_pull_request(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        base: str | None = None,
        state: str | None = None,
    ) -> PullRequest:
        owner, name = split_repo(repo)
        changes = drop_none(
            title=redact(title) if title else title,
            body=redact(body) if body else body,
            base=base,
            state=state,
        )
        await self._pace(creates=False)
        with github_errors(f"edit pull request {repo}#{number}"):
            resp = await self._github.rest.pulls.async_update(
                owner, name, number, data=cast(Any, changes), headers=self._headers
            )
        return PullRequest.from_api(json_object(resp))

    async def request_reviewers(
        self, repo: str, number: int, *, reviewers: Sequence[str] = (), team_reviewers: Sequence[str] = ()
    ) -> None:
        if not reviewers and not team_reviewers:
            return
        owner, name = split_repo(repo)
        body = {"reviewers": list(reviewers), "team_reviewers": list(team_reviewers)}
        await self._pace()
        with github_errors(f"request reviewers on {repo}#{number}"):
            await self._github.rest.pulls.async_request_reviewers(
                owner, name, number, data=cast(Any, body), headers=self._headers
            )

    async def list_review_comments(self, repo: str, number: int, review_id: int) -> list[ReviewComment]:
        owner, name = split_repo(repo)
        with github_errors(f"read review {review_id} on {repo}#{number}"):
            items = await self._all(
                self._github.rest.pulls.async_list_comments_for_review,
                owner=owner,
                repo=name,
                pull_number=number,
                review_id=review_id,
            )
        return [ReviewComment.from_api(item) for item in items]

    async def list_reviews(self, repo: str, number: int) -> list[Review]:
        owner, name = split_repo(repo)
        with github_errors(f"list the reviews of {repo}#{number}"):
            items = await self._all(
                self._github.rest.pulls.async_list_reviews, owner=owner, repo=name, pull_number=number
            )
        return [Review.from_api(item) for item in items]

    async def create_review(
        self,
        repo: str,
        number: int,
        *,
        commit_id: str,
        body: str,
        event: str = "COMMENT",
        comments: Sequence[Mapping[str, Any]] = (),
    ) -> Review:
        owner, name = split_repo(repo)
        body = redact(body)
        data = {
            "commit_id": commit_id,
            "body": body,
            "event": event,
            "comments": [{**c, "body": redact(str(c.get("body", "")))} for c in comments],
        }
        doing = f"review {repo}#{number}"

        async def send() -> Review:
            await self._pace()
            with github_errors(doing):
                resp = await self._github.rest.pulls.async_create_review(
                    owner, name, number, data=cast(Any, data), headers=self._headers
                )
            return Review.from_api(json_object(resp))

        async def find() -> Review | None:
            own = await self._own()
            if own is None:
                return None
            reviews = await self.list_reviews(repo, number)
            return matching_review(reviews, commit_id=commit_id, body=body, own=own)

        return await create_once(
            send, find, kind="review", doing=doing, metrics=self._metrics, delays=self._create_delays
        )

    async def create_workflow_dispatch(
        self, repo: str, workflow_id: str | int, *, ref: str, inputs: Mapping[str, str] | None = None
    ) -> None:
        owner, name = split_repo(repo)
        body = drop_none(ref=ref, inputs=dict(inputs) if inputs else None)
        await self._pace()
        with github_errors(f"start workflow {workflow_id} on {ref} in {repo}"):
            await self._github.rest.actions.async_create_workflow_dispatch(
                owner, name, workflow_id, data=cast(Any, body), headers=self._headers
            )

    async def list_pull_request_commits(self, repo: str, number: int) -> list[PullCommit]:
        """The pull request's commits, oldest first, with the accounts GitHub linked to them."""
        owner, name = split_repo(repo)
        with github_errors(f"list the commits of {repo}#{number}"):
            items = await self._all(
                self._github.rest.pulls.async_list_commits, owner=owner, repo=name, pull_number=number
            )
        return [PullCommit.from_api(item) for item in items]
