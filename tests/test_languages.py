"""Per-language candidate filters: a document's pool holds its own language's corpus identifiers,
never another language's (the document's own words are always allowed)."""

import itertools
import string

import pytest

from engine import languages
from engine.predictor import Predictor

SAMPLES = {
    "python": "import os\n\n\ndef main(argv):\n    path = os.path.join(argv[0], 'x')\n    return ",
    "javascript": "const fs = require('fs');\n\nfunction main(argv) {\n  const path = argv[0];\n  return ",
    "typescript": "import { readFile } from 'fs';\n\nexport function main(argv: string[]): number {\n  return ",
    "go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tx := 1\n\t",
    "rust": "use std::fmt;\n\nfn main() {\n    let x = 1;\n    ",
    "c": "#include <stdio.h>\n\nint main(int argc, char **argv) {\n    int x = 0;\n    ",
}


@pytest.fixture(scope="module")
def predictor():
    p = Predictor.load()
    return p


def test_every_known_language_ships_a_lexicon(predictor):
    assert set(predictor.lexicons) == {lang.name for lang in languages.CODE_LANGUAGES}


@pytest.mark.parametrize("lang", sorted(SAMPLES))
def test_pool_holds_no_other_language_only_identifiers(predictor, lang):
    own = set(predictor.corpus_lexicon(lang).words)
    others = set()
    for other in SAMPLES:
        if other != lang:
            others |= set(predictor.corpus_lexicon(other).words)
    foreign = others - own
    text = SAMPLES[lang]
    doc_words = set(predictor.build_document(text, lang).uni)
    doc = f"file:///sample/{lang}"
    predictor.reset()
    predictor.observe_document(doc, text, lang)
    seen = set()
    for prefix in [""] + list(string.ascii_letters) + ["".join(p) for p in itertools.product("spf", "tre")]:
        seen |= {c.text for c in predictor.predict(text + prefix, doc_id=doc, max_items=50) if c.kind != "line"}
        pool = predictor.pool.candidates(prefix, 1024)[0]
        seen |= {pool[i] for i in range(len(pool))}
    assert len(seen) > 200  # the corpus lexicon of the language is in use
    leaked = (seen & foreign) - doc_words
    assert not leaked, f"{lang} document offered other languages' identifiers: {sorted(leaked)[:20]}"
    predictor.forget_document(doc)


def test_language_from_id_then_extension():
    assert languages.for_document("typescriptreact").name == "typescript"
    assert languages.for_document("plaintext", "file:///a/b/main.go").name == "go"
    assert languages.for_document(None, "file:///a/types.d.ts") is languages.UNKNOWN
    assert languages.for_document("cobol", "file:///a/x.cbl") is languages.UNKNOWN
    # Emacs' eglot names its major mode: js-mode sends "js", c++-mode "c++" (C++ gets C's filter)
    assert languages.for_document("js").name == "javascript"
    assert languages.for_document("c++", "file:///a/x.cpp").name == "c"
    # eglot 1.9 sends one languageId for all of a server's buffers: a code file's extension wins
    assert languages.for_document("python", "file:///a/app.js").name == "javascript"
    assert languages.for_document("python", "untitled:Untitled-1").name == "python"
    assert languages.for_document("markdown", "file:///a/README.md") is languages.PROSE
    assert languages.for_document("python", "file:///a/notes.txt").name == "python"


def test_unknown_language_gets_document_words_only(predictor):
    text = "frobnicate_widget = 1\nfrob"
    doc = "file:///notes.txt"
    predictor.reset()
    predictor.observe_document(doc, text, "unknown")
    got = [c.text for c in predictor.predict(text, doc_id=doc, max_items=20, language="unknown")]
    assert got == ["frobnicate_widget"]
    predictor.forget_document(doc)


def test_server_picks_the_filter_by_language_id():
    """Through the server: ``fmt.Pr`` in a Go document offers Go's names, none of Python's."""
    from laya_tools.replay import ReplayClient

    python_only = {"PrimaryKeyConstraint", "print", "property"}
    c = ReplayClient()
    try:
        text = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Pr'
        c.open("file:///project/main.go", "", "go")
        c.type_to(text)
        labels = [i.label for i in c.complete()[0]]
        assert labels and labels[0] in {"Println", "Printf", "Print"}
        assert not python_only & set(labels)
        c.close()
        c.open("file:///project/app.py", "", "python")
        c.type_to("import sqlalchemy\n\nx = sqlalchemy.Prima")  # the Python filter has the name
        assert "PrimaryKeyConstraint" in [i.label for i in c.complete()[0]]
    finally:
        c.shutdown()


def test_cpp_files_use_the_c_filter_but_stay_out_of_the_c_corpus():
    """A C++ project's own files (``.cpp``, ``.hpp``, ``.cc``) are indexed with the C filter that
    ``cpp`` documents use; the training corpus and the evaluation stay on C proper."""
    from engine.languages import C, for_path

    for name in ("a.cpp", "b.hpp", "c.cc", "d.cxx", "e.hh", "f.c", "g.h"):
        assert for_path(name) is C, name
    assert C.corpus_endings == (".c", ".h")
