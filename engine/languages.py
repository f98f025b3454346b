"""The languages the engine knows: LSP ``languageId``s, file extensions and keywords.

Each language has its own candidate filter (``lexicon-<name>.npz`` in the model folder): a Go
file's pool never holds identifiers that only the Python corpus has. A document's language comes
from the ``languageId`` the client sends with ``textDocument/didOpen`` (the LSP's own list of
identifiers, "Text Document Item" in the specification), or from its file extension when the
client sends one that is not listed here. Anything else is :data:`UNKNOWN`: the document's and the
workspace's own words and the network, but no corpus lexicon.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Language:
    """One language of the corpus and the candidate filter."""

    name: str
    """Short name: the lexicon file is ``lexicon-<name>.npz``, the corpus folder ``<split>/<name>/``."""
    language_ids: tuple[str, ...]
    """LSP ``languageId`` values that map here."""
    extensions: tuple[str, ...]
    """File name endings (lower case, with the dot) that map here."""
    keywords: frozenset[str]
    """Reserved words (completion items of kind Keyword rather than identifier)."""
    exclude_suffixes: tuple[str, ...] = ()
    """Endings that look like the language but are not typed code (``.d.ts`` declarations)."""
    corpus_extensions: tuple[str, ...] | None = None
    """The endings the training corpus takes (``laya corpus``); None: :attr:`extensions`. C takes
    ``.c`` and ``.h`` only, while C++ and Objective-C documents and workspace files use C's filter."""
    not_after_dot: frozenset[str] = frozenset()
    """Reserved words that never follow a member access's ``.`` (``self.class``, ``fmt.func``): no
    item there. Empty where a property may be any word (JavaScript's ``promise.catch``)."""
    name_after: frozenset[str] = frozenset()
    """Keywords after which a new name comes, never a reserved word (``def``, ``class``, ``fn``):
    no :attr:`not_after_dot` item there either."""
    member_ops: tuple[str, ...] = ()
    """Other operators after which a member or path name comes, as after ``.`` (C's ``p->next``,
    Rust's and C++'s ``std::fmt``; blanks may stand between): no :attr:`not_after_dot` item there
    but :attr:`path_words`."""
    path_words: frozenset[str] = frozenset()
    """Reserved words that may follow a :attr:`member_ops` operator (Rust's ``super::super::x``)."""
    name_signs: str = ""
    """Characters that belong to an identifier but are not word characters to the engine
    (JavaScript's ``$``: ``$el``, ``a$b``): right after one, a reserved word is an item only where
    the document already writes it after that sign (``$this``), never otherwise (``$else``)."""

    lexicon_package_chars: int | None = None
    """Most characters of one training package that the corpus lexicon (the candidate filter's
    n-gram counts, ``laya_tools.train.lexicon_texts``) counts, its files taken in a fixed random
    order; None: all. Where one package is most of a language's corpus (``effect`` was 81% of
    TypeScript's, Go's standard library 75% of Go's) its names and idioms outweigh every other
    package's. Chosen with the packages added on 2026-12-03 on the tune packages (12 files x 8,000
    characters, in process, no workspace; the eval packages beside): Go 1.5 MB 53.2 -> 53.6%
    (eval 50.6 -> 50.9%), JavaScript 1 MB 53.1 -> 53.7% (52.5 -> 53.1%), TypeScript 3 MB 53.1 ->
    54.4% (51.4 -> 51.4%), for lexicons of 13.2, 7.7 and 4.2 MB uncompressed (12.0, 5.2 and 5.4 MB
    before); uncapped, the same packages gave 53.8 / 53.5 / 54.2% for 21.5, 13.8 and 11.0 MB."""

    @property
    def corpus_endings(self) -> tuple[str, ...]:
        return self.corpus_extensions if self.corpus_extensions is not None else self.extensions


def _kw(words: str) -> frozenset[str]:
    return frozenset(words.split())


PYTHON = Language(
    "python", ("python",), (".py", ".pyi"),
    _kw("False None True and as assert async await break class continue def del elif else except "
        "finally for from global if import in is lambda nonlocal not or pass raise return try while "
        "with yield match case self cls"),
    # Python's reserved words (``keyword.kwlist``); ``match``, ``case`` are soft (``re.match``)
    not_after_dot=_kw("False None True and as assert async await break class continue def del elif "
                      "else except finally for from global if import in is lambda nonlocal not or "
                      "pass raise return try while with yield"),
    name_after=_kw("def class"))
JAVASCRIPT = Language(
    "javascript", ("javascript", "javascriptreact", "js"), (".js", ".mjs", ".cjs", ".jsx"),
    _kw("await break case catch class const continue debugger default delete do else export extends "
        "false finally for function if import in instanceof let new null return super switch this "
        "throw true try typeof undefined var void while with yield async of static get set"),
    (".min.js",), name_signs="$", lexicon_package_chars=1_000_000)
TYPESCRIPT = Language(
    "typescript", ("typescript", "typescriptreact"), (".ts", ".tsx", ".mts", ".cts"),
    JAVASCRIPT.keywords | _kw("abstract any as asserts boolean declare enum implements infer interface "
                              "is keyof module namespace never number object private protected public "
                              "readonly satisfies string symbol type unique unknown"),
    (".d.ts", ".d.mts", ".d.cts"), name_signs="$", lexicon_package_chars=3_000_000)
GO = Language(
    "go", ("go",), (".go",),
    _kw("break case chan const continue default defer else fallthrough for func go goto if import "
        "interface map package range return select struct switch type var nil true false iota"),
    # the 25 keywords (``nil``, ``true``, ``iota`` are predeclared names: a field may be one)
    not_after_dot=_kw("break case chan const continue default defer else fallthrough for func go goto "
                      "if import interface map package range return select struct switch type var"),
    lexicon_package_chars=1_500_000)
RUST = Language(
    "rust", ("rust",), (".rs",),
    _kw("as async await break const continue crate dyn else enum extern false fn for if impl in let "
        "loop match mod move mut pub ref return self Self static struct super trait true type unsafe "
        "use where while"),
    # strict keywords but ``await`` (``fut.await``)
    not_after_dot=_kw("as async break const continue crate dyn else enum extern false fn for if impl "
                      "in let loop match mod move mut pub ref return self Self static struct super "
                      "trait true type unsafe use where while"),
    name_after=_kw("fn struct enum trait mod"), member_ops=("::",), path_words=_kw("self super"))
C = Language(
    "c", ("c", "cpp", "c++", "objective-c"), (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"),
    _kw("auto break case char const continue default do double else enum extern float for goto if "
        "inline int long register restrict return short signed sizeof static struct switch typedef "
        "union unsigned void volatile while NULL"), corpus_extensions=(".c", ".h"),
    not_after_dot=_kw("auto break case char const continue default do double else enum extern float "
                      "for goto if inline int long register restrict return short signed sizeof "
                      "static struct switch typedef union unsigned void volatile while"),
    member_ops=("->", "::"))  # ``::`` in the C++ documents that take C's filter

PROSE = Language(
    "prose", ("markdown", "plaintext", "restructuredtext", "rst", "git-commit", "gitcommit", "scminput", "text",
              "asciidoc", "org"),
    (".md", ".markdown", ".rst", ".txt", ".adoc", ".org"), frozenset())
"""English prose (the typing variant, ``configs/typing.toml``): Markdown, plain text, reST, commit
messages. The code model has no lexicon for it; the typing model has only this one."""

CODE_LANGUAGES: tuple[Language, ...] = (PYTHON, JAVASCRIPT, TYPESCRIPT, GO, RUST, C)
"""The languages of the code variant's corpus and lexicons."""
LANGUAGES: tuple[Language, ...] = CODE_LANGUAGES + (PROSE,)
BY_NAME = {lang.name: lang for lang in LANGUAGES}
UNKNOWN = Language("unknown", (), (), frozenset())
"""Documents of any other language: no corpus lexicon (the document, workspace and network only)."""

_BY_ID = {i: lang for lang in LANGUAGES for i in lang.language_ids}


def for_path(path: str) -> Language:
    """The language of a file name or URI path by its extension, or :data:`UNKNOWN`."""
    name = PurePosixPath(path).name.lower()
    for lang in LANGUAGES:
        if name.endswith(lang.extensions) and not name.endswith(lang.exclude_suffixes):
            return lang
    return UNKNOWN


def for_document(language_id: str | None, uri: str = "") -> Language:
    """The language of an open document: its LSP ``languageId``, else its extension; a code
    file's extension wins over an id of another language (below)."""
    lang = _BY_ID.get((language_id or "").lower())
    by_path = for_path(uri.split("?", 1)[0])
    # a code file's extension wins over an unknown id, over "plaintext" from an editor that does
    # not know the file's language (``main.go`` sent as plaintext is Go), and over another code
    # language's id: Emacs' eglot (1.9) sends one languageId for every buffer of a server, so
    # with ``((python-mode js-mode) . ("laya-lsp"))`` a ``.js`` file comes as "python"
    if by_path in CODE_LANGUAGES:
        return by_path
    return lang if lang is not None else by_path
