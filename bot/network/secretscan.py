"""What a push may not carry: credentials in the lines a change adds. Pure: no I/O.

Every line a story's commits add, and every path they add or rename to (`NAME_LINE`: told
with the credential masked), (see `bot.workspace.outgoing`) is checked against:

- detect-secrets' provider plugins: AWS, Azure storage, Artifactory, credentials in URLs,
  Cloudant, Discord, GitHub, GitLab, IBM Cloud, JSON web tokens, Mailchimp, npm, OpenAI,
  private keys, PyPI, SendGrid, Slack, SoftLayer, Square, Stripe, Telegram, Twilio. Only
  their patterns run (`analyze_string`), never their `verify`, which would send the value
  to its provider, and none of the library's process-wide settings is read or changed;
- patterns it lacks: GitHub fine-grained tokens, Anthropic and Google API keys;
- its keyword plugin (a secret-sounding name assigned a value: `api_key = "..."`, file-type
  aware), and the same for names with `token`, `credential` or `bearer`, which it lacks; a
  value counts only when it looks random (`high_entropy`);
- the exact values of every secret this server knows (`bot.redaction.known_secrets`), and
  each long line of a multi-line one (a PEM key).

detect-secrets' false-positive filters apply (templates, `$VARIABLES`, references to other
variables, sequences, UUIDs, ids), and a URL password that is a placeholder
(`postgres://postgres:postgres@localhost`) is not a credential. `paths.secret_scan_ignore`
globs skip the rules for a repository's known fixtures, never the server's own secrets. No
inline pragma (`# pragma: allowlist secret`) is honoured: the agent writes the files.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from detect_secrets.filters import heuristic
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import (
    DENYLIST,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    REGEX_BY_FILETYPE,
    KeywordDetector,
)
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from detect_secrets.util.filetype import determine_file_type

from bot.config.globs import is_denied
from bot.redaction import MASK, secret_name

NAME_LINE = 0
"""The line number of an `AddedLine` that is a path a change adds (its text is the path)."""
SERVER_RULE = "a secret of the Plan Cascade server"
"""The rule of a finding that is one of the values the server registered (never shown)."""
KEYWORD_RULE = "Secret Keyword"
MIN_KEYWORD_VALUE = 16
"""Shorter values assigned to secret-sounding names are not reported (`password = "hunter2"`)."""
WINDOW = 4096
"""Long lines (minified code) go to the keyword rules in windows of this many characters, overlapping."""
_OVERLAP = 512
_MIN_NEEDLE = 16
"""A line of a multi-line server secret counts when it is at least this long (a PEM body line)."""
_PLACEHOLDERS = frozenset(
    {"password", "passwd", "pass", "secret", "changeme", "example", "test", "user", "admin", "root"}
)
"""URL passwords that are placeholders, not credentials (also: the user name again, `***`)."""
_PROVIDERS: tuple[RegexBasedDetector, ...] = (
    ArtifactoryDetector(),
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    BasicAuthDetector(),
    CloudantDetector(),
    DiscordBotTokenDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    IbmCloudIamDetector(),
    IbmCosHmacDetector(),
    JwtTokenDetector(),
    MailchimpDetector(),
    NpmDetector(),
    OpenAIDetector(),
    PrivateKeyDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SoftlayerDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
    TelegramBotTokenDetector(),
    TwilioKeyDetector(),
)
_OWN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("GitHub Token", re.compile(r"github_pat_[A-Za-z0-9_]{22,}")),
    ("Anthropic API Key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{20,}")),
    ("Google API Key", re.compile(r"AIza[0-9A-Za-z_\-]{35}")),
)
_SLOW = (CloudantDetector, IbmCloudIamDetector, IbmCosHmacDetector, SoftlayerDetector)
"""Plugins whose patterns cost most (a look-behind at every position); each needs `_ASSIGNED`."""
_ASSIGNED = re.compile(r"(?i)key|pw|pass|token")
"""A word each `_SLOW` pattern requires (`key|pwd|pw|password|pass|token`, `secret…key`)."""
_KEYWORD = KeywordDetector()
_KEYWORDS = re.compile("|".join(DENYLIST), re.IGNORECASE)
"""A line without one of the keyword plugin's words cannot match it (it is most of the cost)."""
_TOKEN_ASSIGNMENT = re.compile(
    r"""(?i)(?:token|credential|bearer)[\w.-]*["'\]]{0,2}\s*(?::=|=>|=|:)\s*["'`]([^"'`\s]{16,})["'`]"""
)
"""Names the keyword plugin lacks (`access_token = "..."`): judged like its values."""
_BASE64 = re.compile(r"^[A-Za-z0-9+/=_\-.]+$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


@dataclass(frozen=True)
class AddedLine:
    """One line a change adds: its file, its number in the new file, its text."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class Finding:
    """A credential in an added line; `hint` is the value masked (for a server secret: the name
    of the variable it was handed over by, or empty)."""

    path: str
    line: int
    rule: str
    hint: str = ""

    def where(self) -> str:
        """`path:line`."""
        return f"{self.path}:{self.line}" if self.line else self.path


def hint(value: str) -> str:
    """The value masked: its first four characters when it is long, and its length; never more."""
    size = f"{len(value)} characters"
    return f"{value[:4]}… ({size})" if len(value) >= 16 else f"({size})"


def high_entropy(value: str) -> bool:
    """Whether a value looks random rather than written: hex of 20+ characters with detect-secrets'
    hex entropy above 3.0, or 16+ characters of the base64 alphabet mixing at least two of lower
    case, upper case and digits, with Shannon entropy within 0.7 bit of its length's maximum
    (at most 4 bits needed)."""
    if len(value) < MIN_KEYWORD_VALUE:
        return False
    if _HEX.match(value):
        return len(value) >= 20 and _hex_entropy(value) > 3.0
    if not _BASE64.match(value):
        return False
    classes = sum(bool(re.search(c, value)) for c in ("[a-z]", "[A-Z]", "[0-9]"))
    return classes >= 2 and _entropy(value) >= min(math.log2(len(value)) - 0.7, 4.0)


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _hex_entropy(value: str) -> float:
    """detect-secrets' hex entropy: lower for strings of digits only (they are often ids)."""
    entropy = _entropy(value)
    return entropy - 1.2 / math.log2(len(value)) if value.isdigit() else entropy


def server_needles(known: Iterable[str]) -> tuple[str, ...]:
    """What to look for from the server's secrets: each value, or each long line of a multi-line
    one (a PEM key's body lines; its BEGIN/END lines are not secret)."""
    needles: set[str] = set()
    for secret in known:
        if "\n" not in secret.strip():
            needles.add(secret.strip())
            continue
        for line in secret.splitlines():
            line = line.strip()
            if len(line) >= _MIN_NEEDLE and not line.startswith("-----"):
                needles.add(line)
    return tuple(sorted(n for n in needles if n))


def scan(
    lines: Iterable[AddedLine], *, known: Sequence[str] = (), ignore: Sequence[str] = ()
) -> list[Finding]:
    """Every credential in `lines`, once per file, line and rule, in the order found.

    `known` are the server's secrets (`server_needles`); `ignore` the repository's
    `paths.secret_scan_ignore` globs, which skip everything but the server's secrets.
    """
    needles = server_needles(known)
    found: dict[tuple[str, int, str], Finding] = {}
    skipped: dict[str, bool] = {}
    lines = list(lines)
    rules = _Active.of([added.text for added in lines])
    for added in lines:
        for needle in needles:
            if needle in added.text:
                key = (added.path, added.line, SERVER_RULE)
                named = secret_name(needle) or ""  # the variable it was handed by: a name, no value
                found.setdefault(key, Finding(_shown(added, needle), added.line, SERVER_RULE, named))
        if added.path not in skipped:
            skipped[added.path] = bool(ignore) and is_denied(added.path, ignore)
        if skipped[added.path]:
            continue
        for rule, value in _rule_hits(added.path, added.text, rules):
            shown = "" if rule == "Private Key" or len(value) < 8 else hint(value)
            where = _shown(added, re.compile(_AROUND + re.escape(value) + _AROUND))
            found.setdefault((added.path, added.line, rule), Finding(where, added.line, rule, shown))
    return list(found.values())


_AROUND = r"[A-Za-z0-9_+=\-]*"
"""What may surround a rule's value in a token (a rule may give only its prefix: `ghp`)."""


def _shown(added: AddedLine, secret: str | re.Pattern[str]) -> str:
    """Where a finding is, as told: a path that holds the credential itself shows it masked."""
    if added.line != NAME_LINE:
        return added.path
    if isinstance(secret, str):
        return f"{added.path.replace(secret, MASK)} (the file's name)"
    return f"{secret.sub(MASK, added.path)} (the file's name)"


def _windows(text: str) -> Iterable[str]:
    if len(text) <= WINDOW:
        yield text
        return
    for start in range(0, len(text), WINDOW - _OVERLAP):
        yield text[start : start + WINDOW]


@dataclass(frozen=True)
class _Active:
    """The rules that match anywhere in all the lines at once: only they run line by line.

    A line is a part of the whole (lines joined by newlines, which every pattern treats like a
    line's edge), so a rule without a match in the whole has none in any line; searching the
    whole once per rule is most of the saving on a change without credentials."""

    providers: tuple[RegexBasedDetector, ...]
    own: tuple[tuple[str, re.Pattern[str]], ...]
    keywords: bool
    tokens: bool

    @classmethod
    def of(cls, texts: Sequence[str]) -> _Active:
        whole = "\n".join(texts)
        assigned = "\n".join(text for text in texts if _ASSIGNED.search(text))
        return cls(
            providers=tuple(
                p
                for p in _PROVIDERS
                if any(r.search(assigned if isinstance(p, _SLOW) else whole) for r in p.denylist)
            ),
            own=tuple((rule, pattern) for rule, pattern in _OWN if pattern.search(whole)),
            keywords=_KEYWORDS.search(whole) is not None,
            tokens=_TOKEN_ASSIGNMENT.search(whole) is not None,
        )


def _rule_hits(path: str, text: str, rules: _Active) -> Iterable[tuple[str, str]]:
    for plugin in rules.providers:  # patterns of bounded shape: linear, whatever the line's length
        for value in plugin.analyze_string(text):
            if _kept(plugin.secret_type, value, text):
                yield plugin.secret_type, value
    for rule, pattern in rules.own:
        for match in pattern.finditer(text):
            if _kept(rule, match.group(0), text):
                yield rule, match.group(0)
    if not (rules.tokens or rules.keywords):
        return
    for window in _windows(text):  # the keyword patterns backtrack: long lines go in windows
        values: list[str] = [m.group(1) for m in _TOKEN_ASSIGNMENT.finditer(window)] if rules.tokens else []
        if rules.keywords and _KEYWORDS.search(window):
            values += _KEYWORD.analyze_string(window, denylist_regex_to_group=_keyword_regexes(path))
        for value in values:
            if _kept(KEYWORD_RULE, value, window):
                yield KEYWORD_RULE, value


@functools.lru_cache(maxsize=512)
def _keyword_regexes(path: str) -> dict[re.Pattern[str], int]:
    found = REGEX_BY_FILETYPE.get(determine_file_type(path), QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)
    return found  # type: ignore[no-any-return]


_FILTERS: tuple[Callable[[str], bool], ...] = (
    heuristic.is_templated_secret,
    heuristic.is_prefixed_with_dollar_sign,
    heuristic.is_sequential_string,
)


def _kept(rule: str, value: str, line: str) -> bool:
    """Whether a hit survives the false-positive filters."""
    if not value or any(check(value) for check in _FILTERS):
        return False
    if rule == "Basic Auth Credentials":
        return value.lower() not in _PLACEHOLDERS and f"{value}:{value}@" not in line and set(value) != {"*"}
    if rule == KEYWORD_RULE:
        if heuristic.is_indirect_reference(line) or heuristic.is_potential_uuid(value):
            return False
        return high_entropy(value) and not heuristic.is_likely_id_string(value, line)
    return True


def feedback(findings: Sequence[Finding]) -> str:
    """What the agent reads: where each credential is and what it looks like (masked)."""
    listed = "\n".join(f"- {_line(f)}" for f in findings[:50])
    more = f"\n- … and {len(findings) - 50} more" if len(findings) > 50 else ""
    return (
        "Your changes add what looks like credentials, so they were not committed or pushed "
        f"(they are still in the worktree):\n{listed}{more}\n\n"
        "Remove them. Code reads credentials from the environment or a secret store at run time; "
        "tests use values that are obviously fake and not shaped like real keys (or build them at "
        "run time). Do not disguise a credential (encoding, splitting, renaming the variable): "
        "nothing is pushed while one is there."
    )


def _line(finding: Finding) -> str:
    if finding.rule == SERVER_RULE:
        return f"{finding.where()}: {rule_said(finding)} (its value is withheld)"
    return f"{finding.where()}: {finding.rule}" + (f" ({finding.hint})" if finding.hint else "")


def failure(findings: Sequence[Finding], *, attempts: int) -> str:
    """The story's failure reason once retries ran out: where and which rule, never a value."""
    places = ", ".join(f"{f.where()} ({rule_said(f)})" for f in findings[:10])
    more = f" and {len(findings) - 10} more" if len(findings) > 10 else ""
    handed = sorted({f.hint for f in findings if f.rule == SERVER_RULE and f.hint})
    public = (
        f". {', '.join(handed)} {'is' if len(handed) == 1 else 'are'} handed over by name, so secret; "
        "if no secret (a registry's URL), the operator lists it in PLAN_CASCADE_PUBLIC_ENV"
        if handed
        else ""
    )
    return (
        f"the change still adds credentials after {attempts} attempt(s), so nothing was pushed: "
        f"{places}{more}{public}"
    )


def rule_said(finding: Finding) -> str:
    """The finding's rule, with the variable a server secret was handed over by."""
    if finding.rule == SERVER_RULE and finding.hint:
        return f"{SERVER_RULE}: the value of {finding.hint}"
    return finding.rule
