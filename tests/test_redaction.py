"""One redaction function at every exit: nothing printed by code the bot runs leaks a secret to GitHub."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.plan.state import new_plan
from bot.plan.state_block import decode_state, encode_state, state_payload, state_reference
from bot.redaction import redact, register_secret
from tests.execution_support import agent_script, make_remote
from tests.harness import REPO, Harness, commented
from tests.test_publishing import PRD

GHS = "ghs_" + "a1B2c3D4e5" * 4
KNOWN = "the-webhook-secret-value-9f8e7d"


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (f"token {GHS} end", GHS),
        ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz end", "github_pat_11ABCDEFG"),
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 end", "sk-ant-api03"),
        ("key sk-proj-abcdefghijklmnop0123456789 end", "sk-proj-abc"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEA",
        ),
        ("AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzXw==", "eC1hY2Nlc3MtdG9rZW46Z2hzXw=="),
        ("https://x-access-token:abc123def@github.com/o/r.git", "abc123def"),
    ],
)
def test_credential_shapes_are_masked(text: str, gone: str) -> None:
    assert gone not in redact(text) and "***" in redact(text)


def test_known_secrets_are_masked_but_state_blocks_are_untouched() -> None:
    register_secret(KNOWN)
    state = new_plan(repo="o/r", issue=1, prd=_prd(), at=__import__("datetime").datetime(2026, 1, 1))
    block = encode_state(state, key=b"k" * 32)
    reference = state_reference([1, 2], state_payload(state), key=b"k" * 32)
    body = f"visible {KNOWN} {GHS}\n{block}\n{reference}\n"
    cleaned = redact(body)
    assert KNOWN not in cleaned and GHS not in cleaned
    assert block in cleaned and reference in cleaned and decode_state(cleaned) == state
    # A forged "state block" carrying a token is not exempt.
    forged = f"<!-- plan-cascade:state v2 sig=- {GHS} -->"
    assert GHS not in redact(forged)


def _prd():  # type: ignore[no-untyped-def]
    from bot.plan import parse_prd

    return parse_prd(PRD[PRD.index("version: 1") : PRD.rindex("```")])


async def test_a_secret_printed_by_a_gate_never_reaches_github(tmp_path: Path) -> None:
    register_secret(KNOWN)
    remote = make_remote(tmp_path, {"README.md": "# demo\n", "leak.txt": f"{KNOWN}\n{GHS}\n"})
    script = agent_script(
        tmp_path, "ok.sh", f'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\necho "agent saw {GHS}"\n'
    )
    config = (
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        "gates:\n  detect: false\n  strict: true\n  max_retries: 0\n  custom:\n    - name: leak\n"
        '      command: "cat leak.txt; exit 1"\n'
    )
    async with Harness(tmp_path, execute=True) as h:
        h.fake.repo(REPO).clone_url = f"file://{remote}"
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.set_file(REPO, ".github/plan-cascade.yml", config)
        h.fake.add_issue(REPO, title="Greetings", body=PRD)
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await h.drain()
        await h.deliver(
            "issue_comment",
            commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER"),
        )
        await h.drain(timeout=180)
        sent = [str(r.json) for r in h.fake.requests if r.json is not None]
        assert any(("leak" in s and "check" in s.lower()) or "output" in s for s in sent)
        assert not [s for s in sent if KNOWN in s or GHS in s]
        transcripts = list((h.settings.data_dir / "transcripts").rglob("*.jsonl"))
        assert transcripts and not [t for t in transcripts if GHS in t.read_text()]


async def test_a_failed_jobs_error_is_kept_redacted(tmp_path: Path) -> None:
    """The queue keeps a job's error (its last 4,000 characters) for the status page and retries."""
    from bot.db.engine import Database
    from bot.db.queue import JobQueue
    from bot.runtime.routing import Router
    from bot.runtime.services import Services
    from bot.runtime.settings import Settings
    from bot.runtime.worker import JobKinds, WorkerPool

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'q.db'}")
    await db.migrate()
    queue, kinds = JobQueue(db), JobKinds()

    @kinds.register("push")
    async def _push(job, services) -> None:  # type: ignore[no-untyped-def]
        # the queue's cut (4,000 characters from the end) falls inside the token
        raise RuntimeError(f"git push https://x-access-token:{GHS}@github.com/o/r.git failed\n" + "." * 3952)

    job_id = await queue.enqueue(kind="push", group_key="g", payload={}, max_attempts=1)
    pool = WorkerPool(queue=queue, router=Router(), kinds=kinds, services=Services(settings=Settings()))
    claimed = await queue.claim("w")
    assert claimed is not None and await pool.run_job(claimed, "w") == "dead"
    row = await queue.get(job_id)
    await db.dispose()
    assert row is not None and row.last_error is not None
    assert GHS[-10:] not in row.last_error and GHS[4:14] not in row.last_error
