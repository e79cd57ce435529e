"""The `postgres` tests' server (`tests.pgserver`, issue 48): the local one when it answers, else
a throwaway one from the installed binaries; a skip with the install command only where
PostgreSQL is not installed, and a failure instead where REQUIRE_POSTGRES=1 (CI)."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from tests import pgserver


@pytest.mark.postgres
def test_a_throwaway_server_starts_answers_and_is_removed(tmp_path: Path) -> None:
    bindir = pgserver.find_bindir()
    if bindir is None:  # like the postgres tests: a skip only where it is not installed, never in CI
        pgserver.session_url(None)
    unused = f"postgresql://postgres@127.0.0.1:{pgserver.free_port()}/postgres"  # nobody listens there
    assert not pgserver.answers(unused)
    server = pgserver.start_throwaway(bindir)
    try:
        assert pgserver.answers(server.url) and server.port != 5432
        data = server.root / "data"
        if os.geteuid() == 0:  # PostgreSQL refuses root: the cluster is an unprivileged user's
            assert server.user == pgserver.UNPRIVILEGED
            assert data.stat().st_uid == pwd.getpwnam(pgserver.UNPRIVILEGED).pw_uid
        pid = int((data / "postmaster.pid").read_text().split()[0])
        owner = subprocess.run(["ps", "-o", "user=", "-p", str(pid)], capture_output=True, text=True)
        assert owner.stdout.strip() == (server.user or pwd.getpwuid(os.geteuid()).pw_name)
    finally:
        server.stop()
    assert not pgserver.answers(server.url) and not server.root.exists()


def test_resolve_prefers_the_local_server_and_finds_nothing_where_nothing_is_installed(
    tmp_path: Path,
) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{pgserver.free_port()}/postgres"
    assert pgserver.resolve(nowhere, search=(), path=str(tmp_path)) is None  # no binaries: nothing to start
    assert pgserver.find_bindir(search=(str(tmp_path / "*"),), path=str(tmp_path)) is None
    for version in ("13", "16"):  # a distribution's folders: the newest one
        folder = tmp_path / "lib" / version / "bin"
        folder.mkdir(parents=True)
        for name in ("initdb", "pg_ctl"):
            (folder / name).write_text("#!/bin/sh\n")
    assert pgserver.find_bindir(search=(str(tmp_path / "lib/*/bin"),), path=str(tmp_path)) == (
        tmp_path / "lib" / "16" / "bin"
    )


def test_not_installed_skips_with_the_install_command_and_fails_where_it_is_required() -> None:
    assert pgserver.session_url("postgresql://x", environ={}) == "postgresql://x"
    with pytest.raises(pytest.skip.Exception, match="apt-get install postgresql") as skipped:
        pgserver.session_url(None, environ={})
    assert "-m 'not postgres'" in str(skipped.value)
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_POSTGRES=1, but PostgreSQL is not installed"):
        pgserver.session_url(None, environ={"REQUIRE_POSTGRES": "1"})
