"""The shared transport keeps one pool across githubkit's per-request clients."""

from __future__ import annotations

from bot.github.auth import token_port
from bot.github.transport import SharedTransport
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_serve import serve


async def test_requests_reuse_the_shared_transport_after_each_client_closes_it() -> None:
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo("o/r")
    fake.add_issue("o/r", title="one")
    transport = SharedTransport()
    with serve(fake) as api:
        port = token_port("ghs_test", base_url=api, transport=transport)
        for _ in range(3):  # each githubkit request opens and closes a client
            assert (await port.get_issue("o/r", 1)).title == "one"
        assert (await port.get_repository("o/r")).full_name == "o/r"
    await transport.shutdown()
