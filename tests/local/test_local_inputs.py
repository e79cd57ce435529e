"""Bad input is refused with one line (and its problem lines) and leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.execution_support import agent_script, git
from tests.local.local_support import WRITE_DONE, branches, cli, make_user_repo, prd, script_config

GOOD_PRD = prd([("STORY-001", []), ("STORY-002", ["STORY-001"])])


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return agent_script(tmp_path, "agent.sh", f'echo "$1" >> {tmp_path / "calls.txt"}\n' + WRITE_DONE)


def _refused(capsys: pytest.CaptureFixture[str], code: int, *expected: str) -> list[str]:
    out, err = capsys.readouterr()
    assert code == 2, out + err
    lines = err.splitlines()
    assert lines and lines[0].startswith("error: "), err
    for text in expected:
        assert text in lines[0], lines[0]
    assert all(line.startswith("  - ") for line in lines[1:]), err
    return lines


def _nothing_left(repo: Path, calls: Path) -> None:
    assert not (repo / ".git" / "plan-cascade").exists(), "no mirror, no run file"
    assert branches(repo) == [] and not calls.exists(), "no branch, no agent run"


def test_a_directory_that_is_not_a_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (tmp_path / "prd.yaml").write_text(GOOD_PRD)
    code = cli("run", "--repo", str(plain), "--prd", str(tmp_path / "prd.yaml"), "--yes")
    _refused(capsys, code, "is not a git repository", "git init")
    assert list(plain.iterdir()) == []


def test_a_dirty_working_tree_unless_allowed(
    tmp_path: Path, agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_user_repo(tmp_path, config=script_config(agent))
    (repo / "README.md").write_text("# changed but not committed\n")
    (tmp_path / "prd.yaml").write_text(prd([("STORY-001", [])]))
    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"), "--yes")
    _refused(capsys, code, "uncommitted changes to 1 tracked file(s) (README.md)", "--allow-dirty")
    _nothing_left(repo, tmp_path / "calls.txt")

    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"), "--yes", "--allow-dirty")
    assert code == 0, capsys.readouterr()
    assert (repo / "README.md").read_text() == "# changed but not committed\n", (
        "the working tree is untouched"
    )
    (branch,) = branches(repo)
    assert git("show", f"{branch}:README.md", cwd=repo) == "# project", "the run started from HEAD"


def test_an_invalid_prd_shows_its_problem_lines(
    tmp_path: Path, agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_user_repo(tmp_path, config=script_config(agent))
    bad = GOOD_PRD.replace("depends_on: [STORY-001]", "depends_on: [STORY-009]").replace(
        "title: Write story-001.txt", "title: ''"
    )
    (tmp_path / "prd.yaml").write_text(bad)
    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"), "--yes")
    lines = _refused(capsys, code, "prd.yaml is not a valid PRD", "plan-cascade schema")
    problems = "\n".join(lines[1:])
    assert "STORY-009" in problems and len(lines) >= 3
    _nothing_left(repo, tmp_path / "calls.txt")


def test_an_invalid_config_shows_its_problem_lines(
    tmp_path: Path, agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = script_config(agent, "gates:\n  max_retries: -1\n  detekt: false\n")
    repo = make_user_repo(tmp_path, config=config)
    (tmp_path / "prd.yaml").write_text(GOOD_PRD)
    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"), "--yes")
    lines = _refused(capsys, code, ".github/plan-cascade.yml at HEAD", "2 problem(s)", "config validate")
    assert any("gates.max_retries" in line for line in lines[1:])
    assert any("gates.detekt" in line and "detect" in line for line in lines[1:]), "names the fix"
    _nothing_left(repo, tmp_path / "calls.txt")


@pytest.mark.parametrize(
    ("config", "binary"),
    [
        ("agent:\n  default: claude-code\n", "claude"),
        (
            'agent:\n  default: mine\n  commands:\n    mine: "no-such-agent-xyz {story_id}"\n',
            "no-such-agent-xyz",
        ),
    ],
)
def test_a_missing_agent_binary_names_it_and_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    binary: str,
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    repo = make_user_repo(tmp_path, config=config)
    (tmp_path / "prd.yaml").write_text(GOOD_PRD)
    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"), "--yes")
    _refused(capsys, code, f"binary `{binary}` not installed", "ANTHROPIC_API_KEY")
    _nothing_left(repo, tmp_path / "calls.txt")


def test_no_terminal_and_no_yes_refuses(
    tmp_path: Path, agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_user_repo(tmp_path, config=script_config(agent))
    (tmp_path / "prd.yaml").write_text(GOOD_PRD)
    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"))
    _refused(capsys, code, "no terminal to ask for approval", "--yes")
    code = cli("run", "--repo", str(repo), "--prd", str(tmp_path / "prd.yaml"), "--approve-batch", "7")
    _refused(capsys, code, "there is no batch 7")
    _nothing_left(repo, tmp_path / "calls.txt")


def test_planning_without_an_llm_key_names_the_variable(
    tmp_path: Path, agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_user_repo(tmp_path, config=script_config(agent))
    _refused(capsys, cli("plan", "add a --verbose flag", "--repo", str(repo)), "set ANTHROPIC_API_KEY")
    _refused(
        capsys, cli("run", "add a --verbose flag", "--repo", str(repo), "--yes"), "set ANTHROPIC_API_KEY"
    )
    _nothing_left(repo, tmp_path / "calls.txt")


def test_schema_prints_the_prd_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("schema") == 0
    schema = json.loads(capsys.readouterr().out)
    assert "stories" in schema["properties"] and "title" in schema["required"]


def test_config_schema_and_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("config", "schema") == 0
    schema = json.loads(capsys.readouterr().out)
    assert "plan-cascade.yml" in schema["title"] and "gates" in schema["properties"]

    repo = make_user_repo(tmp_path, config="gates:\n  max_retries: 1\n")
    monkeypatch.chdir(repo)
    assert cli("config", "validate") == 0
    assert capsys.readouterr().out.strip() == f"ok: {repo / '.github/plan-cascade.yml'} is valid"

    bad = tmp_path / "bad.yml"
    bad.write_text("gates:\n  max_retries: many\nexecution:\n  stacking: sideways\n")
    assert cli("config", "validate", str(bad)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{bad}: 2 problem(s)"
    assert any(line.startswith("  - gates.max_retries:") for line in lines)
    assert any(line.startswith("  - execution.stacking:") and "sequential" in line for line in lines)

    assert cli("config", "validate", str(tmp_path / "missing.yml")) == 2
    assert "does not exist" in capsys.readouterr().err
