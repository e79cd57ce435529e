"""`md_block` checked against a CommonMark parser (markdown-it-py): whatever it is given, what it
emits renders with no live @mention outside code and no raw HTML. GitHub renders with cmark-gfm,
which follows CommonMark's rules for code fences and code spans.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.rendering.jinja import md_block, md_inline

MENTION = re.compile(r"@[A-Za-z0-9]")
"""What GitHub pings: `@` then a letter or digit (a zero-width space between breaks it)."""
PARSER = MarkdownIt("commonmark")


def live(markdown: str) -> list[str]:
    """Mentions outside code and raw HTML that a CommonMark render of ``markdown`` has."""
    found: list[str] = []

    def walk(tokens: list[Token]) -> None:
        for token in tokens:
            if token.type in ("html_block", "html_inline"):
                found.append(f"raw HTML {token.content!r}")
            elif token.type == "text" and MENTION.search(token.content):
                found.append(f"mention in {token.content!r}")
            if token.children:
                walk(token.children)

    walk(PARSER.parse(markdown))
    return found


@pytest.mark.parametrize(
    "text",
    [
        # A backtick in a backtick fence's info string: not a fence (CommonMark 4.5).
        "``` x`y\n@octocat <img src=x>\n```",
        "```` a`b\n<details>@team</details>\n````",
        # A closing fence cannot carry an info string: CommonMark keeps the block open, and the
        # next fence line closes it, so what follows is text.
        "```\ncode\n``` not-closing\n```\n@octocat <b>hi</b>\n```",
        # A fence indented under a list item belongs to the item; a line less indented ends both.
        "- item\n  ```\n@octocat <b>x</b>\n```",
        "1. item\n   ~~~\n@octocat\n~~~",
        # Four spaces: an indented code block, not a fence.
        "    ```\n@octocat <b>\n```\n",
        # A backtick left open on one line pairs with one on the next line.
        "a ` b\n`@octocat` <b>`",
        # A link destination takes the backtick before a code span can.
        "[a](`x) @octocat <b>y</b> `z`",
        "[a](`x) &#64;octocat `z`",
    ],
)
def test_md_block_leaves_nothing_live_where_commonmark_renders_text(text: str) -> None:
    assert live(md_block(text)) == []


@pytest.mark.parametrize("text", ["[a](`x) @octocat <b>y</b> `z`", "see [a](`x) &#64;octocat `z`"])
def test_md_inline_leaves_nothing_live_after_a_link_destination(text: str) -> None:
    assert live(md_inline(text)) == []


def test_real_fences_and_code_spans_keep_their_text() -> None:
    text = "Run:\n```python\n@decorator\nif a < b: pass\n```\nthen `x` and ~~~ later\n~~~ sh\n<x> @y\n~~~"
    rendered = PARSER.render(md_block(text))
    assert "@decorator\nif a &lt; b: pass" in rendered  # untouched inside the fence
    assert "&lt;x&gt; @y" in rendered
    assert "<code>x</code>" in rendered and live(md_block(text)) == []


PIECES = [
    "```", "~~~", "````", "`", "``", " ", "   ", "    ", "\t", "\n", "\n\n", "x", "y`z", "\\",
    "@octocat", "@", "<b>", "</b>", "<!--", "-->", "<img src=x>", "&#64;", "&", "- ", "1. ", "> ",
    "[a](", ")", "]", "(", '"', "*", "_", "#", "|",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_whatever_md_block_emits_renders_nothing_live(text: str) -> None:
    assert live(md_block(text)) == [], md_block(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_whatever_md_inline_emits_renders_nothing_live(text: str) -> None:
    assert live(md_inline(text)) == [], md_inline(text)
