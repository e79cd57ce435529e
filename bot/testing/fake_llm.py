"""Model APIs that account prompt caching the way the providers document it, for tests and benches.

`FakeAnthropic` serves `POST /v1/messages`: a request's prefix (tools, then system, then the
messages' blocks, in that order) up to each `cache_control` breakpoint is written to the cache;
a later request reads the longest prefix ending at a block boundary that was written before
(`cache_read_input_tokens`), writes up to its last breakpoint (`cache_creation_input_tokens`)
and pays full price for the rest (`input_tokens`). At most 4 breakpoints are allowed (400).

`FakeOpenAI` serves `POST /v1/chat/completions` with automatic caching: the longest prefix
shared with an earlier request, counted in 128-token steps once it reaches 1,024 tokens, is
`prompt_tokens_details.cached_tokens`.

Tokens are estimated as characters / 4 of each block's canonical JSON. Answers come from a
script: a list of tool calls (name, arguments); after the script, `finish` is called.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import httpx2


def tokens_of(value: Any) -> int:
    """A stable token estimate of a JSON value."""
    return max(1, len(json.dumps(value, sort_keys=True, ensure_ascii=False)) // 4)


@dataclass
class _Script:
    steps: list[tuple[str, dict[str, Any]]]
    calls: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)

    def next_call(self) -> tuple[str, dict[str, Any]]:
        step = self.steps[self.calls] if self.calls < len(self.steps) else ("finish", {"summary": "done"})
        self.calls += 1
        return step


class FakeAnthropic(_Script):
    """The Messages API with explicit cache breakpoints."""

    def __init__(self, steps: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(steps)
        self.cached: set[str] = set()

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        blocks = [*body.get("tools", [])]
        system = body.get("system") or []
        blocks += [{"type": "text", "text": system}] if isinstance(system, str) else system
        for turn in body["messages"]:
            content = turn["content"]
            blocks += [{"type": "text", "text": content}] if isinstance(content, str) else content
        marks = [i for i, block in enumerate(blocks) if "cache_control" in block]
        if len(marks) > 4:
            error = {"type": "invalid_request_error", "message": "A maximum of 4 blocks with cache_control"}
            return httpx2.Response(400, json={"type": "error", "error": error})
        digest, total, prefixes = hashlib.sha256(), 0, []
        for block in blocks:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps(plain, sort_keys=True).encode())
            total += tokens_of(plain)
            prefixes.append((digest.hexdigest(), total))
        last = marks[-1] if marks else -1
        read = max((t for i, (h, t) in enumerate(prefixes) if i <= last and h in self.cached), default=0)
        written = prefixes[last][1] - read if last >= 0 else 0
        for i in marks:
            self.cached.add(prefixes[i][0])
        name, arguments = self.next_call()
        usage = {
            "input_tokens": total - read - written,
            "output_tokens": 60,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }
        content = [{"type": "tool_use", "id": f"toolu_{self.calls:04d}", "name": name, "input": arguments}]
        message = {
            "id": f"msg_{self.calls:04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": usage,
        }
        return httpx2.Response(200, json=message)


class FakeOpenAI(_Script):
    """Chat completions with automatic prefix caching."""

    def __init__(self, steps: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(steps)
        self.seen: list[str] = []

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        text = json.dumps({"tools": body.get("tools"), "messages": body["messages"]}, sort_keys=False)
        prompt = max(1, len(text) // 4)
        shared = max((_common(text, old) for old in self.seen), default=0) // 4
        cached = 0 if shared < 1024 else 1024 + (shared - 1024) // 128 * 128
        self.seen.append(text)
        name, arguments = self.next_call()
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"call_{self.calls:04d}", "type": "function", "function": function}
        answer = {
            "id": f"chatcmpl-{self.calls:04d}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": 60,
                "total_tokens": prompt + 60,
                "prompt_tokens_details": {"cached_tokens": min(cached, prompt)},
            },
        }
        return httpx2.Response(200, json=answer)


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
