"""The fake GitHub over real HTTP: for clients that cannot take an ASGI transport (git, subprocesses)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from bot.testing.fake_github import FakeGitHub


@contextmanager
def serve(fake: FakeGitHub, *, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve `fake` over real HTTP on a free port of `host` (a thread); yield its API base URL.

    The fake's payload URLs are pointed at the live address for the duration.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    prefix = httpx.URL(fake.urls.api).path.rstrip("/")
    saved = (fake.urls.api, fake.urls.html)
    fake.urls.api, fake.urls.html = f"http://{host}:{port}{prefix}", f"http://{host}:{port}"
    server = uvicorn.Server(uvicorn.Config(fake.app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("FakeGitHub server did not start")
            time.sleep(0.01)
        yield fake.urls.api
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        fake.urls.api, fake.urls.html = saved
