from __future__ import annotations

import pytest

from bot.plan import extract_prd_block

BODY = "title: t\nstories: []\n"


def test_backtick_block() -> None:
    assert extract_prd_block(f"Here is the plan:\n\n```prd\n{BODY}```\n\nThanks") == BODY


def test_tilde_block_with_more_words_in_the_info_string() -> None:
    assert extract_prd_block(f"~~~~ prd yaml\n{BODY}~~~~\n") == BODY


def test_first_prd_block_wins_and_other_languages_are_skipped() -> None:
    text = f"```yaml\nnot: this\n```\n```prd\n{BODY}```\n```prd\nsecond: 1\n```\n"
    assert extract_prd_block(text) == BODY


def test_prd_fence_inside_another_block_is_content() -> None:
    text = f"````markdown\n```prd\ninner: 1\n```\n````\n```prd\n{BODY}```\n"
    assert extract_prd_block(text) == BODY


def test_closing_fence_must_be_as_long_and_the_same_char() -> None:
    text = "````prd\na: 1\n```\n~~~~\n````` \nafter\n"
    assert extract_prd_block(text) == "a: 1\n```\n~~~~\n"


def test_indented_fence_strips_that_much_indentation() -> None:
    text = "  ```prd\n  a:\n      b: 1\n c: 2\n  ```\n"
    assert extract_prd_block(text) == "a:\n    b: 1\nc: 2\n"


def test_four_spaces_is_not_a_fence() -> None:
    assert extract_prd_block(f"    ```prd\n{BODY}    ```\n") is None


def test_backtick_info_string_may_not_contain_backticks() -> None:
    assert extract_prd_block("```prd `x`\na: 1\n```\n") is None


def test_closing_fence_may_have_trailing_spaces_but_not_text() -> None:
    assert extract_prd_block("```prd\na: 1\n``` x\n```   \n") == "a: 1\n``` x\n"


def test_windows_line_endings() -> None:
    assert extract_prd_block("```prd\r\na: 1\r\n```\r\n") == "a: 1\n"


def test_empty_block() -> None:
    assert extract_prd_block("```prd\n```") == ""


def test_unclosed_block_runs_to_the_end() -> None:
    assert extract_prd_block("```prd\na: 1\nb: 2\n") == "a: 1\nb: 2\n"


def test_info_word_is_case_insensitive_but_whole() -> None:
    assert extract_prd_block("```PRD\na: 1\n```") == "a: 1\n"
    assert extract_prd_block("```prdx\na: 1\n```") is None


@pytest.mark.parametrize(
    "text", ["", "no code here", "```\nprd\n```", "```yaml prd\na: 1\n```", "`prd` inline"]
)
def test_absent(text: str) -> None:
    assert extract_prd_block(text) is None
