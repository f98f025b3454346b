"""What code imports: names a workspace expects a module to define, and what modules export.

When a file is written (or written again) inside a project, the project's other files often
already name what it must define: ``from tomlkit.exceptions import ParseError``, ``from
._decorator import _BasicMixin``, ``messages.UnusedImport`` after ``from pyflakes import
messages``, ``import { ZodError } from "./ZodError"``. :class:`ImportIndex` collects those names
per module, from the workspace's Python files (parsed with :mod:`ast`; a file that does not parse
is skipped) and JavaScript and TypeScript files (their ``import``/``export ... from`` statements
and ``require`` calls, by regular expression), and :meth:`ImportIndex.expected` gives them for a
document by its path, so the candidate pool can offer them where the document defines something
(the ``expect`` prior weight, ``engine.config.EngineConfig.prior_weights``).

Module names come from paths: ``a/b/c.py`` is ``a.b.c`` and ``a/b/__init__.py`` is ``a.b``;
``a/b/c.ts`` is ``a/b/c`` and so is ``a/b/c/index.js``, and ``"./c"`` imported from ``a/b/x.js``
resolves to it. A document matches an imported module when the module's name is the document's,
or a suffix of it (``tomlkit.exceptions`` or ``exceptions`` for ``.../src/tomlkit/exceptions.py``),
so the folder the workspace was opened at does not matter; Python and JavaScript/TypeScript
modules are kept apart.

The same reading, over the training corpus's Python, gives :func:`module_members`: what code
imports from each module (``from collections import deque``) and how many projects import it,
shipped in the model folder (:data:`MEMBERS_FILE`), so that inside ``from M import`` the names of
``M`` lead (:func:`from_import_at`; the ``from`` prior weight), and where ``import``/``from`` name
a module, the modules (:func:`module_name_at`).
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from pathlib import PurePosixPath
from urllib.parse import unquote

_SCRIPT_DEFINES = frozenset({"class", "function", "interface", "type", "enum"})
DEFINES: dict[str, frozenset[str]] = {
    "python": frozenset({"class", "def"}),
    "javascript": _SCRIPT_DEFINES,
    "typescript": _SCRIPT_DEFINES,
}
"""Per language (``engine.languages`` names), the keywords after which an identifier is being
defined: where the expected names are offered. At every word start instead, or after a line break
too, they cost more first items than they gave (the ``tune`` packages, Python, with the workspace,
6 files x 8,000 characters); in TypeScript ``function``, ``interface``, ``type`` and ``enum``
added 0.3 points there (57.87 -> 58.16%), and ``const`` nothing in JavaScript. Rust's ``use``
trees, read the same way with ``fn``, ``struct``, ``trait`` and the like, moved its tune packages
by nothing and its eval packages by 0.04 points, so Rust has none."""

IMPORTING = ("python", "javascript", "typescript")
"""The languages (``engine.languages`` names) whose imports :class:`ImportIndex` reads."""

SCRIPT_EXTENSIONS = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".mts", ".cts")

MAX_NAMES = 256
"""Most names :meth:`ImportIndex.expected` returns for one document (the most often imported)."""

_SEP = re.compile(r"[\\/]+")
_DRIVE = re.compile(r"[A-Za-z]:")


def module_kind(path: str) -> str | None:
    """``"py"`` for a Python path, ``"js"`` for a JavaScript or TypeScript one (they import each
    other), else None: modules of different kinds never match."""
    suffix = PurePosixPath(_SEP.split(path)[-1]).suffix
    if suffix in (".py", ".pyi"):
        return "py"
    return "js" if suffix in SCRIPT_EXTENSIONS else None


def module_parts(path: str) -> tuple[str, ...]:
    """The module name of a file's path, as parts: ``a/b/c.py`` -> ``("a", "b", "c")``,
    ``a/b/__init__.py`` -> ``("a", "b")``, ``a/b/index.ts`` -> ``("a", "b")``; ``()`` for a path of
    no :func:`module_kind`.
    A ``file://`` URI's path works too (``file:///a/b.py``, percent-decoded); a Windows drive
    (``C:``, ``c%3A``) is left out, so a path and its URI give the same parts."""
    if path.startswith("file:"):
        path = unquote(path[5:])
    parts = [p for p in _SEP.split(path) if p and p != "."]
    if parts and _DRIVE.fullmatch(parts[0]):
        parts.pop(0)
    if not parts:
        return ()
    stem = PurePosixPath(parts[-1])
    if stem.suffix in (".py", ".pyi"):
        parts[-1] = stem.stem
        if parts[-1] == "__init__":
            parts.pop()
    elif stem.suffix in SCRIPT_EXTENSIONS:
        parts[-1] = stem.stem[:-2] if stem.stem.endswith(".d") else stem.stem  # x.d.ts declares x
        if parts[-1] == "index":
            parts.pop()
    else:
        return ()
    return tuple(parts)


def _resolve(importer: tuple[str, ...], is_package: bool, module: str | None, level: int) -> tuple[str, ...]:
    """The absolute module of an ``ImportFrom`` (``from ..x import y``: ``level`` 2, ``module``
    ``"x"``) in the file whose module is ``importer``; ``()`` when it climbs above the path."""
    tail = tuple(module.split(".")) if module else ()
    if level == 0:
        return tail
    package = importer if is_package else importer[:-1]
    up = level - 1
    if up > len(package):
        return ()
    base = package[: len(package) - up]
    return base + tail if base or tail else ()


_SPEC = r"""['"]([^'"\n]+)['"]"""
# possessive quantifiers (Python 3.11): a long run of blanks after `import x` must not backtrack
_ES_FROM = re.compile(r"\b(?:import|export)\s++(?:type\s++)?(?P<what>(?:[\w$]++\s*+,?+\s*+)?"
                      r"(?:\{[^}]*+\}|\*\s*+as\s++[\w$]++|\*)?+)\s*+\bfrom\s*+" + _SPEC)
_REQUIRE = re.compile(r"\b(?:const|let|var)\s++(?P<what>[\w$]++|\{[^}]*+\})\s*+=\s*+require\(\s*+"
                      + _SPEC + r"\s*+\)")
_NAME = re.compile(r"(?:[^\W\d]|\$)[\w$]*+")


def _script_module(importer: tuple[str, ...], spec: str) -> tuple[str, ...]:
    """The module a JavaScript/TypeScript import specifier names, as path parts: relative ones
    (``./x``, ``../y/z.js``) resolved from the importer's folder; bare ones (``zod/lib/types``) as
    written; ``()`` when it climbs above the path."""
    parts = [p for p in spec.split("/") if p and p != "."]
    if spec.startswith("."):
        base = list(importer[:-1])
        for p in parts:
            if p == "..":
                if not base:
                    return ()
                base.pop()
            else:
                base.append(p)
        parts = base
    if parts:
        m = module_parts("/".join(parts))  # strips an extension or /index, if written
        if m:
            return m
    return tuple(parts)


def _script_names(text: str, path: str) -> Counter:
    """:func:`imported_names` for a JavaScript or TypeScript file."""
    me = module_parts(path)
    out: Counter = Counter()
    namespaces: dict[str, tuple[str, ...]] = {}
    for rx in (_ES_FROM, _REQUIRE):
        for m in rx.finditer(text):
            mod = _script_module(me, m.group(2))
            if not mod:
                continue
            what = m.group("what").strip()
            braces = re.search(r"\{([^}]*)\}", what)
            if braces:
                for item in braces.group(1).split(","):
                    # `a as b` (ES), `a: b` (destructuring): the module's name is the first
                    names = _NAME.findall(re.sub(r"^\s*type\s+", "", item))
                    if names and names[0] not in ("default", "type"):
                        out[(mod, names[0])] += 1
                what = what[: braces.start()] + what[braces.end():]
            star = re.search(r"\*\s*as\s+([\w$]+)", what)
            if star:
                namespaces[star.group(1)] = mod
                what = what[: star.start()] + what[star.end():]
            for name in _NAME.findall(what):  # a default import, or `const x = require(...)`
                if rx is _REQUIRE:
                    namespaces[name] = mod
                else:
                    out[(mod, name)] += 1
    if namespaces:
        for m in re.finditer(r"(?<![\w$.])((?:[^\W\d]|\$)[\w$]*+)\.((?:[^\W\d]|\$)[\w$]*+)", text):
            mod = namespaces.get(m.group(1))
            if mod:
                out[(mod, m.group(2))] += 1
    return out


def imported_names(text: str, path: str) -> Counter:
    """``(module parts, name)`` -> times named, for one Python file: every ``from m import name``
    (relative imports resolved against ``path``), and every ``alias.name`` where ``alias`` is an
    imported module (``import a.b as m`` then ``m.name``; ``from a import b`` then ``b.name``
    counts for ``a.b``). A file that does not parse gives nothing. For a JavaScript or
    TypeScript path: the names of ``import``/``export ... from`` statements and of ``require``
    destructuring, a default import's local name, and ``ns.name`` after ``import * as ns`` or
    ``const ns = require(...)``."""
    suffix = PurePosixPath(_SEP.split(path)[-1]).suffix
    if suffix in SCRIPT_EXTENSIONS:
        return _script_names(text, path)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Counter()
    me = module_parts(path)
    is_package = PurePosixPath(_SEP.split(path)[-1]).stem == "__init__"
    out: Counter = Counter()
    aliases: dict[str, tuple[str, ...]] = {}
    attributes: Counter = Counter()  # (name, attribute) of every `name.attribute`
    for node in ast.walk(tree):  # one pass: 4 s -> ~2.5 s on 5 MB of Python
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name):
                attributes[(node.value.id, node.attr)] += 1
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(me, is_package, node.module, node.level or 0)
            if not mod:
                continue
            for a in node.names:
                if a.name != "*":
                    out[(mod, a.name)] += 1
                    aliases[a.asname or a.name] = mod + (a.name,)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = tuple(a.name.split("."))
                else:  # `import a.b` binds `a`; `a.b.name` is not followed
                    aliases[a.name.split(".")[0]] = (a.name.split(".")[0],)
    for (name, attr), n in attributes.items():
        mod = aliases.get(name)
        if mod:
            out[(mod, attr)] += n
    return out


class ImportIndex:
    """The names each module is imported for across a workspace's files."""

    def __init__(self) -> None:
        self.by_module: dict[tuple[str, ...], Counter] = {}
        """``(kind, *module parts)`` (:func:`module_kind`, :func:`module_parts`) -> name -> times."""
        self._by_last: dict | None = None  # (kind, last part) -> keys' parts, for names_of

    @classmethod
    def from_files(cls, files) -> "ImportIndex":
        """Index ``(path, text)`` pairs (paths relative to a workspace folder, or absolute)."""
        index = cls()
        for path, text in files:
            kind = module_kind(path)
            for (mod, name), n in imported_names(text, path).items():
                index.by_module.setdefault((kind,) + mod, Counter())[name] += n
        return index

    def __len__(self) -> int:
        return len(self.by_module)

    def names_of(self, kind: str, parts: tuple[str, ...]) -> Counter:
        """What the workspace imports from the module ``parts`` (of ``kind``), however each file
        spelled it: keys that end with ``parts`` (relative imports resolved to whole paths) or that
        ``parts`` ends with (``pkg.util`` for ``.../src/pkg/util``)."""
        if self._by_last is None:
            by_last: dict[tuple, list] = {}
            for key in self.by_module:
                if len(key) > 1:
                    by_last.setdefault((key[0], key[-1]), []).append(key[1:])
            self._by_last = by_last
        total: Counter = Counter()
        n = len(parts)
        for key in self._by_last.get((kind, parts[-1]) if parts else (), ()):
            k = len(key)
            if (key[k - n:] if k >= n else parts[n - k:]) == (parts if k >= n else key):
                total.update(self.by_module[(kind,) + key])
        return total

    def expected(self, doc_path: str, limit: int = MAX_NAMES) -> list[str]:
        """Names the workspace imports from the module at ``doc_path`` (a path or ``file://`` URI),
        most often imported first; ``[]`` for a document that is no Python, JavaScript or
        TypeScript file or that nobody imports from. Every imported module whose name is a suffix
        of the document's counts (``tomlkit.exceptions`` and ``exceptions`` for
        ``.../src/tomlkit/exceptions.py``), so the folder the workspace was opened at does not
        matter."""
        me = module_parts(doc_path)
        kind = module_kind(doc_path.split("?", 1)[0])
        if not me or kind is None:
            return []
        # only keys the document's path ends with: a key longer than the path is another file
        # (``names_of`` also takes those, as an import's spelling is a partial path)
        total: Counter = Counter()
        for k in range(len(me)):
            hit = self.by_module.get((kind,) + me[k:])
            if hit:
                total.update(hit)
        return [w for w, _ in total.most_common(limit) if w.replace("$", "_").isidentifier()]


MEMBERS_PER_MODULE = 64
"""Most names :func:`module_members` keeps per module (the most often imported)."""

MEMBERS_FILE = "imports-python.json"
"""The model folder's table of what Python code imports from each module (:func:`module_members`)."""


def module_members(files, min_count: int = 2, per_module: int = MEMBERS_PER_MODULE) -> dict[str, dict]:
    """What Python code imports, by absolute module name, from ``(project, text)`` pairs:
    ``{"members": {"collections": [["deque", 40], ["OrderedDict", 31], ...], ...}, "modules":
    {"collections": 30, "os.path": 12, ...}}``: the names each module is imported for (``from
    collections import deque``), named ``min_count`` times or more, most often first,
    ``per_module`` at most; and in how many projects each module is imported (``import m`` or
    ``from m import ...``), ``min_count`` or more (so a large project importing its own modules
    does not lead every ``import``). Relative imports name the corpus's own packages and are left
    out; a text that does not parse too."""
    counts: dict[str, Counter] = {}
    projects: dict[str, set] = {}
    for project, text in files:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    projects.setdefault(a.name, set()).add(project)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                projects.setdefault(node.module, set()).add(project)
                c = counts.setdefault(node.module, Counter())
                for a in node.names:
                    if a.name != "*":
                        c[a.name] += 1
    out = {}
    for mod, c in sorted(counts.items()):
        kept = [[w, n] for w, n in c.most_common(per_module) if n >= min_count]
        if kept:
            out[mod] = kept
    return {"members": out, "modules": {m: len(p) for m, p in sorted(projects.items()) if len(p) >= min_count}}


_MODULE_AT = re.compile(r"^[ \t]*(?:import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*+|from[ \t]+)"
                        r"((?:\w+\.)*)$")


def module_name_at(text: str) -> str | None:
    """Where a Python ``import`` or ``from`` statement names its module at the end of ``text``: the
    dotted head typed so far (``""`` after ``import `` or ``import os, ``, ``"os."`` after
    ``from os.``); None elsewhere."""
    start = text.rfind("\n") + 1
    m = _MODULE_AT.search(text[start:])
    # the line so far holds no quote and no "#" (the pattern allows none), so the end of the text
    # is in a string exactly when the line's start is: scan the lines above once per line. The
    # length rule is the whole text's (in_triple_quoted): a text cut at QUOTE_SCAN_MAX may start
    # inside a string, and so may the lines above its last one, which are always shorter
    if m is None or (len(text) < QUOTE_SCAN_MAX and _in_triple_quoted_above(text[:start])):
        return None
    return m.group(1)


QUOTE_SCAN_MAX = 64 * 1024
"""Longest text whose quotes :func:`in_triple_quoted` pairs. The server hands the engine at most
this much text before the cursor (``laya_lsp.documents.MAX_PREFIX_CHARS``), so a text this long
may start inside a string, and its pairing would be upside down: such a text counts as code."""
_OUTSIDE = re.compile(r"#[^\n]*|" + r'"""' + r"|'''|" + r'"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])*'")
"""What code outside a string holds that moves a quote's meaning: a comment, a triple quote, a
one-line string (escapes honoured)."""
_CLOSE = {
    '"""': re.compile(r'(?:\\.|[^\\"]|"(?!""))*"""', re.S),
    "'''": re.compile(r"(?:\\.|[^\\']|'(?!''))*'''", re.S),
}
"""The rest of a triple-quoted string up to its closing quotes (escapes honoured)."""


def in_triple_quoted(text: str) -> bool:
    """Whether the end of ``text`` (Python source from the file's start) is inside a
    triple-quoted string: a docstring's line that starts ``from the ...`` is prose, not an
    import. Comments and one-line strings are skipped, so their quotes pair with nothing. False
    for a text of :data:`QUOTE_SCAN_MAX` characters or more (it may start inside a string)."""
    if len(text) >= QUOTE_SCAN_MAX:
        return False
    pos = 0
    while True:
        m = _OUTSIDE.search(text, pos)
        if m is None:
            return False
        close = _CLOSE.get(m.group())
        if close is None:
            pos = m.end()
            continue
        rest = close.match(text, m.end())
        if rest is None:
            return True
        pos = rest.end()


@functools.lru_cache(maxsize=4)
def _in_triple_quoted_above(head: str) -> bool:
    """:func:`in_triple_quoted` of the text above the cursor's line, remembered: typing a module
    name re-asks for the same lines at every key (6 ms each on a 58 KB file; a hit costs the
    string's hash and comparison, ~0.1 ms)."""
    return in_triple_quoted(head)


def next_parts(modules: dict[str, int], head: str) -> dict[str, int]:
    """The part that follows ``head`` (``""`` or ``"os."``) in each module name of ``modules``, with
    the counts of the modules it leads to summed: ``{"os": 520, "sys": 400, ...}``."""
    out: Counter = Counter()
    for name, n in modules.items():
        if name.startswith(head):
            out[name[len(head):].split(".", 1)[0]] += n
    out.pop("", None)
    return dict(out)


_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import\b", re.M)
_ITEM = r"\w+(?:\s+as\s+\w+)?\s*,"
_LISTED = re.compile(r"[ \t]*(?:" + _ITEM.replace("\\s", "[ \\t]") + r"[ \t]*)*")
_LISTED_PAREN = re.compile(r"[ \t]*\(\s*(?:" + _ITEM + r"\s*)*")
_COMMENT = re.compile(r"#[^\n]*")


def from_import_at(text: str) -> tuple[str, set[str]] | None:
    """The module of the Python ``from M import`` statement whose next name the end of ``text``
    is at (right after ``import``, a comma, or an open parenthesis; comments inside parentheses
    allowed), and the names it already lists; None elsewhere (after a listed name, an ``as``, a
    ``;`` or a comment, or when the statement started over 2,000 characters back)."""
    tail = text[-2000:]
    m = None
    for m in _FROM_IMPORT.finditer(tail):
        pass
    if m is None:
        return None
    rest = tail[m.end():]
    if rest.lstrip(" \t").startswith("("):
        rest = _COMMENT.sub("", rest)
        if ")" in rest or not _LISTED_PAREN.fullmatch(rest):
            return None
    elif not _LISTED.fullmatch(rest):
        return None
    return m.group(1), {w for w in re.findall(r"\w+", rest)}


def load_module_members(folder, name: str = MEMBERS_FILE) -> dict[str, dict]:
    """The model folder's :data:`MEMBERS_FILE` (or ``name``: Go's ``engine.go_imports.MEMBERS_FILE``
    has the same shape); ``{}`` when it has none, or it does not parse: the ``from`` term is then
    off (logged with the file's name)."""
    import json
    import logging
    from pathlib import Path

    if folder is None:
        return {}
    path = Path(folder) / name
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        logging.getLogger(__name__).error("%s: %s; its names are not offered", path, e)
        return {}
    if not _well_formed(data):
        logging.getLogger(__name__).error("%s is not a table of modules and their names (as laya export "
                                          "writes it); its names are not offered", path)
        return {}
    return data


def _count(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0


def _well_formed(data) -> bool:
    """Whether ``data`` has :func:`module_members`' shape, with positive integer counts."""
    if not isinstance(data, dict) or not isinstance(data.get("members"), dict):
        return False
    modules = data.get("modules", {})
    if not isinstance(modules, dict) or not all(isinstance(k, str) and _count(n) for k, n in modules.items()):
        return False
    return all(isinstance(names, list) and all(
        isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and _count(e[1]) for e in names)
        for names in data["members"].values())


def resolve_module(doc_path: str, module: str) -> tuple[str, ...]:
    """The parts of the module that ``from <module> import`` names in the Python file at
    ``doc_path`` (a path or ``file://`` URI): relative ones resolved against it."""
    level = len(module) - len(module.lstrip("."))
    me = module_parts(doc_path) if level else ()
    is_package = level and PurePosixPath(_SEP.split(doc_path)[-1]).stem == "__init__"
    return _resolve(me, bool(is_package), module.lstrip(".") or None, level)
