"""``engine.imports``: the names a workspace's Python files import from each module."""

from collections import Counter

import pytest

from engine.imports import ImportIndex, imported_names, module_parts


@pytest.mark.parametrize("path, parts", [
    ("a/b/c.py", ("a", "b", "c")),
    ("a/b/__init__.py", ("a", "b")),
    ("stubs/m.pyi", ("stubs", "m")),
    ("file:///home/u/proj/pkg/mod.py", ("home", "u", "proj", "pkg", "mod")),
    ("C:\\proj\\pkg\\mod.py", ("proj", "pkg", "mod")),
    ("file:///c%3A/proj/pkg/mod.py", ("proj", "pkg", "mod")),
    ("file:///tmp/My%20Proj/caf%C3%A9.ts", ("tmp", "My Proj", "café")),
    ("a/b/index.ts", ("a", "b")),
    ("a/b/c.go", ()),
    ("untitled:Untitled-1", ()),
    ("", ()),
])
def test_module_parts(path, parts):
    assert module_parts(path) == parts


def test_relative_and_absolute_imports_resolve_against_the_file():
    text = ("from .errors import ParseError, LexError as LE\n"
            "from ..util import helper\n"
            "from . import sibling\n"
            "from pkg.tokens import *\n"
            "from tomlkit.items import Table\n"
            "from .......toohigh import nothing\n")
    got = imported_names(text, "pkg/sub/parser.py")
    assert got[(("pkg", "sub", "errors"), "ParseError")] == 1
    assert got[(("pkg", "sub", "errors"), "LexError")] == 1
    assert got[(("pkg", "util"), "helper")] == 1
    assert got[(("pkg", "sub"), "sibling")] == 1
    assert got[(("tomlkit", "items"), "Table")] == 1
    assert not [k for k in got if k[1] in ("*", "nothing")]
    # in a package's __init__, `.` is the package itself
    assert imported_names("from .core import run\n", "pkg/__init__.py") == Counter({(("pkg", "core"), "run"): 1})


def test_attributes_of_imported_modules_count_for_those_modules():
    text = ("import os.path\nimport pyflakes.messages as m\nfrom pyflakes import checker\n"
            "m.UnusedImport(1); m.UnusedImport(2); checker.Checker(); os.path.join('a'); local.attr\n")
    got = imported_names(text, "pyflakes/api.py")
    assert got[(("pyflakes", "messages"), "UnusedImport")] == 2
    assert got[(("pyflakes", "checker"), "Checker")] == 1
    assert got[(("pyflakes",), "checker")] == 1
    assert not [k for k in got if k[1] in ("attr", "join")]  # `local` is no import; `os.path.join` not followed


def test_a_file_that_does_not_parse_gives_nothing():
    assert imported_names("from .x import (a,\n", "p/m.py") == Counter()
    assert imported_names("\x00", "p/m.py") == Counter()


def test_expected_names_for_a_document_by_its_path():
    files = [
        ("proj/tomlkit/parser.py", "from .exceptions import ParseError\nfrom .exceptions import EmptyKeyError\n"),
        ("proj/tomlkit/container.py", "from tomlkit.exceptions import ParseError, NonExistentKey\n"),
        ("proj/tests/test_x.py", "from tomlkit.exceptions import ParseError\nimport exceptions\n"),
        ("proj/other/exceptions_user.py", "from requests.exceptions import HTTPError\n"),
        ("proj/broken.py", "def (:\n"),
        ("script.py", "from exceptions import TopLevelThing\n"),
    ]
    index = ImportIndex.from_files(files)
    doc = "file:///home/me/proj/tomlkit/exceptions.py"
    assert index.expected(doc) == ["ParseError", "EmptyKeyError", "NonExistentKey", "TopLevelThing"]
    assert index.expected(doc, limit=1) == ["ParseError"]
    # a one-part module name matches any document of that name (`from helpers import x`)
    assert index.expected("file:///exceptions.py") == ["TopLevelThing"]
    assert index.expected("file:///w/exceptions.py") == ["TopLevelThing"]
    assert index.expected("file:///w/tomlkit/other.py") == []
    assert index.expected("file:///w/tomlkit/exceptions.go") == []


def test_javascript_and_typescript_imports():
    text = ('import Foo, { Bar, baz as qux, type Quux } from "./lib/things";\n'
            "import * as ns from '../util';\n"
            'export { Exp1, Exp2 as E } from "./reexp.js";\n'
            'export * from "./all";\n'
            "import {\n  Multi,\n  Line,\n} from './ml/index.ts';\n"
            "export default foo\nimport x from './y'\n"
            "const { readFile, writeFile: wf } = require('fs');\n"
            'const helpers = require("./helpers");\n'
            "helpers.doThing(); ns.other(); x.helpers.no(); import './side-effect';\n")
    got = imported_names(text, "pkg/src/a/main.ts")
    here = ("pkg", "src", "a")
    assert got == Counter({
        (here + ("lib", "things"), "Foo"): 1, (here + ("lib", "things"), "Bar"): 1,
        (here + ("lib", "things"), "baz"): 1, (here + ("lib", "things"), "Quux"): 1,
        (here + ("reexp",), "Exp1"): 1, (here + ("reexp",), "Exp2"): 1,
        (here + ("ml",), "Multi"): 1, (here + ("ml",), "Line"): 1, (here + ("y",), "x"): 1,
        (("fs",), "readFile"): 1, (("fs",), "writeFile"): 1,
        (here + ("helpers",), "doThing"): 1, (("pkg", "src", "util"), "other"): 1})
    index = ImportIndex.from_files([("pkg/src/a/main.ts", text), ("pkg/src/b.py", "from .a.ml import Py\n")])
    assert index.expected("file:///w/pkg/src/a/ml/index.js") == ["Multi", "Line"]  # not the .py's
    assert sorted(index.expected("file:///w/pkg/src/a/lib/things.tsx")) == ["Bar", "Foo", "Quux", "baz"]
    assert module_parts("types/zod.d.ts") == ("types", "zod")


def test_paths_and_uris_meet_however_they_are_spelled():
    # the workspace walk gives file-system paths, the editor percent-encoded URIs
    windows = ImportIndex.from_files([("C:\\proj\\pkg\\a.py", "from .b import X\n")])
    assert windows.expected("file:///c%3A/proj/pkg/b.py") == ["X"]
    spaced = ImportIndex.from_files([("/tmp/My Proj/a.ts", "import { Y } from './b'\n")])
    assert spaced.expected("file:///tmp/My%20Proj/b.ts") == ["Y"]


def test_python_and_script_modules_are_kept_apart():
    index = ImportIndex.from_files([("/w/a.py", "from .errors import PyErr\n"),
                                    ("/w/b.ts", "import { TsErr } from './errors'\n")])
    assert index.expected("file:///w/errors.py") == ["PyErr"]
    assert index.expected("file:///w/errors.ts") == ["TsErr"]


def test_long_blank_runs_do_not_backtrack():
    # the first version's pattern took 9 s on `import a` + 1,000 newlines and 44 s on 40,000 blanks
    import time

    start = time.perf_counter()
    for text in ("import a" + "\n" * 20000 + "x", "export default" + "\n" * 20000 + "{}",
                 "import" + " " * 40000, "import {" + " a," * 20000, "export * as ns" + " " * 30000):
        assert imported_names(text, "src/y.ts") == Counter()
    assert time.perf_counter() - start < 5


def test_unicode_names_are_whole():
    assert imported_names("import { Ünï, $el } from './m'\n", "src/a.js") == Counter(
        {(("src", "m"), "Ünï"): 1, (("src", "m"), "$el"): 1})


@pytest.mark.parametrize("text, at", [
    ("from math import ", ("math", set())),
    ("from math import prod, ", ("math", {"prod"})),
    ("x = 1\nfrom .a.b import (\n    foo,\n    ", (".a.b", {"foo"})),
    ("    from os import ", ("os", set())),
    ("from math import prod\nx = ", None),
    ("import os\n", None),
    ("from x import (a, b)\ny = ", None),
    ("from math import prod  # a comment\n", None),
    ("from os import path; x = ", None),
    ("from os import path  # see ", None),
    ("from os import path ", None),
    ("from x import (a,\n  # c\n  ", ("x", {"a"})),
    ("from typing import Any as A, ", ("typing", {"Any", "as", "A"})),
])
def test_from_import_at(text, at):
    from engine.imports import from_import_at

    assert from_import_at(text) == at


def test_module_members_counts_absolute_from_imports():
    from engine.imports import module_members

    files = [("p1", "from collections import deque, OrderedDict\nfrom . import local\n"),
             ("p1", "from collections import deque\nfrom .pkg import rel\n"), ("p2", "def (:\n"),
             ("p2", "from collections import *\nfrom collections import deque as d, OrderedDict\n"),
             ("p3", "import os.path, os\nimport collections\n"), ("p3", "import big.own\n" * 50)]
    # modules count the projects importing them, so one project's own many imports do not lead
    assert module_members(files) == {"members": {"collections": [["deque", 3], ["OrderedDict", 2]]},
                                     "modules": {"collections": 3}}
    assert module_members(files, min_count=1, per_module=1) == {
        "members": {"collections": [["deque", 3]]},
        "modules": {"big.own": 1, "collections": 3, "os": 1, "os.path": 1}}


@pytest.mark.parametrize("text, head", [
    ("import ", ""), ("x = 1\nfrom ", ""), ("    import ", ""), ("from os.", "os."),
    ("from a.b.", "a.b."), ("yield from ", None), ("from x import ", None), ("x = ", None),
    ("import os, ", ""), ("import os.path as p, sys, json.", "json."), ("import os as ", None),
    ("import os ", None), ("import os,sys,", ""),
    ('def f():\n    """Read a value\n    from ', None), ('x = """\nimport ', None),
    ('"""Doc."""\nfrom ', ""), ("x = \'\'\'a \"\"\" b\'\'\'\nimport ", ""),
    ('s = """\n\'\'\'\n"""\nfrom ', ""),
    # quotes in comments and one-line strings pair with nothing; escaped quotes close nothing
    ("Q = ('\"\"\"', \"'''\")\nimport ", ""), ('# a """ here\nimport ', ""),
    ('s = """a \\""" b"""\nimport ', ""), ('s = """a \\""" b\nimport ', None),
])
def test_module_name_at(text, head):
    from engine.imports import module_name_at

    assert module_name_at(text) == head


def test_next_parts_sums_what_a_head_leads_to():
    from engine.imports import next_parts

    mods = {"os": 5, "os.path": 2, "collections": 4, "collections.abc": 3, "osmosis": 1}
    assert next_parts(mods, "") == {"os": 7, "collections": 7, "osmosis": 1}
    assert next_parts(mods, "os.") == {"path": 2}
    assert next_parts(mods, "nothing.") == {}


def test_a_missing_or_corrupt_members_file_turns_the_term_off(tmp_path, caplog):
    from engine.imports import MEMBERS_FILE, load_module_members

    assert load_module_members(tmp_path) == {} and not caplog.records
    (tmp_path / MEMBERS_FILE).write_text("{not json")
    assert load_module_members(tmp_path) == {}
    for bad in ('["a list"]', '{"members": {"collections": 5}}', '{"members": {}, "modules": ["os"]}',
                '{"members": {"collections": [["deque"]]}}', '{"members": {"c": [["deque", "5"]]}}',
                '{"members": {"c": [["deque", 0]]}}', '{"members": {}, "modules": {"os": true}}'):
        caplog.clear()
        (tmp_path / MEMBERS_FILE).write_text(bad)
        assert load_module_members(tmp_path) == {}, bad
        assert MEMBERS_FILE in caplog.text, bad
    (tmp_path / MEMBERS_FILE).write_text('{"members": {"c": [["deque", 2]]}, "modules": {"c": 1}}')
    assert load_module_members(tmp_path) == {"members": {"c": [["deque", 2]]}, "modules": {"c": 1}}
    assert MEMBERS_FILE in caplog.text


def test_the_shipped_model_completes_from_import_statements():
    from engine.predictor import Predictor

    p = Predictor.load()
    assert p.predict("import os\nfrom collections import ")[0].text in ("defaultdict", "deque")
    first = [c.text for c in p.predict("from functools import partial, ")][:3]
    assert "wraps" in first and "partial" not in first, first
    # the same context outside an import statement is not steered
    assert p.predict("from functools import partial\nx = ")[0].text != "wraps"
    assert p.predict("import os\nfrom os.")[0].text == "path"


def test_workspace_names_of_a_module_however_it_was_spelled():
    index = ImportIndex.from_files([
        ("/w/src/pkg/a.py", "from .util import one, two\n"),
        ("/w/src/pkg/c.py", "from pkg.util import three\n"),
        ("/w/src/other/d.py", "from other.util import nope\n")])
    assert index.names_of("py", ("pkg", "util")) == Counter({"one": 1, "two": 1, "three": 1})
    assert index.names_of("py", ("w", "src", "pkg", "util")) == Counter({"one": 1, "two": 1, "three": 1})
    assert index.names_of("js", ("pkg", "util")) == Counter()
    assert index.names_of("py", ()) == Counter()


def test_a_text_that_may_start_inside_a_string_counts_as_code():
    from engine.imports import QUOTE_SCAN_MAX, in_triple_quoted
    from laya_lsp.documents import MAX_PREFIX_CHARS

    assert QUOTE_SCAN_MAX == MAX_PREFIX_CHARS  # the longest prefix the server hands the engine
    inside = '"""\n' + "x" * 100 + "\nfrom "
    assert in_triple_quoted(inside)
    # cut by the server's limit, the text's first quotes may close a string: no pairing
    assert not in_triple_quoted(" " * QUOTE_SCAN_MAX + inside)


def test_module_name_at_remembers_the_lines_above_but_never_a_stale_answer():
    """The scan of the lines above is remembered per text (typing a module name asks again at
    every key); a change above the line is a new text, a new answer."""
    from engine.imports import module_name_at

    inside = '"""Docs.\n' + "x = 1\n" * 2000  # an open docstring, 12 KB of it
    closed = inside + '"""\n'
    for _ in range(2):
        assert module_name_at(inside + "from ") is None
        assert module_name_at(inside + "from os.") is None
        assert module_name_at(closed + "from ") == ""
        assert module_name_at(closed + "from os.") == "os."
    # the same lines with the first quotes made a comment: the last ones now open a string
    assert module_name_at(closed.replace('"""Docs.', "# Docs.", 1) + "from ") is None
    assert module_name_at(inside.replace('"""Docs.', "# Docs.", 1) + "from ") == ""


def test_module_name_at_in_a_text_cut_by_the_servers_limit_counts_as_code():
    """The server hands at most ``QUOTE_SCAN_MAX`` characters before the cursor; a long file's
    prefix cut inside a docstring starts with that docstring's closing quotes, so pairing them
    would put every later line inside a string. Such a text counts as code, as in
    :func:`in_triple_quoted`; scanning only the lines above the cursor's line (always shorter
    than the limit) lost that rule, and an import line of a long file got no module names."""
    from engine.imports import QUOTE_SCAN_MAX, module_name_at

    line = "    from os."
    start = 'the rest of a docstring, cut by the limit\n"""\n'
    filler = "x = 1\n" * ((QUOTE_SCAN_MAX - len(start) - len(line) - 100) // 6)
    above = start + filler
    text = above + "#" * (QUOTE_SCAN_MAX - len(above) - len(line) - 1) + "\n" + line
    assert len(text) == QUOTE_SCAN_MAX
    assert module_name_at(text) == "os."
    assert module_name_at(text[1:]) is None  # under the limit: the quotes are paired
