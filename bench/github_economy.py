"""How many rate-limited GitHub requests Plan Cascade spends (issue #13's costs).

    .venv/bin/python bench/github_economy.py [--json PATH]

Runs the real handlers, queue and engine in-process against the fake GitHub (which answers
`If-None-Match` with 304 the way GitHub does; 304s do not count against the rate limit) and
counts the requests that do count (installation token mints, App-level calls, excluded):

1. a plan awaiting approval for 24 hours: the approval poller runs every minute of simulated
   time (one reader's 👍 arrives in hour 5 and must not approve). Target: at most 10.
2. a 20-story plan (4 batches of 5) from the label to the last pull request, with a script
   agent and one gate. Target: at most 250 (5 % of an installation's 5,000 an hour).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.clock import utcnow  # noqa: E402
from bot.handlers.approval import queue_polls  # noqa: E402
from bot.plan.state import PlanStatus  # noqa: E402
from bot.plan.state_block import decode_state  # noqa: E402
from tests.execution_support import agent_script, make_remote  # noqa: E402
from tests.harness import REPO, Harness, commented, labeled  # noqa: E402

SMALL = """```prd
version: 1
title: Waiting plan
summary: Two stories that wait for approval.
stories:
  - id: STORY-001
    title: One
    acceptance_criteria: ["one.txt holds 1 line"]
  - id: STORY-002
    title: Two
    depends_on: [STORY-001]
    acceptance_criteria: ["two.txt holds 2 lines"]
```
"""


def twenty_stories() -> str:
    lines = ["```prd", "version: 1", "title: Twenty stories", "summary: Four batches of five.", "stories:"]
    for n in range(1, 21):
        batch = (n - 1) // 5
        deps = f"[STORY-{(batch - 1) * 5 + 1:03d}]" if batch else "[]"
        lines += [
            f"  - id: STORY-{n:03d}",
            f"    title: File {n}",
            f"    depends_on: {deps}",
            f"    acceptance_criteria: [\"story-{n:03d}.txt contains the line 'done'\"]",
        ]
    return "\n".join([*lines, "```", ""])


def counted(h: Harness, since: int) -> list[str]:
    return [f"{r.method} {r.path}" for r in h.fake.rate_limited()[since:]]


async def waiting_plan(tmp: Path) -> tuple[int, int]:
    tmp.mkdir(parents=True)
    async with Harness(tmp) as h:
        h.fake.set_permission(REPO, "reader", "read")
        h.fake.add_issue(REPO, title="Waiting", body=SMALL)
        await h.deliver("issues", labeled(number=1, sender="octo-org"))
        await h.drain()
        (comment,) = h.plan_comments(1)
        start, polls = len(h.fake.rate_limited()), 0
        base = utcnow()
        for minute in range(24 * 60):
            h.services.clock = lambda m=minute: base + timedelta(minutes=m)  # type: ignore[misc]
            if minute == 5 * 60:
                h.fake.add_reaction(REPO, comment.id, "reader", "+1")
            polls += await queue_polls(h.services)
            await h.drain()
        assert decode_state(h.plan_comments(1)[0].body).status == PlanStatus.AWAITING_APPROVAL
        spent = counted(h, start)
        print("  requests:", dict(Counter(spent)) or "none")
        return len(spent), polls


async def twenty_story_plan(tmp: Path) -> int:
    tmp.mkdir(parents=True)
    remote = make_remote(tmp)
    script = agent_script(tmp, "ok.sh", 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n')
    config = (
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        'gates:\n  detect: false\n  custom:\n    - name: files\n      command: "ls story-*.txt"\n'
        "execution:\n  max_parallel: 5\n"
    )
    async with Harness(tmp, execute=True) as h:
        h.fake.repo(REPO).clone_url = f"file://{remote}"
        h.fake.set_file(REPO, ".github/plan-cascade.yml", config)
        h.fake.add_issue(REPO, title="Twenty", body=twenty_stories())
        start = len(h.fake.rate_limited())
        await h.deliver("issues", labeled(number=1, sender="octo-org"))
        await h.drain()
        approve = commented(number=1, body="/plan-cascade approve", user="octo-org", association="OWNER")
        await h.deliver("issue_comment", approve)
        await h.drain(timeout=900)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state.status == PlanStatus.COMPLETED, state.note
        assert len(h.fake.repo(REPO).pulls) == 4
        spent = counted(h, start)
        kinds = Counter(" ".join([*s.split()[:1], _shape(s.split()[1])]) for s in spent)
        for kind, n in kinds.most_common():
            print(f"  {n:4d}  {kind}")
        rules = sum(n for kind, n in kinds.items() if "/rules/branches/" in kind)
        return len(spent), rules


def _shape(path: str) -> str:
    return "/".join("{n}" if part.isdigit() else part for part in path.split("/"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the figures there (for bench/report.py)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("1. a plan awaiting approval for 24 hours (polled every simulated minute):")
        waited, polls = asyncio.run(waiting_plan(Path(tmp) / "wait"))
        print("2. a 20-story plan from the label to the last pull request:")
        ran, rules = asyncio.run(twenty_story_plan(Path(tmp) / "run"))
    print()
    print(f"{'measure':58} {'value':>8} {'target':>8}  met")
    rows = [
        (f"24 h awaiting approval ({polls} polls queued)", waited, 10),
        ("20-story plan, label to last PR", ran, 250),
    ]
    for name, value, target in rows:
        print(f"{name:58} {value:>8} {target:>8}  {'yes' if value <= target else 'NO'}")
    if args.json:
        figures = {
            "bench": "github_economy",
            "date": time.strftime("%Y-%m-%d"),
            "machine": f"{os.cpu_count()} cores (requests counted, not timed)",
            "command": " ".join(["bench/github_economy.py", *sys.argv[1:]]),
            "waiting": {"requests": waited, "polls": polls},
            "plan": {"requests": ran, "rules_reads": rules},
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
