"""The secret scan's rules on literal lines, and the diff reader on literal `git log -p` output."""

from __future__ import annotations

import base64
import json
import secrets

import pytest

from bot.network.secretscan import (
    KEYWORD_RULE,
    NAME_LINE,
    SERVER_RULE,
    AddedLine,
    failure,
    feedback,
    high_entropy,
    scan,
    server_needles,
)
from bot.workspace.outgoing import added_lines

AWS_KEY = "AKIA" + "Q3X7ZP2M4N6B8V1C"
RANDOM = "Xk29aLmq81ZpQw7RbT4c"


def rules(text: str, path: str = "app.py", **kwargs: object) -> list[str]:
    return [f.rule for f in scan([AddedLine(path, 1, text)], **kwargs)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (f'KEY = "{AWS_KEY}"', "AWS Access Key"),
        ('t = "ghp_' + "1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ1" + '"', "GitHub Token"),
        ('t = "github_pat_' + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz" + '"', "GitHub Token"),
        ("SLACK = 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'", "Slack Token"),
        ('stripe.api_key = "sk_live_' + "4eC39HqLyjWDarjtT1zdp7dc" + '"', "Stripe Access Key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "Private Key"),
        ('ANTHROPIC = "sk-ant-' + "api03-AbCdEfGhIjKlMnOpQrSt" + '"', "Anthropic API Key"),
        ('url = "postgres://app:Zx81Kq02LmPq@db.internal:5432/app"', "Basic Auth Credentials"),
        (f'api_key = "{RANDOM}"', KEYWORD_RULE),
        (f'const accessToken = "{RANDOM}";', KEYWORD_RULE),
        ('client_secret = "' + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b" + '"', KEYWORD_RULE),
    ],
)
def test_credentials_are_found(text: str, rule: str) -> None:
    assert rule in rules(text)


@pytest.mark.parametrize(
    "text",
    [
        'password = "hunter2"',  # short: a test value, not a credential
        'secret = "changeme-in-production"',  # written, not random
        'api_key = os.environ["API_KEY"]',
        'api_key = "${API_KEY}"',
        'password = "{{ password }}"',
        "url: postgres://postgres:postgres@localhost:5432/db",
        "url: postgres://user:password@localhost/db",
        'digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',  # not a secret name
        'id = "123e4567-e89b-12d3-a456-426614174000"',
        "print('hello world')",
    ],
)
def test_ordinary_lines_are_not_findings(text: str) -> None:
    assert rules(text) == []


def test_high_entropy_needs_randomness_not_just_length() -> None:
    assert high_entropy(secrets.token_urlsafe(24))
    assert high_entropy(secrets.token_hex(20))
    assert not high_entropy("correcthorsebatterystaple")
    assert not high_entropy("my_super_secret_key_123")
    assert not high_entropy("short1A")


def test_a_server_secret_is_found_anywhere_and_its_value_never_shown() -> None:
    value = "plain-words-" + secrets.token_hex(4)
    found = scan([AddedLine("docs/notes.md", 3, f"the token is {value}!")], known=[value], ignore=["docs/**"])
    assert [(f.where(), f.rule, f.hint) for f in found] == [("docs/notes.md:3", SERVER_RULE, "")]
    assert value not in feedback(found) and value not in failure(found, attempts=3)


def test_each_line_of_a_multi_line_server_secret_is_looked_for() -> None:
    body = secrets.token_urlsafe(48)
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\n"
    assert server_needles([pem]) == (body,)
    assert rules(f"pasted {body} here", path="x.txt", known=[pem]) == [SERVER_RULE]


def test_ignore_globs_skip_the_rules_for_fixtures_only() -> None:
    assert rules(f'KEY = "{AWS_KEY}"', path="tests/fixtures/aws.py", ignore=["tests/fixtures/**"]) == []
    assert rules(f'KEY = "{AWS_KEY}"', path="src/aws.py", ignore=["tests/fixtures/**"]) == ["AWS Access Key"]


def test_an_inline_pragma_does_not_silence_the_scan() -> None:
    assert rules(f'KEY = "{AWS_KEY}"  # pragma: allowlist secret') == ["AWS Access Key"]


def test_a_credential_deep_in_a_minified_line_is_found() -> None:
    line = "var a=1;" * 2000 + f'var k="{AWS_KEY}";' + "var b=2;" * 2000
    assert rules(line, path="dist/app.min.js") == ["AWS Access Key"]


def test_feedback_masks_and_the_failure_names_places_only() -> None:
    found = scan([AddedLine("a.py", 2, f'KEY = "{AWS_KEY}"')])
    said = feedback(found)
    assert "a.py:2: AWS Access Key (AKIA… (20 characters))" in said and AWS_KEY not in said
    reason = failure(found, attempts=3)
    assert reason.endswith("a.py:2 (AWS Access Key)") and "AKIA" not in reason


DIFF = (
    "\0commit 1111111111111111111111111111111111111111\n"
    "diff --git a/src/app.py b/src/app.py\n"
    "index 1..2 100644\n"
    "--- a/src/app.py\n"
    "+++ b/src/app.py\n"
    "@@ -3,0 +4,2 @@ def f():\n"
    "+added four\n"
    "++++ a line that starts with three pluses\n"
    "@@ -10 +12 @@\n"
    "-old\n"
    "+new twelve\n"
    "\\ No newline at end of file\n"
    "diff --git a/gone.txt b/gone.txt\n"
    "deleted file mode 100644\n"
    "--- a/gone.txt\n"
    "+++ /dev/null\n"
    "@@ -1 +0,0 @@\n"
    "-bye\n"
    "\0commit 2222222222222222222222222222222222222222\n"
    'diff --git "a/caf\\303\\251 \\"x\\".txt" "b/caf\\303\\251 \\"x\\".txt"\n'
    "new file mode 100644\n"
    "--- /dev/null\n"
    '+++ "b/caf\\303\\251 \\"x\\".txt"\n'
    "@@ -0,0 +1 @@\n"
    "+first\n"
)


def test_added_lines_carry_their_file_and_line_number() -> None:
    assert [(a.path, a.line, a.text) for a in added_lines(DIFF)] == [
        ("src/app.py", 4, "added four"),
        ("src/app.py", 5, "+++ a line that starts with three pluses"),
        ("src/app.py", 12, "new twelve"),
        ('café "x".txt', 1, "first"),
    ]


def test_a_long_token_across_any_window_edge_is_found() -> None:
    def part(data: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    head, body = part({"alg": "HS256", "typ": "JWT"}), part({"sub": "x" * 900})
    jwt = f"{head}.{body}.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"
    assert len(jwt) > 1000
    for start in (3500, 3900, 4090):
        line = "x" * start + f' t="{jwt}" '
        assert "JSON Web Token" in rules(line, path="dist/app.min.js"), start


def test_a_credential_in_a_path_is_found_and_told_masked() -> None:
    """Issue #47, defect 4: a path a change adds is scanned with the same rules (`NAME_LINE`)."""
    server = "server-secret-" + secrets.token_hex(8)
    names = [f"keys/{AWS_KEY}.txt", f"notes-{server}.md", "src/ordinary_name.py"]
    found = scan([AddedLine(name, NAME_LINE, name) for name in names], known=[server])
    assert [(f.where(), f.rule) for f in found] == [
        ("keys/***.txt (the file's name)", "AWS Access Key"),
        ("notes-***.md (the file's name)", SERVER_RULE),
    ]
    said = feedback(found) + failure(found, attempts=1)
    assert AWS_KEY not in said and server not in said
