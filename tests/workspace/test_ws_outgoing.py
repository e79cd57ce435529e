"""What a push would carry, read from real git: the lines and the names of every commit, however
the files are named, and nothing a file's content writes can hide a line from the scan."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bot.network.secretscan import NAME_LINE, AddedLine
from bot.workspace.mirror import Mirror
from bot.workspace.outgoing import (
    INLINE_SCAN,
    added_lines,
    changed_paths,
    commits_diff,
    outgoing_secrets,
    read_log,
    staged_diff,
)
from bot.workspace.worktree import Worktree, add_worktree
from tests.execution_support import git, make_remote
from tests.support import CountingExecutor

AWS_KEY = "AKIA" + "Q3X7ZP2M4N6B8V1C"
GITHUB_TOKEN = "ghp_" + "1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ1"


async def worktree(tmp: Path) -> tuple[Worktree, str]:
    mirror = Mirror(root=tmp / "data", clone_url=f"file://{make_remote(tmp)}")
    await mirror.fetch()
    base = await mirror.resolve("refs/remotes/origin/main")
    wt = await add_worktree(mirror, branch="plan-cascade/1/story-001", base_ref=base, path=tmp / "wt")
    return wt, base


def commit(wt: Worktree, files: dict[bytes, bytes], message: str = "work") -> str:
    """Write `files` (names and contents as bytes: any a file system takes) and commit them all."""
    for name, data in files.items():
        path = Path(os.fsdecode(os.path.join(os.fsencode(wt.path), name)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git("add", "-A", cwd=wt.path)
    git("commit", "-q", "--allow-empty", "-m", message, cwd=wt.path)
    return git("rev-parse", "HEAD", cwd=wt.path)


async def test_a_file_named_with_a_space_is_told_by_its_name_and_ignored_by_it(tmp_path: Path) -> None:
    """git ends a `+++` line with a TAB when the name holds a space: it is not part of the name."""
    wt, base = await worktree(tmp_path)
    head = commit(wt, {b"my dir/conf.py": f'KEY = "{AWS_KEY}"\n'.encode(), b'say "hi" now.py': b"x = 1\n"})
    found = await outgoing_secrets(wt, since=base, head=head, known=[], ignore=[])
    assert [(f.path, f.line) for f in found] == [("my dir/conf.py", 1)]
    assert await outgoing_secrets(wt, since=base, head=head, known=[], ignore=["my dir/*"]) == []
    diff = await commits_diff(wt, since=base, head=head)
    lines, _ = read_log(diff)
    assert {a.path for a in lines} == {"my dir/conf.py", 'say "hi" now.py'}


async def test_every_name_a_push_adds_is_read_whole_however_it_is_spelt(tmp_path: Path) -> None:
    """Names with spaces, quotes, newlines, tabs, ` b/`, bytes that are not UTF-8 or a token, added,
    renamed (no line) or empty (no line): each is scanned as a name, newest commit first, once."""
    wt, base = await worktree(tmp_path)
    names = [b"a b/c b/d.txt", b'q"uote', b"new\nline", b"ta\tb", b"bad\xffname", b" lead and trail "]
    names.append(b"\nnl\n")
    first = commit(wt, {name: b"x\n" for name in names} | {b"empty": b"", b"old.txt": b"same\n" * 5})
    (wt.path / "keys").mkdir()
    git("mv", "old.txt", f"keys/{GITHUB_TOKEN}.txt", cwd=wt.path)
    head = commit(wt, {b"later.py": b"y = 2\n"})
    lines, paths = read_log(await commits_diff(wt, since=base, head=head))
    spelt = [os.fsdecode(n).encode("utf-8", "surrogateescape").decode("utf-8", "replace") for n in names]
    assert paths == [f"keys/{GITHUB_TOKEN}.txt", "later.py", *sorted([*spelt, "empty", "old.txt"])]
    expected = [(name, 1, "x") for name in spelt] + [("old.txt", n, "same") for n in range(1, 6)]
    assert sorted((a.path, a.line, a.text) for a in lines) == sorted([*expected, ("later.py", 1, "y = 2")])
    found = await outgoing_secrets(wt, since=first, head=head, known=[], ignore=[])
    told = [(f.where(), f.line, f.rule) for f in found]
    assert told == [("keys/***.txt (the file's name)", NAME_LINE, "GitHub Token")]


async def test_what_a_file_writes_cannot_hide_a_line_or_add_a_name(tmp_path: Path) -> None:
    """Content that looks like the log's own records (read `--text`) is a line, nothing more."""
    wt, base = await worktree(tmp_path)
    forged = b"\0commit " + b"1" * 40 + b"\0\n:000000 100644 0000000 1111111 A\0forged\0\0"
    forged += b"diff --git a/x b/x\n"
    head = commit(wt, {b"data.bin": forged + f'KEY = "{AWS_KEY}"\n'.encode()})
    lines, paths = read_log(await commits_diff(wt, since=base, head=head))
    assert paths == ["data.bin"]
    assert [a.path for a in lines] == ["data.bin"] * 3
    found = await outgoing_secrets(wt, since=base, head=head, known=[], ignore=[])
    assert [(f.path, f.line, f.rule) for f in found] == [("data.bin", 3, "AWS Access Key")]


def stage(wt: Worktree, files: dict[bytes, bytes | None]) -> None:
    """Write (or, for None, delete) `files` and stage everything, as the engine does before its commit."""
    for name, data in files.items():
        path = Path(os.fsdecode(os.path.join(os.fsencode(wt.path), name)))
        if data is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git("add", "-A", cwd=wt.path)


async def test_the_index_read_before_its_commit_is_what_the_commit_pushes(tmp_path: Path) -> None:
    """`staged_diff` (read beside the commit) gives the scan exactly what `commits_diff` gives for
    that commit afterwards: every line and every name, however spelt, renames, deletions, content
    that looks like the log's records, and attributes that would make a file binary."""
    wt, base = await worktree(tmp_path)
    first = commit(wt, {b"old.txt": b"same\n" * 5, b"gone.py": b"bye\n"})
    (wt.path / "keys").mkdir()
    git("mv", "old.txt", f"keys/{GITHUB_TOKEN}.txt", cwd=wt.path)
    forged = b"\0commit " + b"1" * 40 + b"\0\n:000000 100644 0000000 1111111 A\0forged\0\0"
    files: dict[bytes, bytes | None] = {
        name: b"x\n" for name in (b"a b/c b/d.txt", b"new\nline", b"ta\tb", b"bad\xffname")
    }
    files |= {
        b"gone.py": None,
        b"data.bin": forged + f'KEY = "{AWS_KEY}"\n'.encode(),
        b".gitattributes": b"* -diff binary\n",
        b"empty": b"",
    }
    stage(wt, files)
    staged = await staged_diff(wt, since=first)
    head = commit(wt, {})
    assert read_log(staged) == read_log(await commits_diff(wt, since=first, head=head))
    lines, paths = read_log(staged)
    assert f"keys/{GITHUB_TOKEN}.txt" in paths and "data.bin" in paths
    assert AWS_KEY in [a.text for a in lines if a.path == "data.bin"][-1]
    found = await outgoing_secrets(wt, since=first, head=head, known=[], ignore=[], staged=_ready(staged))
    assert sorted((f.where(), f.rule) for f in found) == [
        ("data.bin:2", "AWS Access Key"),
        ("keys/***.txt (the file's name)", "GitHub Token"),
    ]
    nothing = await staged_diff(wt, since=head)  # nothing staged: a commit of no change
    assert read_log(nothing) == ([], [])
    assert base != first


async def test_the_paths_an_index_read_names_are_those_git_diff_numstat_lists(tmp_path: Path) -> None:
    """The dependency check takes the paths a story's commit changes, and the lines each adds (the
    order it reads them in), from the scan's read of the index (`changed_paths`): the paths and
    counts `git diff --numstat --no-renames` gives, a rename as its two names (the lines its
    rename changed), a binary file's lines counted as text's."""
    wt, _ = await worktree(tmp_path)
    first = commit(wt, {b"old.txt": b"same\n" * 5, b"gone.py": b"bye\n", b"run.sh": b"echo\n"})
    (wt.path / "moved").mkdir()
    git("mv", "old.txt", "moved/old.txt", cwd=wt.path)
    (wt.path / "run.sh").chmod(0o755)
    files: dict[bytes, bytes | None] = {
        name: b"x\ny\n" for name in (b"a b/c d.txt", b"new\nline", b"ta\tb", b"bad\xffname")
    }
    files |= {b"gone.py": None, b"blob.bin": b"\0\x01\n\x02\n", b"empty": b"", b"requirements.txt": b"a==1\n"}
    stage(wt, files)
    found = changed_paths(await staged_diff(wt, since=first))
    head = commit(wt, {})
    listed = await wt.mirror.git("diff", "--numstat", "--no-renames", "-z", first, head, "--")
    numstat = {}
    for entry in listed.stdout.split("\0"):
        fields = entry.split("\t", 2)
        if len(fields) == 3:
            numstat[fields[2]] = int(fields[0]) if fields[0].isdigit() else 0
    assert found.keys() == numstat.keys()
    differ = {"moved/old.txt": (0, 5), "blob.bin": (2, 0)}
    assert {p: (found[p], numstat[p]) for p in found if found[p] != numstat[p]} == differ
    assert found["requirements.txt"] == 1 and found["run.sh"] == 0 and found["gone.py"] == 0
    assert changed_paths(await staged_diff(wt, since=head)) == {}
    with pytest.raises(ValueError):
        changed_paths("diff --git a/x b/x\n")


async def _ready(text: str) -> str:
    return text


async def test_empty_commits_and_merges_are_read_as_their_first_parent_diff(tmp_path: Path) -> None:
    wt, base = await worktree(tmp_path)
    commit(wt, {}, "empty")
    git("checkout", "-q", "-b", "side", base, cwd=wt.path)
    side = commit(wt, {b"side.py": f'KEY = "{AWS_KEY}"\n'.encode()})
    git("checkout", "-q", "plan-cascade/1/story-001", cwd=wt.path)
    commit(wt, {b"main.py": b"z = 3\n"})
    git("merge", "-q", "--no-edit", side, cwd=wt.path)
    head = commit(wt, {}, "empty again")
    lines, paths = read_log(await commits_diff(wt, since=base, head=head))
    assert paths == ["side.py", "main.py"]  # the merge's first-parent diff brings side.py; newest first
    assert sorted((a.path, a.line) for a in lines) == [("main.py", 1), ("side.py", 1), ("side.py", 1)]


def test_a_commit_whose_records_have_no_patch_keeps_the_next_ones_names() -> None:
    one = "\0commit " + "1" * 40 + "\0\n:000000 100644 0000000 1111111 A\0one\0\0"
    two = "\0commit " + "2" * 40 + "\0\n:000000 100644 0000000 2222222 A\0two\0\0"
    two += "diff --git a/two b/two\nnew file mode 100644\n--- /dev/null\n+++ b/two\n@@ -0,0 +1 @@\n+2\n"
    assert read_log(one + two) == ([AddedLine("two", 1, "2")], ["two", "one"])
    assert read_log(two + one) == ([AddedLine("two", 1, "2")], ["one", "two"])


@pytest.mark.parametrize(
    "text",
    [
        "\0commit " + "1" * 40 + "\0\n:000000 100644 0000000 1111111 Q\0x\0\0",  # unknown status
        "\0commit " + "1" * 40 + "\0\n:000000 100644 0000000 1111111 A\0x\0",  # no patch after the records
        "commit " + "1" * 40 + "\0",  # not a header
    ],
)
def test_output_that_is_not_the_logs_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="git log"):
        read_log(text)


def test_the_tab_git_ends_a_plus_line_with_is_not_part_of_the_name() -> None:
    patch = "diff --git a/x y b/x y\nnew file mode 100644\n--- /dev/null\n+++ b/x y\t\n@@ -0,0 +1 @@\n+hi\n"
    assert list(added_lines(patch)) == [AddedLine("x y", 1, "hi")]


async def test_a_few_lines_are_scanned_on_the_loop_and_many_in_a_thread(tmp_path: Path) -> None:
    """Scanning a few added lines takes less than a hand-off to a thread and back under load: a
    small change is scanned on the event loop, a large one off it."""
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    wt, base = await worktree(tmp_path)
    small = commit(wt, {b"small.py": f'KEY = "{AWS_KEY}"\n'.encode()})
    found = await outgoing_secrets(wt, since=base, head=small, known=[], ignore=[])
    assert [f.rule for f in found] == ["AWS Access Key"] and executor.handed == 0
    large = commit(wt, {b"large.py": b"".join(b"x%d = %d\n" % (i, i) for i in range(INLINE_SCAN // 8))})
    assert await outgoing_secrets(wt, since=small, head=large, known=[], ignore=[]) == []
    assert executor.handed == 1
