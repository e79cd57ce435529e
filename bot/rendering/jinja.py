"""The Jinja2 environment for everything the bot writes, and its Markdown filters.

Templates live in the repository's ``templates/`` directory, which the wheel ships
as ``bot/_templates``. Text from an LLM or a user is untrusted: the filters here make
sure it renders as plain text - no @mention pings, no HTML, no hidden marker blocks,
no broken tables or fences.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jinja2

import bot

COMMAND = "/plan-cascade"
"""The prefix of every command."""
_ZWSP_ENTITY = "&#8203;"
_BLOCK_START = re.compile(r"^(?:[#>+\-*=|~_]|```|\d+[.)])")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")


def templates_dir() -> Path:
    """``bot/_templates`` in an installed wheel, else the repository's ``templates/``."""
    packaged = Path(bot.__file__).parent / "_templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "templates"


_CODE_SPAN = re.compile(r"(?<![`\\])(`++)(?!`)(.+?)(?<!`)\1(?!`)")
_OPEN_TICK = re.compile(r"(?<!\\)((?:\\\\)*)`")
"""A backtick no backslash escapes (an even run of backslashes before it escapes itself)."""
_IN_CODE = str.maketrans({"<": "<\u200b", "@": "@\u200b", "&": "&\u200b"})
"""Inside a code span: a zero-width space after what could start a tag, a mention or an entity."""


def _escape_text(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("@", "@" + _ZWSP_ENTITY)


def _neutralise(text: str) -> str:
    """Escape HTML and break @mentions outside code spans; inside them, break them invisibly.

    Inside a code span entities are not decoded, so ``&lt;`` would show as typed: a zero-width
    space after ``<``, ``@`` and ``&`` breaks a tag, a mention or an entity and shows nothing,
    which holds even where CommonMark reads the span as text after all (a link destination
    ``[a](`x)`` takes the backtick first). A backtick that opens no span here is
    backslash-escaped, so it cannot pair with one on another line of the same paragraph.
    """
    out: list[str] = []
    last = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_escape_text(_OPEN_TICK.sub(r"\1\\`", text[last : match.start()])))
        out.append(match.group(0).translate(_IN_CODE))
        last = match.end()
    out.append(_escape_text(_OPEN_TICK.sub(r"\1\\`", text[last:])))
    return "".join(out)


def md_inline(value: object) -> str:
    """Untrusted text as one line of plain Markdown text.

    Newlines become spaces, HTML is escaped, ``@`` gets a zero-width space so GitHub
    does not ping, and a leading block marker (``#``, ``>``, ``-``, a fence, ``1.``)
    is backslash-escaped so the text cannot start a heading, quote, list or code block.
    """
    text = " ".join(str(value).split())
    match = _BLOCK_START.match(text)
    if match:
        marker = match.group(0)
        at = len(marker) - 1 if marker[0].isdigit() else 0
        text = text[:at] + "\\" + text[at:]
    return _neutralise(text)


def html_inline(value: object) -> str:
    """Untrusted text as one line inside an HTML block (``<summary>``): escaped, mentions broken."""
    return _escape_text(" ".join(str(value).split()))


def mention(login: object) -> str:
    """``@login`` as text that shows the login but does not ping it."""
    return md_inline(f"@{login}")


def plural(count: int, one: str, many: str) -> str:
    """``1 story``, ``3 stories``."""
    return f"{count} {one if count == 1 else many}"


def duration(minutes: float) -> str:
    """``45 min``, ``2 h 05 min``."""
    whole = max(0, round(minutes))
    return f"{whole} min" if whole < 60 else f"{whole // 60} h {whole % 60:02d} min"


def md_cell(value: object) -> str:
    """Text safe inside a Markdown table cell: ``|`` escaped, newlines as spaces."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _fence_opening(line: str) -> str | None:
    """The fence ``line`` opens by CommonMark's rules (4.5), or None.

    Up to three spaces, then three or more backticks or tildes; after backticks the info
    string may hold no backtick (``` ``` x`y ``` is text, not a fence).
    """
    match = _FENCE.match(line)
    if match is None:
        return None
    fence = match.group(1)
    return None if fence[0] == "`" and "`" in line[match.end() :] else fence


def _fence_closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes ``fence``: up to three spaces, the same character at least as
    many times, then only spaces or tabs (a closing fence has no info string)."""
    match = _FENCE_CLOSE.fullmatch(line)
    return match is not None and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)


def md_block(value: object) -> str:
    """Untrusted multi-line Markdown (an LLM's perspective), kept as Markdown but defused.

    Outside code fences HTML is escaped and mentions broken; inside them only the
    ``<!--`` that could forge a hidden marker is broken. Fences follow CommonMark's rules, and an
    opening fence is written at the left margin: indented, it could belong to a list item, which
    a less indented line ends, fence and all, while we would still read code. A fence left open
    is closed.
    """
    lines: list[str] = []
    fence: str | None = None
    for line in str(value).splitlines():
        if fence is None:
            fence = _fence_opening(line)
            lines.append(
                _neutralise(line) if fence is None else line.lstrip(" ").replace("<!--", "<\u200b!--")
            )
        else:
            if _fence_closes(line, fence):
                fence = None
            lines.append(line.replace("<!--", "<\u200b!--"))
    if fence is not None:
        lines.append(fence)
    return "\n".join(lines).strip("\n")


def md_code(value: object) -> str:
    """Untrusted text as an inline code span, with a fence longer than any backtick run inside."""
    text = " ".join(str(value).split()).replace("<!--", "<\u200b!--")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def mermaid_label(value: object) -> str:
    """Text safe inside a quoted Mermaid node label, using Mermaid's ``#code;`` entities."""
    text = " ".join(str(value).split()).replace("#", "#35;")
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;"), ("&", "#amp;")):
        text = text.replace(char, code)
    return text


def mermaid_id(value: object) -> str:
    """A Mermaid node id from a story id: anything but letters, digits and ``_`` becomes ``_``."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", str(value))
    return ident if ident[:1].isalpha() else "s_" + ident


def money(value: float) -> str:
    """US dollars: ``$0.0042``, ``$1.23``, ``$1,234.50``."""
    return f"${value:,.4f}" if 0 < value < 0.01 else f"${value:,.2f}"


def tokens(value: int) -> str:
    """A token count for people: ``950``, ``9.5k``, ``680k``, ``1.25M``."""
    if value < 1000:
        return str(value)
    if value < 10_000:
        return f"{value / 1000:.1f}k"
    if value < 1_000_000:
        return f"{value / 1000:.0f}k"
    return f"{value / 1_000_000:.2f}M"


@functools.cache
def template_env() -> jinja2.Environment:
    """The shared environment: strict undefined, no autoescape (Markdown), trimmed blocks."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - Markdown, not HTML: untrusted text goes through md_inline
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(
        md_inline=md_inline,
        html_inline=html_inline,
        mention=mention,
        duration=duration,
        md_cell=md_cell,
        md_block=md_block,
        md_code=md_code,
        mermaid_label=mermaid_label,
        mermaid_id=mermaid_id,
        money=money,
        tokens=tokens,
    )
    env.globals.update(cmd=COMMAND, plural=plural)
    return env
