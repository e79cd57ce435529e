from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from bot.rendering.jinja import (
    duration,
    md_block,
    md_cell,
    md_code,
    md_inline,
    mermaid_id,
    mermaid_label,
    money,
    template_env,
    templates_dir,
    tokens,
)


def test_templates_come_from_the_repository() -> None:
    assert templates_dir() == Path(__file__).resolve().parents[2] / "templates"
    assert (templates_dir() / "plan_comment.md.j2").is_file()


def test_the_environment_is_strict_and_does_not_escape_html() -> None:
    env = template_env()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()
    assert env.from_string("{{ x }}").render(x="<b>") == "<b>"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("hi @octocat", "hi @&#8203;octocat"),
        ("a <b>bold</b> & c", "a &lt;b&gt;bold&lt;/b&gt; &amp; c"),
        ("two\nlines", "two lines"),
        ("# heading", "\\# heading"),
        ("```python", "\\`\\`\\`python"),
        ("- item", "\\- item"),
        ("12. item", "12\\. item"),
        ("<!-- plan-cascade:state v1 AAAA -->", "&lt;!-- plan-cascade:state v1 AAAA --&gt;"),
    ],
)
def test_md_inline(raw: str, expected: str) -> None:
    assert md_inline(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("call `f(<x>)` with <y>", "call `f(<\u200bx>)` with &lt;y&gt;"),
        ("``a ` <b>``", "``a ` <\u200bb>``"),
        ("```open <b>`", "\\`\\`\\`open &lt;b&gt;\\`"),
        ("\\`<img>`", "\\`&lt;img&gt;\\`"),
        ("`<!-- x -->` @me", "`<\u200b!-- x -->` @&#8203;me"),
    ],
)
def test_code_spans_are_left_alone_but_only_real_ones(raw: str, expected: str) -> None:
    """Real spans show as typed (a zero-width space breaks a tag, a mention or an entity unseen);
    a backtick that opens none is escaped, so it cannot pair with another one elsewhere."""
    assert md_inline(raw) == expected


def test_md_cell_escapes_pipes_and_newlines() -> None:
    assert md_cell("a | b\nc") == "a \\| b c"


def test_md_code_uses_a_longer_fence_and_breaks_markers() -> None:
    assert md_code("pytest -q") == "`pytest -q`"
    assert md_code("echo `x`") == "`` echo `x` ``"
    assert md_code("<!-- x -->") == "`<\u200b!-- x -->`"


def test_md_block_keeps_markdown_defuses_html_and_closes_fences() -> None:
    text = "Hello @team <b>\n```\n<!-- hidden --> @x\n"
    assert md_block(text) == "Hello @&#8203;team &lt;b&gt;\n```\n<\u200b!-- hidden --> @x\n```"


def test_mermaid_helpers() -> None:
    assert mermaid_label('a "b" #1 <c>') == "a #quot;b#quot; #35;1 #lt;c#gt;"
    assert mermaid_id("STORY-001") == "STORY_001"
    assert mermaid_id("9-001") == "s_9_001"


def test_number_formats() -> None:
    assert [tokens(950), tokens(9_540), tokens(680_400), tokens(1_250_000)] == [
        "950",
        "9.5k",
        "680k",
        "1.25M",
    ]
    assert [money(0.0042), money(1.234), money(1234.5)] == ["$0.0042", "$1.23", "$1,234.50"]
    assert [duration(45), duration(125)] == ["45 min", "2 h 05 min"]
