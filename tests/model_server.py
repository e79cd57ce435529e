"""A scripted model served over loopback HTTP, for code that builds its own LLM client from a
base URL (the server process, the Action): the provider code, prices and all, run for real."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.testing.fake_llm import FakeAnthropic
from bot.testing.server_process import free_port


@contextmanager
def serve_anthropic(fake: FakeAnthropic) -> Iterator[str]:
    """`fake` as the Messages API on 127.0.0.1; yields its base URL."""

    async def messages(request: Request) -> Response:
        answer = fake.handle(httpx2.Request("POST", str(request.url), content=await request.body()))
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")

    port = free_port()
    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
