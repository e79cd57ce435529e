"""Parsers of tool output, on output captured from the real tools (ruff 0.17, mypy 2.4,
pytest 9.2, eslint 9, tsc 5), and the GitHub form of an annotation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.gates.annotations import (
    MESSAGE_LIMIT_BYTES,
    Annotation,
    parse_any,
    parse_eslint,
    parse_mypy,
    parse_pytest,
    parse_ruff,
    parse_tsc,
    relative_path,
)

ROOT = "/home/runner/work/app/app"

RUFF_CONCISE = """\
src/pkg/mod.py:1:1: I001 [*] Import block is un-sorted or un-formatted
src/pkg/mod.py:1:8: F401 [*] `os` imported but unused
src/pkg/mod.py:5:9: F821 Undefined name `undefined_name`
tests/test_a.py:5:12: PLR0133 Two constants compared in a comparison, consider replacing `1 == 1`
src/pkg/bad.py:1:7: invalid-syntax: Expected a parameter or the end of the parameter list
Found 5 errors.
[*] 2 fixable with `--fix` (2 unsafe fixes available with `--fix --unsafe-fixes`).
"""

RUFF_FULL = """\
F401 [*] `os` imported but unused
 --> src/pkg/mod.py:1:8
  |
1 | import os
  |        ^^
2 | import sys
  |
help: Remove unused import: `os`
  |
  - import os
1 | import sys
  |

F821 Undefined name `reveal_type`
  --> src/pkg/mod.py:9:5
   |
 8 | def g() -> None:
 9 |     reveal_type(1)
   |     ^^^^^^^^^^^
10 |     l = 1
   |

invalid-syntax: Expected a parameter or the end of the parameter list
 --> src/pkg/bad.py:1:7
  |
1 | def f(:
  |       ^
2 |     pass
  |

Found 3 errors.
[*] 1 fixable with `--fix`.
"""

MYPY = """\
src/pkg/mod.py:5: error: Name "undefined_name" is not defined  [name-defined]
src/pkg/mod.py:6: error: Incompatible return value type (got "int", expected "str")  [return-value]
src/pkg/mod.py:9: note: Revealed type is "Literal[1]?"
Found 2 errors in 1 file (checked 1 source file)
"""

MYPY_END = """\
src/pkg/mod.py:5:9:5:22: error: Name "undefined_name" is not defined  [name-defined]
src/pkg/mod.py:6:12:6:12: error: Incompatible return value type (got "int", expected "str")  [return-value]
Found 2 errors in 1 file (checked 1 source file)
"""

MYPY_PRETTY = """\
src/pkg/mod.py:5: error: Name "undefined_name" is not defined  [name-defined]
        y = undefined_name
            ^~~~~~~~~~~~~~
src/pkg/mod.py:6: error: Incompatible return value type (got "int", expected
"str")  [return-value]
        return x
               ^
src/pkg/mod.py:9: note: Revealed type is "Literal[1]?"
Found 2 errors in 1 file (checked 1 source file)
"""

PYTEST_LONG = """\
.FFF.FF                                                                  [100%]
=================================== FAILURES ===================================
___________________________________ test_eq ____________________________________

    def test_eq():
>       assert [1, 2] == [1, 3]
E       assert [1, 2] == [1, 3]
E        \x20
E         At index 1 diff: 2 != 3
E         Use -v to get more diff

tests/test_a.py:8: AssertionError
__________________________________ test_raise __________________________________

    def test_raise():
>       helper()

tests/test_a.py:11:\x20
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\x20

    def helper():
>       raise ValueError("bad value")
E       ValueError: bad value

tests/test_a.py:2: ValueError
_________________________________ TestK.test_m _________________________________

self = <test_a.TestK object at 0x7f742ed8fbd0>

    def test_m(self):
        x = {"a": 1}
>       assert x["a"] == 2, "mismatch"
E       AssertionError: mismatch
E       assert 1 == 2

tests/test_a.py:16: AssertionError
________________________________ test_param[2] _________________________________

n = 2

    @pytest.mark.parametrize("n", [1, 2])
    def test_param(n):
>       assert n == 1
E       assert 2 == 1

tests/test_c.py:6: AssertionError
__________________________________ test_deep ___________________________________

    def test_deep():
>       boom()

tests/test_c.py:9:\x20
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\x20

    def boom():
>       raise KeyError("missing")
E       KeyError: 'missing'

tests/pkg_helper.py:2: KeyError
=========================== short test summary info ============================
FAILED tests/test_a.py::test_eq - assert [1, 2] == [1, 3]
FAILED tests/test_a.py::test_raise - ValueError: bad value
FAILED tests/test_a.py::TestK::test_m - AssertionError: mismatch
FAILED tests/test_c.py::test_param[2] - assert 2 == 1
FAILED tests/test_c.py::test_deep - KeyError: 'missing'
5 failed, 2 passed in 0.86s
"""

PYTEST_COLLECTION = """\

==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_b.py _______________________
ImportError while importing test module '/home/runner/work/app/app/tests/test_b.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_b.py:1: in <module>
    import nonexistent_module_xyz
E   ModuleNotFoundError: No module named 'nonexistent_module_xyz'
=========================== short test summary info ============================
ERROR tests/test_b.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.32s
"""

ESLINT_STYLISH = f"""\

{ROOT}/src/b.js
  1:5   error    'unused' is assigned a value but never used  no-unused-vars
  2:5   error    'foo' is not defined                         no-undef
  2:9   warning  Expected '===' and instead saw '=='          eqeqeq
  2:20  warning  Unexpected 'debugger' statement              no-debugger
  3:14  error    'z' is constant                              no-const-assign

{ROOT}/src/c.js
  1:11  error  Parsing error: Unexpected token ;

{ROOT}/src/components/Button.tsx
  12:7  warning  React Hook useEffect has a missing dependency: 'id'  react-hooks/exhaustive-deps
  20:3  error    Unexpected any. Specify a different type             @typescript-eslint/no-explicit-any

✖ 9 problems (5 errors, 4 warnings)
  0 errors and 1 warning potentially fixable with the `--fix` option.
"""

ESLINT_UNIX = f"""\
{ROOT}/src/b.js:1:5: 'unused' is assigned a value but never used. [Error/no-unused-vars]
{ROOT}/src/b.js:2:9: Expected '===' and instead saw '=='. [Warning/eqeqeq]
{ROOT}/src/c.js:1:11: Parsing error: Unexpected token ; [Error]

3 problems
"""

TSC_PLAIN = """\
src/a.ts(1,7): error TS2322: Type 'string' is not assignable to type 'number'.
src/a.ts(3,12): error TS2551: Property 'lenght' does not exist on type 'string'. Did you mean 'length'?
src/e.ts(3,7): error TS2322: Type '{ a: string; }' is not assignable to type 'P'.
  Types of property 'a' are incompatible.
    Type 'string' is not assignable to type '{ b: number; }'.
app/(auth)/page.tsx(4,1): error TS2304: Cannot find name 'foo'.
"""

# `tsc --pretty` as a terminal shows it, colours included.
TSC_PRETTY = (
    "\x1b[96msrc/a.ts\x1b[0m:\x1b[93m3\x1b[0m:\x1b[93m12\x1b[0m - \x1b[91merror\x1b[0m\x1b[90m TS2551: "
    "\x1b[0mProperty 'lenght' does not exist on type 'string'. Did you mean 'length'?\n"
    "\n"
    "\x1b[7m3\x1b[0m   return a.lenght;\n"
    "\x1b[7m \x1b[0m \x1b[91m           ~~~~~~\x1b[0m\n"
    "\n"
    "  \x1b[96mnode_modules/typescript/lib/lib.es5.d.ts\x1b[0m:\x1b[93m515\x1b[0m:\x1b[93m14\x1b[0m"
    " - 'length' is declared here.\n"
    "    \x1b[7m515\x1b[0m     readonly length: number;\n"
    "\n"
    "\n"
    "Found 1 error in src/a.ts\x1b[90m:3\x1b[0m\n"
)


def where(annotations: list[Annotation]) -> list[tuple[str, int, int | None, str]]:
    return [(a.path, a.start_line, a.start_column, a.annotation_level) for a in annotations]


def test_ruff_concise() -> None:
    found = parse_ruff(RUFF_CONCISE)
    assert where(found) == [
        ("src/pkg/mod.py", 1, 1, "failure"),
        ("src/pkg/mod.py", 1, 8, "failure"),
        ("src/pkg/mod.py", 5, 9, "failure"),
        ("tests/test_a.py", 5, 12, "failure"),
        ("src/pkg/bad.py", 1, 7, "failure"),
    ]
    assert found[1].title == "ruff F401"
    assert found[1].message == "`os` imported but unused"
    assert found[4].title == "ruff invalid-syntax"


def test_ruff_full_format() -> None:
    found = parse_ruff(RUFF_FULL)
    assert where(found) == [
        ("src/pkg/mod.py", 1, 8, "failure"),
        ("src/pkg/mod.py", 9, 5, "failure"),
        ("src/pkg/bad.py", 1, 7, "failure"),
    ]
    assert [a.title for a in found] == ["ruff F401", "ruff F821", "ruff invalid-syntax"]
    assert found[0].message == "`os` imported but unused"


def test_ruff_absolute_paths_are_made_relative() -> None:
    output = f"{ROOT}/src/pkg/mod.py:1:8: F401 [*] `os` imported but unused\n"
    assert parse_ruff(output, root=ROOT)[0].path == "src/pkg/mod.py"
    assert parse_ruff(output, root=ROOT + "/")[0].path == "src/pkg/mod.py"


def test_mypy_errors_and_notes_without_summary() -> None:
    found = parse_mypy(MYPY)
    assert where(found) == [
        ("src/pkg/mod.py", 5, None, "failure"),
        ("src/pkg/mod.py", 6, None, "failure"),
        ("src/pkg/mod.py", 9, None, "notice"),
    ]
    assert found[0].message == 'Name "undefined_name" is not defined'
    assert found[0].title == "mypy [name-defined]"
    assert found[2].title == "mypy"


def test_mypy_columns_and_error_end() -> None:
    found = parse_mypy(MYPY_END)
    first = found[0]
    assert (first.start_line, first.start_column, first.end_line, first.end_column) == (5, 9, 5, 22)
    assert found[1].title == "mypy [return-value]"
    with_columns = parse_mypy("./src/x.py:3:14: error: Missing return statement  [empty-body]\n")
    assert where(with_columns) == [("src/x.py", 3, 14, "failure")]


def test_mypy_pretty_joins_wrapped_message() -> None:
    found = parse_mypy(MYPY_PRETTY)
    assert len(found) == 3
    assert found[1].message == 'Incompatible return value type (got "int", expected "str")'
    assert found[1].title == "mypy [return-value]"


def test_pytest_failures_point_at_the_test_file_line() -> None:
    found = parse_pytest(PYTEST_LONG)
    assert where(found) == [
        ("tests/test_a.py", 8, None, "failure"),
        ("tests/test_a.py", 2, None, "failure"),
        ("tests/test_a.py", 16, None, "failure"),
        ("tests/test_c.py", 6, None, "failure"),
        ("tests/test_c.py", 9, None, "failure"),
    ]
    assert found[2].title == "TestK.test_m failed"
    assert found[2].message == "AssertionError: mismatch\nassert 1 == 2"
    assert found[4].message == "KeyError: 'missing'"


def test_pytest_summary_only_falls_back_to_line_one() -> None:
    output = "FAILED tests/test_a.py::test_eq - assert [1, 2] == [1, 3]\n1 failed in 0.1s\n"
    [found] = parse_pytest(output)
    assert (found.path, found.start_line, found.message) == ("tests/test_a.py", 1, "assert [1, 2] == [1, 3]")


def test_pytest_short_traceback_format() -> None:
    output = """\
___________________________________ test_eq ____________________________________
tests/test_a.py:8: in test_eq
    assert [1, 2] == [1, 3]
E   assert [1, 2] == [1, 3]
=========================== short test summary info ============================
FAILED tests/test_a.py::test_eq - assert [1, 2] == [1, 3]
"""
    assert where(parse_pytest(output)) == [("tests/test_a.py", 8, None, "failure")]


def test_pytest_collection_error() -> None:
    [found] = parse_pytest(PYTEST_COLLECTION, root=ROOT)
    assert (found.path, found.start_line) == ("tests/test_b.py", 1)
    assert found.message == "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"
    assert found.title == "tests/test_b.py could not be collected"


PYTEST_SETUP_ERRORS = f"""\
EE                                                                       [100%]
==================================== ERRORS ====================================
__________________________ ERROR at setup of test_db ___________________________
file {ROOT}/tests/test_db.py, line 7
  def test_db(database):
E       fixture 'database' not found
>       available fixtures: cache, capfd, capfdbinary, caplog, capsys, capsysbinary, doctest_namespace
>       use 'pytest --fixtures [testpath]' for help on them.

{ROOT}/tests/test_db.py:7
________________________ ERROR at setup of test_broken _________________________

    @pytest.fixture
    def broken():
>       raise RuntimeError("no db")
E       RuntimeError: no db

tests/test_db.py:5: RuntimeError
=========================== short test summary info ============================
ERROR tests/test_db.py::test_db
ERROR tests/test_db.py::test_broken - RuntimeError: no db
2 errors in 1.35s
"""

PYTEST_SYNTAX_ERROR = f"""\

==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_syntax.py _____________________
/work/app/.venv/lib/python3.11/site-packages/_pytest/python.py:528: in importtestmodule
    mod = import_path(
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
<frozen importlib._bootstrap>:1204: in _gcd_import
    ???
/root/.pyenv/versions/3.11.7/lib/python3.11/ast.py:50: in parse
    return compile(source, filename, mode, flags,
E     File "{ROOT}/tests/test_syntax.py", line 3
E       def f(:
E             ^
E   SyntaxError: invalid syntax
=========================== short test summary info ============================
ERROR tests/test_syntax.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.85s
"""


def test_pytest_setup_errors() -> None:
    found = parse_pytest(PYTEST_SETUP_ERRORS, root=ROOT)
    assert [(a.path, a.start_line, a.title) for a in found] == [
        ("tests/test_db.py", 7, "test_db errored"),
        ("tests/test_db.py", 5, "test_broken errored"),
    ]
    assert [a.message for a in found] == ["fixture 'database' not found", "RuntimeError: no db"]


def test_pytest_syntax_error_while_collecting() -> None:
    [found] = parse_pytest(PYTEST_SYNTAX_ERROR, root=ROOT)
    assert (found.path, found.start_line) == ("tests/test_syntax.py", 3)
    assert found.message.endswith("SyntaxError: invalid syntax")


def test_pytest_error_summary_with_message_but_no_report() -> None:
    [found] = parse_pytest("ERROR tests/test_x.py - SyntaxError: invalid syntax\n")
    assert (found.path, found.start_line) == ("tests/test_x.py", 1)
    assert found.message == "SyntaxError: invalid syntax"


def test_eslint_stylish() -> None:
    found = parse_eslint(ESLINT_STYLISH, root=ROOT)
    assert where(found) == [
        ("src/b.js", 1, 5, "failure"),
        ("src/b.js", 2, 5, "failure"),
        ("src/b.js", 2, 9, "warning"),
        ("src/b.js", 2, 20, "warning"),
        ("src/b.js", 3, 14, "failure"),
        ("src/c.js", 1, 11, "failure"),
        ("src/components/Button.tsx", 12, 7, "warning"),
        ("src/components/Button.tsx", 20, 3, "failure"),
    ]
    assert found[0].message == "'unused' is assigned a value but never used"
    assert found[0].title == "eslint no-unused-vars"
    assert (found[5].message, found[5].title) == ("Parsing error: Unexpected token ;", "eslint")
    assert found[6].title == "eslint react-hooks/exhaustive-deps"
    assert found[7].title == "eslint @typescript-eslint/no-explicit-any"


def test_eslint_without_root_drops_absolute_paths() -> None:
    assert parse_eslint(ESLINT_STYLISH) == []


def test_eslint_unix() -> None:
    found = parse_eslint(ESLINT_UNIX, root=ROOT)
    assert where(found) == [
        ("src/b.js", 1, 5, "failure"),
        ("src/b.js", 2, 9, "warning"),
        ("src/c.js", 1, 11, "failure"),
    ]
    assert [a.title for a in found] == ["eslint no-unused-vars", "eslint eqeqeq", "eslint"]
    assert found[0].message == "'unused' is assigned a value but never used."


def test_tsc_plain_with_chained_message() -> None:
    found = parse_tsc(TSC_PLAIN)
    assert where(found) == [
        ("src/a.ts", 1, 7, "failure"),
        ("src/a.ts", 3, 12, "failure"),
        ("src/e.ts", 3, 7, "failure"),
        ("app/(auth)/page.tsx", 4, 1, "failure"),
    ]
    assert found[0].title == "tsc TS2322"
    assert found[2].message == (
        "Type '{ a: string; }' is not assignable to type 'P'.\n"
        "Types of property 'a' are incompatible.\n"
        "Type 'string' is not assignable to type '{ b: number; }'."
    )


def test_tsc_pretty_with_colours() -> None:
    [found] = parse_tsc(TSC_PRETTY)
    assert where([found]) == [("src/a.ts", 3, 12, "failure")]
    assert found.message == "Property 'lenght' does not exist on type 'string'. Did you mean 'length'?"
    assert found.title == "tsc TS2551"


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("./src/a.py", None, "src/a.py"),
        ("././src/a.py", None, "src/a.py"),
        (f"{ROOT}/src/a.py", ROOT, "src/a.py"),
        (f"{ROOT}/src/a.py", f"{ROOT}/", "src/a.py"),
        (f"{ROOT}-fork/src/a.py", ROOT, None),
        ("/usr/lib/python3.11/json/__init__.py", ROOT, None),
        ("../other/a.py", None, None),
        ("src/a.py", ROOT, "src/a.py"),
    ],
)
def test_relative_path(path: str, root: str | None, expected: str | None) -> None:
    assert relative_path(path, root) == expected


def test_parse_any_combines_tools_and_dedupes() -> None:
    output = "\n".join([MYPY, RUFF_CONCISE, RUFF_CONCISE, TSC_PLAIN, PYTEST_LONG])
    found = parse_any(output)
    assert len(found) == 3 + 5 + 4 + 5
    keys = [(a.path, a.start_line, a.start_column, a.message) for a in found]
    assert len(keys) == len(set(keys))
    assert {a.title.split()[0] for a in found if a.title} >= {"mypy", "ruff", "tsc"}


def test_parse_any_on_clean_output_is_empty() -> None:
    assert parse_any("Success: no issues found in 12 source files\nAll checks passed!\n") == []


def test_as_github_drops_none_and_keeps_single_line_columns() -> None:
    annotation = Annotation(
        path="a.py", start_line=3, end_line=3, annotation_level="warning", message="m", start_column=2
    )
    assert annotation.as_github() == {
        "path": "a.py",
        "start_line": 3,
        "end_line": 3,
        "annotation_level": "warning",
        "message": "m",
        "start_column": 2,
    }


def test_as_github_drops_columns_on_multi_line_annotation() -> None:
    annotation = Annotation(
        path="a.py",
        start_line=3,
        end_line=5,
        annotation_level="failure",
        message="m",
        start_column=2,
        end_column=7,
    )
    data = annotation.as_github()
    assert "start_column" not in data
    assert "end_column" not in data


def test_as_github_caps_title_and_message() -> None:
    annotation = Annotation(
        path="a.py",
        start_line=1,
        end_line=1,
        annotation_level="failure",
        message="é" * 40000,
        title="t" * 300,
    )
    data = annotation.as_github()
    assert len(data["title"]) == 255
    assert data["title"].endswith("…")
    assert len(data["message"].encode()) <= MESSAGE_LIMIT_BYTES
    assert data["message"].endswith("…")
    short = Annotation(
        path="a.py", start_line=1, end_line=1, annotation_level="notice", message="ok", title="t"
    )
    assert short.as_github()["title"] == "t"


def test_end_line_before_start_line_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Annotation(path="a.py", start_line=5, end_line=4, annotation_level="notice", message="m")
