"""The array-based candidate filter (``engine.lexicon``, ``engine.pool``) against the dict-based one it replaced
(``tests/reference_lexicon.py``): the same pools, priors and first tokens on real text, for the
shipped lexicons and for a workspace merge; and the string arrays' lookups against Python's."""

from __future__ import annotations

import bisect
import inspect
import re
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from engine import lexicon as new
from engine import string_array
from engine.pieces import PIECE_RE, PIECES_CHUNK, DocLexicon, context_keys, pieces
from engine.pool import WEIGHTS, PoolBuilder
from tests import reference_lexicon as old

MODEL = Path(__file__).resolve().parent.parent / "engine" / "models" / "laya-code"
TEXT = Path(inspect.getsourcefile(textwrap)).read_text("utf-8")
IDENT = re.compile(r"[^\W\d]\w*")


def _first_token(word: str) -> int:
    return sum(map(ord, word)) % 4096


@pytest.fixture(scope="module")
def lexicons(tmp_path_factory):
    """Per language: (the dict implementation, arrays as the file holds them, the file loaded into
    memory in narrow types, the file memory-mapped from a fresh cache)."""
    out = {}
    mp = pytest.MonkeyPatch()
    mp.setenv("LAYA_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    for lang in ("python", "javascript"):
        path = MODEL / f"lexicon-{lang}.npz"
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        new.CorpusLexicon.load(path)  # writes the cached copy
        mapped = new.CorpusLexicon.load(path)
        assert not isinstance(mapped.words.data, bytes)  # a memory map
        out[lang] = (old.CorpusLexicon(arrays), new.CorpusLexicon(arrays),
                     new.CorpusLexicon.load(path, mapped=False), mapped)
    mp.undo()
    return out


def test_string_array_lookups_match_python():
    words = sorted({"a", "ab", "abc", "b", "é", "éa", "z_1", "日本", "x" * 300, "😀x", "Zeta", "_x"})
    sa = string_array.StringArray.from_strings(words)
    assert len(sa) == len(words) and list(sa) == words and [sa[i] for i in range(len(sa))] == words
    for p in ["", "a", "ab", "abcd", "é", "日", "😀", "x", "Z", "_", "q", "\U0010ffff"]:
        lo = bisect.bisect_left(words, p)
        assert sa.prefix_range(p) == (lo, bisect.bisect_left(words, p + "\U0010ffff", lo)), p
    queries = words + ["", "abcd", "a\x01b", "nope", "日"]
    assert sa.find_many(queries).tolist() == [words.index(q) if q in words else -1 for q in queries]
    assert [sa.find(q) for q in queries] == [words.index(q) if q in words else -1 for q in queries]
    # the NumPy hash and the one-string Python hash agree
    h = string_array._hash_all(sa.data, sa.starts)
    assert h.tolist() == [string_array._hash_one(w.encode("utf-8")) for w in words]
    empty = string_array.StringArray(b"")
    assert len(empty) == 0 and empty.find("a") == -1 and empty.prefix_range("a") == (0, 0)
    assert empty.find_many(["a"]).tolist() == [-1]


def test_hash_collisions_resolve_by_bytes(monkeypatch):
    sa = string_array.StringArray.from_strings(["aa", "bb", "cc"])
    monkeypatch.setattr(string_array, "_hash_one", lambda b: 7)
    monkeypatch.setattr(string_array, "_hash_all", lambda data, starts: np.full(len(starts) - 1, 7, np.uint64))
    assert [sa.find(w) for w in ("aa", "bb", "cc", "dd")] == [0, 1, 2, -1]
    assert sa.find_many(["cc", "dd", "aa"]).tolist() == [2, -1, 0]


def test_pieces_cut_at_line_ends_are_the_same():
    text = TEXT * 5 + "tail_without_newline"
    whole = [p for p in PIECE_RE.findall(text) if not (p[0] in " \t" or (p.isspace() and p != "\n"))]
    assert len(text) > 10 * PIECES_CHUNK / 2 and pieces(text) == whole == old.pieces(text)
    assert pieces("x" * 20000) == ["x" * 20000]  # no line end to cut at


def _contexts(text: str, every: int = 7):
    """(text before a word start, the word) at every ``every``-th identifier of ``text``."""
    for k, m in enumerate(IDENT.finditer(text)):
        if k % every == 0 and len(m.group()) >= 2:
            yield text[: m.start()], m.group()


def _same_pools(pair_old, pair_new, text: str, with_doc: bool = True) -> int:
    """Build pools with both implementations at word starts of ``text``; assert they are equal.

    The document is refreshed to the text so far every 40 word starts, as the server does about
    once a second (what the new implementation remembers per document must follow it)."""
    lex_old, lex_new = pair_old, pair_new
    pb_old = old.PoolBuilder(lex_old, _first_token)
    pb_new = PoolBuilder(lex_new, _first_token)
    doc_text = text[: len(text) // 2]
    d_old, d_new = (old.DocLexicon(doc_text), DocLexicon(doc_text)) if with_doc else (None, None)
    checked = 0
    window_key = None
    for k, (before, word) in enumerate(_contexts(text)):
        if with_doc and k % 40 == 39:
            d_old, d_new = old.DocLexicon(before), DocLexicon(before)
        lines = before.split("\n")
        key = len(lines)
        if key != window_key:  # a new Counter once per line, as ContextWindow does
            window = Counter(w for ln in lines[-30:-1] for w in IDENT.findall(ln) if len(w) >= 2)
            window_key = key
        line = [w for w in IDENT.findall(lines[-1]) if len(w) >= 2]
        keys = old.context_keys(old.pieces(before[-200:]))
        pb_old.begin(keys, d_old, window, line)
        pb_new.begin(keys, d_new, window, line)
        for n in (0, 1, 2, 3):
            prefix = word[:n]
            wo, po, fo = pb_old.candidates(prefix, 256)
            wn, pn, fn = pb_new.candidates(prefix, 256)
            assert [wo[i] for i in range(len(wo))] == [wn[i] for i in range(len(wn))], (before[-60:], prefix)
            # the same sums, added in another order (window scores are pre-split once per line)
            assert np.allclose(po, pn, rtol=1e-12, atol=0) and np.array_equal(fo, fn), (before[-60:], prefix)
            checked += 1
    return checked


@pytest.mark.parametrize("lang", ["python", "javascript"])
@pytest.mark.parametrize("form", [1, 2, 3], ids=["arrays", "narrow", "mapped"])
def test_pools_equal_the_dict_implementation(lexicons, lang, form):
    lex_old, lex_new = lexicons[lang][0], lexicons[lang][form]
    assert list(lex_new.words) == lex_old.words
    assert _same_pools(lex_old, lex_new, TEXT if form == 3 else TEXT[:40000]) > 100


def test_pools_equal_without_a_document(lexicons):
    assert _same_pools(lexicons["python"][0], lexicons["python"][3], TEXT[:30000], with_doc=False) > 100


def test_workspace_merge_equals_the_dict_implementation(lexicons):
    from engine.tokenizer import load_tokenizer

    tok = load_tokenizer(MODEL / "tokenizer.json")
    import difflib
    import json

    texts = [Path(inspect.getsourcefile(m)).read_text("utf-8") for m in (difflib, json.decoder)]
    texts.append("def zz_only_here(qq_new_name):\n    return qq_new_name.zz_attr\n")
    arrays = new.CorpusLexicon.build(texts, tok, min_context_count=1)
    lex_old, lex_new = lexicons["python"][0], lexicons["python"][3]
    m_old = old.merge_lexicons(lex_old, old.CorpusLexicon(arrays), 0.5)
    m_new = new.merge_lexicons(lex_new, new.CorpusLexicon(arrays), 0.5)
    assert list(m_new.words) == m_old.words
    assert np.array_equal(m_new.counts, m_old.counts)
    assert np.array_equal(m_new.first_tokens, m_old.first_tokens)
    for name in ("bi", "tri"):
        to, tn = getattr(m_old, name), getattr(m_new, name)
        assert list(tn.keys) == list(to.index)
        assert np.array_equal(tn.offsets, to.offsets) and np.array_equal(tn.ix, to.ix)
        assert np.array_equal(tn.cnt, to.cnt)
    assert _same_pools(m_old, m_new, TEXT[:40000]) > 100
    # merging into nothing, or nothing in
    assert new.merge_lexicons(None, m_new) is m_new
    assert new.merge_lexicons(m_new, new.CorpusLexicon(new.CorpusLexicon.build([], tok))) is m_new


def test_lexicon_holds_no_python_strings_per_word(lexicons):
    lex = lexicons["python"][2]
    assert isinstance(lex.words.data, bytes)
    assert lex.first_tokens.dtype == np.int32 and lex.tri.ix.dtype == np.int32  # as the file holds them
    assert lex.counts.dtype == np.int32 and lex.tri.cnt.dtype == np.uint16  # narrowed, values kept
    lex.words.find("self")  # builds the hash index
    assert lex.nbytes < 20e6, lex.nbytes


def test_cache_fallbacks(tmp_path, monkeypatch, caplog):
    from engine import lexicon_cache

    path = MODEL / "lexicon-javascript.npz"
    monkeypatch.setenv("LAYA_CACHE_DIR", "")  # caching off: read into memory
    assert isinstance(new.CorpusLexicon.load(path).words.data, bytes)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LAYA_CACHE_DIR", str(blocker))  # cannot be written: read into memory
    assert isinstance(new.CorpusLexicon.load(path).words.data, bytes)
    assert "reading it into memory" in caplog.text
    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path / "c"))
    mapped = new.CorpusLexicon.load(path)
    folder = lexicon_cache.cache_folder(path)
    assert (folder / "done").exists() and not isinstance(mapped.words.data, bytes)
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left
    import os

    for age, key in ((200, "0123456789abcdef"), (100, "fedcba9876543210")):  # older versions' copies
        stale = folder.parent / f"lexicon-javascript-{key}"
        stale.mkdir()
        (stale / "done").write_text(f"{path}\n")
        os.utime(stale / "done", (os.path.getmtime(folder / "done") - age,) * 2)
    (folder / "done").unlink()
    new.CorpusLexicon.load(path)  # rewritten: only the most recent copies stay
    kept = sorted(p.name for p in folder.parent.iterdir())
    assert len(kept) == lexicon_cache.KEEP_COPIES and folder.name in kept
    assert "lexicon-javascript-0123456789abcdef" not in kept  # the oldest went
    (folder / "tri_ix.npy").write_bytes(b"damaged")  # a damaged copy: read into memory
    again = new.CorpusLexicon.load(path)
    assert isinstance(again.words.data, bytes) and len(again.words) == len(mapped.words)
    with pytest.raises(ValueError, match="corrupt"):
        bad = tmp_path / "lexicon-python.npz"
        bad.write_bytes(b"PK\x03\x04 not a zip")
        new.CorpusLexicon.load(bad)


def test_checkouts_of_the_same_model_share_one_cached_copy(tmp_path, monkeypatch):
    import shutil

    from engine import lexicon_cache

    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path / "c"))
    path = MODEL / "lexicon-rust.npz"
    other = tmp_path / "clone" / "lexicon-rust.npz"
    other.parent.mkdir()
    shutil.copy(path, other)
    assert lexicon_cache.cache_folder(other) == lexicon_cache.cache_folder(path)
    other.write_bytes(other.read_bytes() + b"\1")  # different content: a different copy
    assert lexicon_cache.cache_folder(other) != lexicon_cache.cache_folder(path)


def test_recent_lines_raise_their_identifiers(lexicons):
    """The prior's ``recent`` weight goes to the identifiers of the last complete lines: with it,
    a name used just above outranks one the window only mentions once, long ago."""
    lex = lexicons["python"][1]
    weights = dict(WEIGHTS)
    window = Counter({"zzz_far_name": 1, "zzz_near_name": 1})
    keys = context_keys(pieces("x = "))
    scored = {}
    for rec in (0.0, 0.1):
        pb = PoolBuilder(lex, _first_token, {**weights, "recent": rec})
        pb.begin(keys, None, window, [], ["zzz_near_name"] if rec else [])
        words, prior, _ = pb.candidates("zzz_", 16)
        scored[rec] = dict(zip([words[i] for i in range(len(words))], prior))
    assert scored[0.0]["zzz_near_name"] == scored[0.0]["zzz_far_name"]
    assert scored[0.1]["zzz_near_name"] > scored[0.1]["zzz_far_name"]


def test_workspace_word_after_every_corpus_word_stays_a_word():
    """A workspace identifier that sorts after the corpus's last word (``yield`` after ``return``;
    in a real lexicon, e.g. one in a script whose letters come late in Unicode) was glued onto
    that last word (``returnyield``), and the merged lexicon failed to build."""
    from engine.tokenizer import load_tokenizer

    tok = load_tokenizer(MODEL / "tokenizer.json")
    corpus = new.CorpusLexicon(new.CorpusLexicon.build(["return obj.beta\n"], tok, min_context_count=1))
    ws = new.CorpusLexicon(new.CorpusLexicon.build(["yield obj.gamma\n", "ζωή = 1\n"], tok, min_context_count=1))
    merged = new.merge_lexicons(corpus, ws, 1.0)
    assert list(merged.words) == sorted(set(corpus.words) | set(ws.words))
    assert list(merged.words)[-1] == "ζωή"
    k = merged.words.find("gamma")
    assert merged.counts[k] > 0 and merged.words.find("return") >= 0
