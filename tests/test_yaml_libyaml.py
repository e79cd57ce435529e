"""libyaml reads a PRD or a config exactly as PyYAML's own loaders do: same data, same errors.

`bot.config.yamlfast` parses with libyaml when PyYAML has it and hands PyYAML every document
the two may read differently. Compared here over the repository's YAML, generated PRDs, tricky
documents (anchors, duplicate keys, tags, control characters, huge numbers, byte-order marks,
tabs) and seeded random edits of them; and without libyaml, in a process that cannot load it.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import yamlfast
from bot.config.errors import _FastLoader, _Loader, parse_config_yaml
from bot.config.yamlshape import _measure, shape_problem
from bot.errors import PlanCascadeError
from bot.plan import prd_to_yaml
from bot.plan.load import _FastPlanLoader, _PlanLoader, load_document
from tests.plan.plan_builders import build_prd, build_story

ROOT = Path(__file__).resolve().parents[1]
LOADERS = [(_PlanLoader, _FastPlanLoader), (_Loader, _FastLoader)]


def chain_prd(batches: int, width: int) -> str:
    """bench/execution.py's PRD: each batch depends on all of the one before."""
    lines = ["version: 1", "title: Bench", "summary: Bench plan.", "stories:"]
    for b in range(batches):
        for w in range(width):
            n = b * width + w + 1
            deps = ", ".join(f"STORY-{(b - 1) * width + d + 1:03d}" for d in range(width)) if b else ""
            lines += [f"  - id: STORY-{n:03d}", f"    title: Story {n}", f"    depends_on: [{deps}]"]
            lines += [f"    acceptance_criteria: ['story-{n:03d}.txt holds 1 line']"]
    return "\n".join(lines) + "\n"


def repository_yaml() -> list[str]:
    files = [*ROOT.glob("templates/**/*.y*ml"), *ROOT.glob("action/*.yml"), *ROOT.glob(".github/**/*.yml")]
    blocks = [
        b
        for doc in sorted(ROOT.glob("docs/*.md"))
        for b in re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S)
    ]
    return [p.read_text(encoding="utf-8") for p in sorted(files)] + blocks


PRDS = [
    chain_prd(4, 3),
    chain_prd(2, 2),
    prd_to_yaml(
        build_prd(build_story(1), build_story(2, 1, description="Multi\nline: text # not a comment"))
    ),
]
TRICKY = [
    "",
    "---\n",
    "--- a\n--- b\n",
    "a: &x 1\nb: *x\n",
    "a: &x 1\nb: 2\n",
    "a: *nope\n",
    "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
    "a: {<<: {x: 1}, y: 2}\n",
    "a: 1\na: 2\n",
    "stories:\n  - id: A\n    id: B\n",
    "{a: 1, a: 2}",
    "1: x\n'1': y\n",
    "? [1]\n: x\n",
    "a: !!int '7'\n",
    "a: !!str 7\n",
    "a: !!timestamp 2020-01-01\n",
    "a: !!timestamp nope\n",
    "a: !!python/object:os.system x\n",
    "a: !local x\n",
    "a: ! 7\n",
    "a: !\n",
    "a: !!binary aGk=\n",
    "a: !!set {x}\n",
    "a: !<tag:yaml.org,2002:str> 1\n",
    "a: \x01\n",
    "a: \x7f\n",
    "a: x\x85b\n",
    "a: x\u2028y\n",
    "a: \x00\n",
    "a: '\x1b'\n",
    'a: "\\x1b\\ud800"\n',
    "a: \ud800\n",
    "a: " + "9" * 5000 + "\n",
    "a: 0x" + "f" * 4000 + "\n",
    "a: 1e999\n",
    "- .NaN\n- -.inf\n- yes\n- On\n- ~\n- null\n- 0o17\n- 0x1F\n- 1_000\n- 190:20:30\n",
    "a: 2020-01-01\nb: 2020-01-01 10:00:00\n",
    "\ufeffa: 1\n",
    "\ufeff\ufeffa: 1\n",
    "a: 1\n\ufeffb: 2\n",
    "a: '\ufeff'\n",
    "a:\t1\n",
    "a: 1\t\n",
    "a: |\n\tx\n",
    "\tstories: []\n",
    "a: |# c\n  x\n",
    "a: >-#\n  x\n",
    "%YAML 1.2\n---\na: 1\n",
    "%YAML 2.0\n---\na\n",
    "a: [1, 2\n",
    "a: {b: c\n",
    "'a': \"b\\u00e9\"\nc: 'it''s'\n",
    "\r\na: 1\r\nb: [x,\r\n y]\r\n",
    "a:\n- 1\n-  - 2\n",
    "[" * 40 + "]" * 40,
    "? " + "k" * 1100 + "\n: v\n",
    "{" + "k" * 1100 + ": v}",
    '{"a":b, "c": [1,2]}',
]
CORPUS = PRDS + repository_yaml() + TRICKY
EDITS = [
    *("\t", "\ufeff", "!", "! ", "&x ", "*x", "#", " #", "|#", ":", ": ", "- ", "\n", "\n  ", "'", '"'),
    *("[", "]", "{", "}", ",", "? ", "\x01", "\x85", "%YAML 1.1\n", "---\n", "...\n", "<<: ", "9" * 30),
]


def outcome(read: Any) -> tuple[str, ...]:
    try:
        return ("data", repr(read()))
    except Exception as exc:  # compared: type and words
        return ("error", type(exc).__name__, str(exc))


def edited(texts: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        text = rng.choice(texts)
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.3:
            out.append(text[:at] + text[at + rng.randrange(1, 6) :])
        else:
            out.append(text[:at] + rng.choice(EDITS) + text[at:])
    return out


pytestmark = pytest.mark.skipif(not yamlfast.libyaml, reason="PyYAML has no libyaml here")


def assert_read_alike(texts: list[str]) -> None:
    for text in texts:
        for loader, fast in LOADERS:
            expected = outcome(lambda: yaml.load(text, Loader=loader))  # noqa: S506, B023 - SafeLoader subclasses
            assert outcome(lambda: yamlfast.load(text, loader=loader, fast=fast)) == expected, (loader, text)  # noqa: B023


def python_shape(text: str, max_depth: int) -> str | None:
    try:
        return _measure(yaml.parse(text, Loader=yaml.SafeLoader), max_depth=max_depth)
    except yaml.YAMLError:
        return None


def test_libyaml_reads_prds_itself_and_alike() -> None:
    example = (ROOT / "templates/plan-cascade.example.yml").read_text(encoding="utf-8")
    for text in [*PRDS, example]:
        assert yamlfast.libyaml_events(text) is not None  # no tab, tag, inner BOM…: the fast way
    for text in PRDS + repository_yaml():
        for loader, fast in LOADERS:
            try:
                data = yaml.load(text, Loader=fast)  # noqa: S506 - SafeLoader subclasses
            except yamlfast._ReadAgain:
                assert "*" in text and text not in PRDS  # aliases: PyYAML composes
                continue
            assert data == yaml.load(text, Loader=loader)  # noqa: S506
    assert_read_alike(PRDS + repository_yaml())


def test_tricky_documents_read_alike() -> None:
    assert_read_alike(TRICKY)


def test_edited_documents_read_alike() -> None:
    small = [chain_prd(2, 2), *(t for t in TRICKY if len(t) < 200)]
    assert_read_alike(edited(small, 300, seed=52))


@pytest.mark.parametrize("max_depth", [2, 32])
def test_shape_is_measured_alike(max_depth: int) -> None:
    texts = [t for t in CORPUS + edited(PRDS[1:2] + TRICKY, 300, seed=7) if "\ud800" not in t]
    for text in texts:
        assert shape_problem(text, max_depth=max_depth) == python_shape(text, max_depth), text


def public_outcomes(texts: list[str]) -> list[list[Any]]:
    """What load_document and parse_config_yaml say of each text (data, or the problem lines)."""
    out = []
    for text in texts:
        row: list[Any] = []
        for read in (load_document, parse_config_yaml):
            try:
                row.append(["data", repr(read(text))])
            except PlanCascadeError as exc:
                row.append(["problems", exc.message, getattr(exc, "problems", None)])
            except Exception as exc:  # compared
                row.append(["error", type(exc).__name__, str(exc)])
        out.append(row)
    return out


WITHOUT_LIBYAML = """
import json, sys
sys.modules["yaml._yaml"] = None  # as if PyYAML were built without libyaml
import yaml
assert not yaml.__with_libyaml__
from bot.config import yamlfast
from bot.plan import load
assert not yamlfast.libyaml and load._FastPlanLoader is None
from tests.test_yaml_libyaml import public_outcomes
print(json.dumps(public_outcomes(json.loads(sys.stdin.read()))))
"""


def test_without_libyaml_the_same_is_read() -> None:
    texts = [t for t in CORPUS if "\ud800" not in t]  # JSON cannot carry a lone surrogate
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LIBYAML], input=json.dumps(texts), capture_output=True, text=True,
        cwd=ROOT, check=True, timeout=300,
    )  # fmt: skip
    assert json.loads(done.stdout) == json.loads(json.dumps(public_outcomes(texts)))
