"""Every relative link and `#anchor` in README.md and docs/ leads somewhere (GitHub's anchor rules)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs_support import ROOT, anchors, links, name, pages, slug

README_LINES = 150
"""The README is a front door: what Plan Cascade is, the quick start, the docs' map."""


def _broken(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for link in links(page):
        href = link.href
        if not href or href.startswith(("http://", "https://", "mailto:")):
            continue
        where = f"{page.relative_to(root)}:{link.line}"
        path_part, _, fragment = href.partition("#")
        target = (page.parent / unquote(path_part)).resolve() if path_part else page
        try:
            shown = str(target.relative_to(root))
        except ValueError:
            problems.append(f"{where}: `{href}` points outside the repository")
            continue
        if not target.exists():
            problems.append(f"{where}: `{href}`: there is no {shown}; fix the path or write the page")
            continue
        if fragment and target.suffix == ".md" and unquote(fragment) not in anchors(target):
            near = sorted(a for a in anchors(target) if a[:6] == fragment[:6])[:5]
            problems.append(
                f"{where}: `{href}`: {shown} has no heading whose anchor is #{fragment}"
                + (f" (it has {', '.join('#' + a for a in near)})" if near else "")
            )
    return problems


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    problems = _broken(page)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_checker_finds_a_broken_anchor_and_a_missing_page(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## Details\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# A title\n\n[ok](#a-title) [bad](#no-such) [gone](nothing-here.md) [x](other.md#details)\n"
        "[y](other.md#detail) [out](../../elsewhere.md) [web](https://example.com/#x)\n"
    )
    problems = _broken(page, tmp_path)
    assert len(problems) == 4, problems
    assert "#no-such" in problems[0] and "nothing-here.md" in problems[1]
    assert "has no heading whose anchor is #detail (it has #details)" in problems[2]
    assert "outside the repository" in problems[3]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Judged against the base: a story is blamed only for what it makes worse",
         "judged-against-the-base-a-story-is-blamed-only-for-what-it-makes-worse"),
        ("MCP servers: tools from the repository's own context",
         "mcp-servers-tools-from-the-repositorys-own-context"),
        ("`PLAN_CASCADE_MCP_<NAME>`", "plan_cascade_mcp_name"),
        ("`agent.mcp_servers.<name>`", "agentmcp_serversname"),
        ("Set-up: each story's environment", "set-up-each-storys-environment"),
    ],
)  # fmt: skip
def test_anchors_follow_githubs_slug_rules(heading: str, anchor: str) -> None:
    assert slug(heading.replace("`", "")) == anchor


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_LINES, (
        f"README.md has {lines} lines, more than {README_LINES}: move the detail to the docs page it "
        "belongs to and link it from the README's documentation map"
    )


def test_the_readme_shows_cis_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = ci.index("# The README's test command, verbatim:")
    command = ci[marker + 1]
    assert command in (ROOT / "README.md").read_text(encoding="utf-8"), (
        f"README.md must show .ci/run's test command verbatim: {command}"
    )


def test_every_docs_page_is_on_the_readmes_map() -> None:
    readme = {link.href.partition("#")[0] for link in links(ROOT / "README.md")}
    missing = [name(p) for p in sorted((ROOT / "docs").glob("*.md")) if name(p) not in readme]
    assert not missing, f"add a row for each to the README's Documentation table: {missing}"
