"""Go's qualified identifiers: which packages a file imports, and what code uses from each.

In Go, ``pkg.Name`` with ``pkg`` an imported package names something the package exports, and an
exported identifier begins with an upper-case letter (The Go Programming Language Specification,
"Exported identifiers"). So after ``os.`` in a file that imports ``"os"``, ``parts`` or ``len``
cannot come next, and ``Getenv`` or ``Exit`` can. Before this the engine offered the document's
words there (``os.`` led with ``Split``, ``strings``, ``parts``, ``string``, ``error``).

:func:`imported_packages` reads a file's import declarations; :func:`package_members` counts,
over the training corpus's Go, the exported names code uses after each imported package
(``"strings"`` -> ``Split``, ``TrimSpace``, ...), shipped in the model folder as
:data:`MEMBERS_FILE` (written by ``laya export``, read by ``engine.imports.load_module_members``);
:func:`package_at` tells the engine where a word follows an imported package's dot, so that it
offers only exported names there and the package's most used ones first.

A package's name is its import path's last element (``"net/http"`` -> ``http``; a major
version element is skipped, ``".../cli/v2"`` -> ``cli``; ``gopkg.in/yaml.v3`` -> ``yaml``;
a ``go-`` prefix or a ``-go``/``.go`` suffix is dropped, and other ``-``/``.`` make ``_``), unless
the import names it (``jww "github.com/spf13/jwalterweatherman"``): the usual convention, not a
rule of the language, so a package named otherwise is simply not recognised (nothing is
filtered then). Dot and blank imports name nothing, and cgo's ``"C"`` is no package (``C.int``,
``C.free``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter

MEMBERS_FILE = "imports-go.json"
"""The model folder's table of what Go code uses from each imported package (:func:`package_members`)."""

MEMBERS_PER_PACKAGE = 96
"""Most names :func:`package_members` keeps per package (the most used)."""

HEAD_CHARS = 16_384
"""How far into a file :func:`import_section` looks for import declarations (they follow the
package clause; a long licence comment may come before)."""

_BLOCK = re.compile(r"^[ \t]*import[ \t]*\(([^)]*)\)", re.M)
_SINGLE = re.compile(r"^[ \t]*import[ \t]+((?:[^\W\d]\w*|\.)[ \t]+)?\"([^\"\n]+)\"", re.M)
_SPEC = re.compile(r"(?:^|;)[ \t]*((?:[^\W\d]\w*|\.)[ \t]+)?\"([^\"\n]+)\"", re.M)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_VERSION = re.compile(r"v(?:[2-9]|[1-9]\d+)")  # a module's major version 2+ (v1 is a name)


def package_name(path: str) -> str | None:
    """The name a Go package imported as ``path`` conventionally has (module docstring), or None
    when the path yields no identifier."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    last = parts[-1]
    if _VERSION.fullmatch(last) and len(parts) > 1:
        last = parts[-2]
    last = re.sub(r"\.v\d+$", "", last)
    if last.startswith("go-"):
        last = last[3:]
    last = re.sub(r"[-.]go$", "", last)
    last = re.sub(r"[-.]", "_", last)
    return last if last.isidentifier() else None


@functools.lru_cache(maxsize=8)
def imported_packages(head: str) -> dict[str, str]:
    """``{local name: import path}`` of the import declarations in ``head`` (a Go file's text from
    its start): ``import "fmt"``, ``import jww "..."`` and ``import ( ... )`` blocks (specs on
    their own lines or separated by ``;``), comments anywhere; dot (``.``) and blank (``_``)
    imports and cgo's ``"C"`` (whose names are C's, lower-case ones too) are left out.
    Remembered for the last few heads (a file's head changes rarely while it is typed)."""
    out: dict[str, str] = {}

    def add(alias: str | None, path: str) -> None:
        name = alias.strip() if alias else package_name(path)
        if name and name not in (".", "_") and path != "C":  # cgo's C: C.int, C.free
            out[name] = path

    head = _COMMENT.sub(" ", head)
    for m in _BLOCK.finditer(head):
        for s in _SPEC.finditer(m.group(1)):
            add(s.group(1), s.group(2))
    for m in _SINGLE.finditer(head):
        add(m.group(1), m.group(2))
    return out


_DECLARATION = re.compile(r"^(?:func|type|var|const)\b", re.M)


def import_section(text: str) -> str:
    """The start of a Go file's text up to its first top-level declaration (``func``, ``type``,
    ``var``, ``const`` at a line's start), where the import declarations must be, at most
    :data:`HEAD_CHARS`: it stays the same while the code below it is typed, so
    :func:`imported_packages` reads it once (~0.15 ms; ~20 us remembered)."""
    head = text[:HEAD_CHARS]
    m = _DECLARATION.search(head)
    return head[:m.start()] if m else head


_ACCESS = re.compile(r"(?<![\w.])([^\W\d]\w*)\.$")


def package_at(ctx_text: str) -> tuple[str, str] | None:
    """``(name, import path)`` when ``ctx_text`` (a Go file from its start up to a word's start)
    ends with an imported package's name and a dot (``strings.``), and the last
    :data:`SHADOW_CHARS` characters use that name only so (:func:`_shadowed`: no ``url := ...``,
    no parameter ``url *URL``); None elsewhere."""
    m = _ACCESS.search(ctx_text, max(0, len(ctx_text) - 64))
    if m is None:
        return None
    name = m.group(1)
    path = imported_packages(import_section(ctx_text)).get(name)
    if path is None or _shadowed(name, ctx_text[-SHADOW_CHARS:]):
        return None
    return name, path


SHADOW_CHARS = 8_192
"""How far back :func:`package_at` looks for a use of the package's name that shows a local of
that name (a function's body, usually)."""


_NAME_CHAR = re.compile(r"[\w.]")
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|`[^`]*`|\'(?:\\.|[^\'\\])*\'')  # closed strings and runes
_ALIAS = re.compile(r"[ \t]+\"")  # an import's alias: jww "github.com/spf13/jwalterweatherman"


def _shadowed(name: str, text: str) -> bool:
    """Whether ``text`` uses ``name`` other than as a qualifier (``name.``): in Go a package's name
    can stand nowhere else, so any other use (``url := ...``, a parameter ``url *URL`` on any line
    of a signature, ``url, base *URL``, ``var (\n\turl = ...``, ``f(url)``) means a variable,
    constant, parameter or field of that name is in play here. Uses in a ``//`` comment or a
    string on their line, and an import's alias, do not count. Conservative: where in doubt, the
    names are not filtered. (One pass of ``re`` over the text, which skips ``name.`` itself.)"""
    looked = 0
    for m in re.finditer(re.escape(name) + r"(?![\w])(?![ \t]*\.)", text):
        i, j = m.start(), m.end()
        if i and _NAME_CHAR.match(text, i - 1):
            continue  # part of another name, or a field (``x.url``)
        looked += 1
        if looked > 64:
            return True  # a text made of the name in strings and comments: do not filter
        # the line before it (its last 256 characters), its strings out
        line = _STRINGS.sub("", text[max(text.rfind("\n", 0, i) + 1, i - 256):i])
        if "//" in line or '"' in line or "`" in line or _ALIAS.match(text, j):
            continue  # in a comment or a string (one still open), or an import's alias
        return True
    return False


def package_members(files, min_count: int = 2, per_package: int = MEMBERS_PER_PACKAGE) -> dict[str, dict]:
    """What Go code uses from each imported package, from ``(project, text)`` pairs:
    ``{"members": {"strings": [["HasPrefix", 1579], ["Contains", 1479], ...], ...}}``, keyed by
    import path: the exported names written after the package's name (``strings.Split``) in files
    that import it, ``min_count`` times or more, most used first, ``per_package`` at most; only
    packages that ``min_count`` projects or more import (a project's own packages are of no use
    to another). (The shape of ``engine.imports.module_members``, so
    ``engine.imports.load_module_members`` reads it.)"""
    counts: dict[str, Counter] = {}
    projects: dict[str, set] = {}
    for project, text in files:
        imports = imported_packages(import_section(text))
        if not imports:
            continue
        for path in imports.values():
            projects.setdefault(path, set()).add(project)
        code = _COMMENT.sub(" ", text)
        names = "|".join(sorted(map(re.escape, imports), key=len, reverse=True))
        for m in re.finditer(rf"(?<![\w.])({names})\.([^\W\d_]\w*)", code):
            member = m.group(2)
            if member[0].isupper():
                counts.setdefault(imports[m.group(1)], Counter())[member] += 1
    out = {}
    for path, c in sorted(counts.items()):
        if len(projects[path]) < min_count:
            continue
        kept = [[w, n] for w, n in c.most_common(per_package) if n >= min_count]
        if kept:
            out[path] = kept
    return {"members": out}
