"""Requirements files read as pip reads them (issue #47, defect 3): encodings, continuations,
comments, options after a requirement, and the files they include."""

from __future__ import annotations

import codecs

from bot.environment.lockfiles import Pinned, packages
from bot.environment.requirements import Include, decode, includes, logical_lines

TEXT = "pyyaml==5.3\nrequests==2.31.0\n"


def test_every_byte_order_mark_and_a_coding_line_decode_as_pip_decodes() -> None:
    assert decode(codecs.BOM_UTF8 + TEXT.encode()) == TEXT
    for encoding in ("utf-16", "utf-16-be", "utf-32", "utf-32-be"):
        data = TEXT.encode(encoding)
        if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF32_LE)):  # -be: no BOM of its own
            data = {"utf-16-be": codecs.BOM_UTF16_BE, "utf-32-be": codecs.BOM_UTF32_BE}[encoding] + data
        assert decode(data) == TEXT, encoding
    latin = "# -*- coding: latin-1 -*-\ncafé==1.0\n".encode("latin-1")
    assert decode(latin).splitlines()[1] == "café==1.0"
    assert decode(b"# coding: no-such-codec\na==1\n").endswith("a==1\n")  # pip fails on it: read as UTF-8


def test_a_bom_hides_no_first_line_even_in_text() -> None:
    assert packages("requirements.txt", "\ufeff" + TEXT) == {
        Pinned("pip", "pyyaml", "5.3"),
        Pinned("pip", "requests", "2.31.0"),
    }
    assert packages("package.json", '\ufeff{"dependencies": {"lodash": "4.17.15"}}') == {
        Pinned("npm", "lodash", "4.17.15")
    }


def test_continuations_comments_and_options_as_pip_reads_them() -> None:
    text = (
        "pyyaml==\\\n5.3\n"  # continued
        "requests==2.31.0\t# a tab before the comment\n"
        "urllib3==1.24.1 \\\n    --hash=sha256:abc \\\n    --hash=sha256:def\n"
        "# a comment \\\n"
        "idna==2.7\n"
    )
    assert next(logical_lines(text)) == "pyyaml==5.3"
    assert packages("requirements.txt", text) == {
        Pinned("pip", "pyyaml", "5.3"),
        Pinned("pip", "requests", "2.31.0"),
        Pinned("pip", "urllib3", "1.24.1"),
        Pinned("pip", "idna", "2.7"),
    }


def test_includes_resolve_against_the_including_folder_and_outside_ones_have_no_path() -> None:
    text = (
        "-r base.txt\n--requirement ../common/dev.txt\n-cconstraints.txt\n--constraint=/etc/pins.txt\n"
        "-r https://example.com/r.txt\n-r ../../escape.txt\nflask==2.0 -r ignored.txt\n"
    )
    assert includes("deps/requirements.txt", text) == [
        Include("-r", "base.txt", "deps/base.txt"),
        Include("-r", "../common/dev.txt", "common/dev.txt"),
        Include("-c", "constraints.txt", "deps/constraints.txt"),
        Include("-c", "/etc/pins.txt", None),
        Include("-r", "https://example.com/r.txt", None),
        Include("-r", "../../escape.txt", None),
    ]  # `flask==2.0 -r ignored.txt`: a requirement line includes nothing
