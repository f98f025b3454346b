"""Held-out evaluation: next-identifier accuracy and keystrokes saved, against word completion.

Protocol (the same in-process and through the server, ``--through-server``):

* Files come from whole held-out packages of each language (``corpus/manifest.json``): the
  ``eval`` split for reported numbers, the ``tune`` split for tuning ranking weights (the code
  takes one or the other, never both). Each file is typed top to bottom, so the "document" at any
  point is the text before the cursor.
* Workspace mode (``--workspace``): the rest of the typed file's package is the user's workspace
  (every other file of that package; the typed files are removed from it, as new files would be).
* Every identifier of at least 2 characters is a target: in Python, ``tokenize``'s NAME tokens;
  in the other languages, the Name and Keyword tokens of Pygments' lexer for the language
  (keywords included, since they are typed the same way). Words inside comments and strings,
  which are prose rather than identifiers, are not targets (they are still typed, and still
  context for the model). With ``c`` characters of it typed
  (``c = 0`` is the boundary before it) the completer is asked for items; a client ranks them as
  editors do: keep items whose text starts with the typed prefix and is longer, then by rank
  (``sortText``). Rest-of-line items are left out: the metric is about identifiers.
* Top-1 / top-5 accuracy at ``c = 0, 1, 2``: the target is the first / among the first five items.
* Keystrokes saved: the user types the identifier character by character; as soon as the first
  item is the target they accept it with one key. Saved = ``len - c - 1``; reported as a share of
  all identifier characters (so 100% is unreachable: one key per identifier is always spent).
* Baseline ("word completion", what every editor has): words of the document so far that start
  with the typed prefix, ranked by how often they occur (ties: most recent first).
* Rest of line (``--lines``, in process): at each identifier start where the first item is the
  identifier, the engine's rest-of-line item (the identifier and the rest of an earlier line of
  the document or workspace, else the network's greedy continuation: what inline completion
  shows) is *offered* when it goes past the identifier and
  *correct* when the file's line goes on exactly so; *characters gained* are those past the
  identifier in correct items, a share of all characters typed. (Asking for continuations moves
  the identifier numbers by about 0.1 point: the KV cache is extended and rolled back, and tokens
  prefilled again in another grouping round differently.)

The document's n-grams are refreshed every ``REFRESH_CHARS`` typed characters, standing in for the
server's refresh every 0.25 s at 200 characters a second, so numbers are deterministic.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

IDENT = re.compile(r"[^\W\d]\w*")
REFRESH_CHARS = 50
"""Typed characters between two refreshes of the document's n-grams in process: the server's
refresh every 0.25 s (``laya_lsp.server.OBSERVE_INTERVAL_S``) at 200 characters a second, the
speed this stood for when the server refreshed once a second and this was 200 (2026-12-02: the
tune packages, 6 files x 8,000 characters per language, 52.43 -> 52.67% with 50; 52.70% with 10)."""
STUB_SUFFIXES = (".pyi",)
"""Type stubs are trained on but not typed as held-out files (people rarely write them by hand)."""
TYPED = (0, 1, 2)


@dataclass
class Score:
    """Accumulated metrics of one completer."""

    chars: int = 0
    saved: int = 0
    n_at: dict = field(default_factory=lambda: {c: 0 for c in TYPED})
    top1: dict = field(default_factory=lambda: {c: 0 for c in TYPED})
    top5: dict = field(default_factory=lambda: {c: 0 for c in TYPED})
    text_chars: int = 0
    """All characters typed (the files' lengths), for the rest-of-line share."""
    line_offered: int = 0
    line_correct: int = 0
    line_chars: int = 0
    first_chars: int = 0
    """Characters of identifiers used for the first time in the file (no word before them spells
    them, comments and strings included)."""
    first_saved: int = 0

    def row(self, name: str) -> str:
        acc = "  ".join(f"{100 * self.top1[c] / max(1, self.n_at[c]):5.1f} {100 * self.top5[c] / max(1, self.n_at[c]):5.1f}"
                        for c in TYPED)
        return f"{name:16s} {100 * self.saved / max(1, self.chars):6.1f}%   {acc}"

    def split_row(self, base: "Score") -> str:
        """Keystrokes saved on first uses and on names already in the file, this completer's and
        ``base``'s (the baseline)."""
        def pct(a, b):
            return 100 * a / max(1, b)
        seen, bseen = self.chars - self.first_chars, base.chars - base.first_chars
        return (f"  first uses {pct(self.first_chars, self.chars):.0f}% of the characters: saved "
                f"{pct(self.first_saved, self.first_chars):.1f}% (word completion "
                f"{pct(base.first_saved, base.first_chars):.1f}%); names already in the file: "
                f"{pct(self.saved - self.first_saved, seen):.1f}% "
                f"({pct(base.saved - base.first_saved, bseen):.1f}%)")

    def line_row(self) -> str:
        """The rest-of-line measure (``--lines``)."""
        right = 100 * self.line_correct / max(1, self.line_offered)
        share = 100 * self.line_chars / max(1, self.text_chars)
        return (f"  rest of line: {self.line_offered} offered, {right:.1f}% correct, {self.line_chars} "
                f"characters gained ({share:.2f}% of {self.text_chars} typed)")


HEADER = ("completer        saved      top1@0 top5@0  top1@1 top5@1  top1@2 top5@2\n"
          "                 (share of identifier characters; accuracies in %)")


def targets(text: str, language: str = "python"):
    """``(start offset, identifier)`` for every identifier token of 2+ characters.

    Python: ``tokenize`` NAME tokens. A text cut inside a string or bracket (held-out files are cut
    at ``--max-chars``) keeps the NAME tokens read before the point where Python's tokenizer gives
    up; the unterminated rest is not code. Other languages: Pygments' Name and Keyword tokens; prose: every word.
    """
    if language == "prose":  # every word is typed the same way
        return [(m.start(), m.group()) for m in IDENT.finditer(text) if len(m.group()) >= 2]
    if language != "python":
        return _pygments_targets(text, language)
    import io
    import tokenize

    line_starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            line_starts.append(i + 1)
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and len(tok.string) >= 2:
                row, col = tok.start
                out.append((line_starts[row - 1] + col, tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


CLOSE_COMMENT = "\n*/"
"""Lexed after a text: a file cut inside a block comment (``--max-chars``) ends it, so the words of
that comment's last lines are comment, not identifiers (Pygments lexes an unterminated ``/*`` as
code: held-out TypeScript counted JSDoc words as identifiers to type)."""


def _lexed(text: str, language: str):
    """Pygments' ``(start, token type, value)`` for ``text`` (C-family block comment closed at its end)."""
    from pygments.lexers import get_lexer_by_name

    lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    for start, ttype, value in lexer.get_tokens_unprocessed(text + CLOSE_COMMENT):
        if start >= len(text):
            break
        yield start, ttype, value[: len(text) - start]


def _pygments_targets(text: str, language: str):
    from pygments.token import Keyword, Name

    out = []
    for start, ttype, value in _lexed(text, language):
        value = value.removesuffix("!")  # a Rust macro call: the name is typed, then the "!"
        if (ttype in Name or ttype in Keyword) and len(value) >= 2 and IDENT.fullmatch(value):
            out.append((start, value))
    return out


class WordCompletion:
    """The baseline: words of the document so far, by frequency, ties broken by recency."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.last: dict[str, int] = {}
        self.pos = 0
        self.text = ""

    def advance(self, text: str, upto: int) -> None:
        for m in IDENT.finditer(text, self.pos, upto):
            if m.end() <= upto:
                w = m.group()
                self.counts[w] += 1
                self.last[w] = m.start()
                self.pos = m.end()

    def items(self, typed: str, n: int = 5) -> list[str]:
        cands = [w for w in self.counts if w.startswith(typed) and len(w) > len(typed)]
        cands.sort(key=lambda w: (-self.counts[w], -self.last[w]))
        return cands[:n]


def score_file(text: str, ask, score: Score, baseline: WordCompletion | None = None,
               bscore: Score | None = None, on_refresh=None, language: str = "python",
               ask_line=None, target_fn=None) -> None:
    """Replay one file. ``ask(prefix) -> list[str]`` returns ranked identifier items;
    ``ask_line(prefix) -> str | None``, if given, the rest-of-line item at an identifier start;
    ``target_fn(text, language)`` the words to type (:func:`targets` by default)."""
    last_refresh = 0
    score.text_chars += len(text)
    words_before: set[str] = set()  # every word before the target (first uses are the others)
    scanned = 0
    for start, word in (target_fn or targets)(text, language):
        if on_refresh and start - last_refresh >= REFRESH_CHARS:
            on_refresh(text[:start])
            last_refresh = start
        if baseline is not None:
            baseline.advance(text, start)
        for m in IDENT.finditer(text, scanned, start):  # a target starts a word: none is cut here
            words_before.add(m.group())
            scanned = m.end()
        first = word not in words_before
        for completer, sc in ((ask, score), (baseline, bscore)):
            if completer is None:
                continue
            sc.chars += len(word)
            sc.first_chars += len(word) if first else 0
            saved_before = sc.saved
            accepted = False
            for c in range(len(word)):
                typed = word[:c]
                if completer is ask:
                    items = [w for w in ask(text[: start + c]) if w.startswith(typed) and len(w) > c][:5]
                else:
                    if c > max(TYPED) and accepted:
                        break
                    items = completer.items(typed)
                if c == 0 and completer is ask and ask_line is not None and items and items[0] == word:
                    _score_line(text, start, word, ask_line(text[:start]), sc)
                if c in TYPED:
                    sc.n_at[c] += 1
                    sc.top1[c] += bool(items) and items[0] == word
                    sc.top5[c] += word in items
                if not accepted and items and items[0] == word:
                    sc.saved += len(word) - c - 1
                    accepted = True
                if accepted and c >= max(TYPED):
                    break
            if first:
                sc.first_saved += sc.saved - saved_before


def _score_line(text: str, start: int, word: str, line: str | None, sc: Score) -> None:
    if line is None or len(line) <= len(word):
        return
    sc.line_offered += 1
    eol = text.find("\n", start)
    if text[start : eol if eol >= 0 else len(text)].startswith(line):
        sc.line_correct += 1
        sc.line_chars += len(line) - len(word)


@dataclass
class EvalFile:
    """One file to type: its language, name (``package/path``), text, and its package's folder."""

    language: str
    name: str
    text: str
    package_dir: Path


def pick_files(corpus_dir: Path, n: int, max_chars: int, seed: int = 0, split: str = "eval",
               languages=None) -> list[EvalFile]:
    """``n`` files per language of one held-out split, cut to ``max_chars`` at a line end, one
    package after another.

    Skips files named as tests (``test`` in the file name; files in a ``tests/`` folder are kept:
    C's tune package cJSON gives mostly those), type stubs, files under 2 KB and the copies wheels
    keep under ``*.data/``. A file whose first ``max_chars`` hold no identifier (a long licence
    comment) counts for nothing.

    Args:
        split: ``"eval"`` (the reported numbers) or ``"tune"`` (what ranking weights are tuned on).
        languages: names to include (all present when None).

    Raises:
        ValueError: ``split`` is not a held-out split.
    """
    from .corpus import iter_files

    if split not in ("eval", "tune"):
        raise ValueError(f"split {split!r}: files are picked from the held-out splits eval or tune only")
    by_lang: dict[str, dict[str, list[Path]]] = {}
    for lang, pkg, f in iter_files(corpus_dir, split, languages):
        rel = f"{pkg}/{f.relative_to(corpus_dir / split / lang / pkg)}"
        if (f.stat().st_size > 2000 and "test" not in f.name and ".data/" not in rel
                and not f.name.endswith(STUB_SUFFIXES)):
            by_lang.setdefault(lang, {}).setdefault(pkg, []).append(f)
    out = []
    for lang, by_pkg in sorted(by_lang.items()):
        rnd = random.Random(seed)
        for v in by_pkg.values():
            rnd.shuffle(v)
        pkgs = sorted(by_pkg)
        i = taken = 0
        while taken < n and any(by_pkg.values()):
            pkg = pkgs[i % len(pkgs)]
            i += 1
            if by_pkg[pkg]:
                f = by_pkg[pkg].pop()
                text = f.read_text("utf-8").replace("\r\n", "\n")
                if len(text) > max_chars:
                    text = text[: text.rfind("\n", 0, max_chars) + 1]
                pkg_dir = corpus_dir / split / lang / pkg
                out.append(EvalFile(lang, f"{pkg}/{f.relative_to(pkg_dir)}", text, pkg_dir))
                taken += 1
    return out


def workspace_files(f: EvalFile, typed: set[str]) -> list[tuple[str, str]]:
    """``(relative path, text)`` of the workspace for ``f``: its package's other source files of
    its language, less every file being typed (``typed``: ``package/path`` names)."""
    from .corpus import read_text
    from engine.languages import BY_NAME

    lang = BY_NAME[f.language]
    out = []
    pkg = f.package_dir.name
    for p in sorted(f.package_dir.rglob("*")):
        rel = p.relative_to(f.package_dir).as_posix()
        if p.is_file() and f"{pkg}/{rel}" not in typed and p.name.lower().endswith(lang.corpus_endings):
            out.append((rel, read_text(p)))
    return out


class LaggedSystem2:
    """System 2 as an editor meets it: what it computes after one keystroke serves the next ones.

    After each answer, unless System 2's line in hand still has the identifier at the cursor
    (``engine.system2.Continuation.word_at``: the user typed along it), System 2 continues the
    text from there to the end of the line, standing in for it running while the user moves to
    the next key (~100 ms a line here, ~20-60 ms to the first identifier; typing runs at 100-300
    ms a key). Given the fast engine's scores and ``keep_steps``, it re-ranks the list's first
    items and its own guess as the server does (``engine.system2.rerank_at``); otherwise (and
    where it has no scores for the place) its identifier at the cursor joins the list at
    ``rank``. As in the server
    (``laya_lsp.system2.after_change``), a key before a word start that leaves the cursor at a
    word boundary (the space of ``, ``) starts a line there when the user has left the one in
    hand, ready at the word start; a word start right after the key that left the line gets no
    guess until the next keystroke. ``lag=0`` is a user who waits for System 2 at every key (the
    upper bound). ``path`` names the file in System 2's prompt, as the server does
    (``laya_lsp.system2.prompt_path``). Where it does not re-rank, a guess whose rest System 2 gave less than
    ``min_logprob`` nats leaves the list as it is (as ``engine.system2.confident_word_at``; None: the
    server's ``MIN_WORD_LOGPROB``; ``-inf``: always first).
    """

    def __init__(self, system2, rank: int = 0, lag: int = 1, max_tokens: int = 12, path: str | None = None,
                 min_logprob: float | None = None, keep_steps: int = 0):
        from engine.system2 import MIN_WORD_LOGPROB

        self.system2, self.rank, self.lag, self.max_tokens = system2, rank, lag, max_tokens
        self.path, self.keep_steps = path, keep_steps
        self.min_logprob = MIN_WORD_LOGPROB if min_logprob is None else min_logprob
        self.cont = None  # engine.system2.Continuation
        self.runs = 0
        self.last: tuple[str, float] | None = None
        """The last call's guess and the log-probability of its rest, whatever the floor (None: none)."""
        self.used = None
        """The continuation the last call's answer came from (before the one it started, if any)."""

    def _guess(self, prefix: str) -> str | None:
        return self.cont.word_at(prefix) if self.cont is not None else None

    def _run(self, prefix: str) -> None:
        """System 2's line after ``prefix`` becomes the one in hand."""
        self.cont = self.system2.continuation(prefix, max_tokens=self.max_tokens, path=self.path,
                                              keep_steps=self.keep_steps)
        self.runs += 1

    def __call__(self, items: list[str], prefix: str, scores: list[float] | None = None) -> list[str]:
        """The list at ``prefix``: with the fast engine's ``scores`` (one per item) and a
        continuation that kept its distributions (``keep_steps``), System 2 re-ranks the items as
        the server does (``engine.system2.rerank_at``); else its guess joins at ``rank``."""
        from engine.system2 import merge, rerank_at
        from engine.text import word_prefix

        guess = self._guess(prefix)
        before = prefix[:-1]
        if (guess is None and self.lag and not word_prefix(prefix) and before
                and not (before[-1] == "_" or before[-1].isalnum())
                and (self.cont is None or self.cont.offset(before) is None)):
            self._run(before)  # the key before this word start left the line at a boundary
            guess = self._guess(prefix)
        if guess is None and self.lag == 0:  # the user waited for it
            self._run(prefix)
            guess = self._guess(prefix)
        self.used = self.cont
        self.last = self.cont.scored_word_at(prefix) if guess is not None else None
        order = rerank_at(self.system2, self.cont, prefix, items, scores) if scores is not None else None
        if order is None and self.last is not None:  # on the line: its word first when System 2 is sure
            order = merge(items, guess if self.last[1] >= self.min_logprob else None, word_prefix(prefix), self.rank)
        if guess is None:
            self._run(prefix)
        return order if order is not None else items


def use_package_workspace(predictor, f: EvalFile, typed: set[str]) -> None:
    """Make the rest of ``f``'s package (:func:`workspace_files`) the predictor's workspace."""
    ws = workspace_files(f, typed)
    # paths as the document's URI has them (package/path), so imports resolve alike
    paths = [f"{f.package_dir.name}/{rel}" for rel, _ in ws]
    predictor.set_workspace(predictor.build_workspace({f.language: [t for _, t in ws]},
                                                      paths={f.language: paths}))


def evaluate_in_process(files: list[EvalFile], predictor, workspace: bool = False, system2=None,
                        system2_rank: int = 0, system2_lag: int = 1, lines: bool = False,
                        system2_min_logprob: float | None = None):
    """Score the engine and the baseline per language; returns ``({lang: (engine, baseline)}, seconds)``.

    With ``system2`` (an ``engine.system2.System2``), it re-ranks the engine's items as
    :class:`LaggedSystem2` describes (its guess joining them at ``system2_rank`` where it has
    no scores). With ``lines``, the engine's
    rest-of-line items are scored too (``Score.line_row``; a continuation per identifier start).
    """
    from engine.system2 import KEEP_STEPS

    scores: dict[str, tuple[Score, Score]] = {}
    typed = {f.name for f in files}
    t0 = time.perf_counter()
    for f in files:
        eng, base = scores.setdefault(f.language, (Score(), Score()))
        doc = f"file:///{f.name}"
        if workspace:
            use_package_workspace(predictor, f, typed)
        predictor.reset()
        predictor.observe_document(doc, "", f.language)

        # the path the server's prompt would give: in the workspace folder, or the file's name
        rel = f.name.split("/", 1)[-1]
        lagged = (LaggedSystem2(system2, system2_rank, system2_lag, path=rel if workspace else rel.rsplit("/", 1)[-1],
                                min_logprob=system2_min_logprob, keep_steps=KEEP_STEPS)
                  if system2 is not None else None)

        def ask(prefix, doc=doc, lagged=lagged):
            cands = [c for c in predictor.predict(prefix, doc_id=doc, max_items=20) if c.kind != "line"]
            items = [c.text for c in cands]
            return lagged(items, prefix, [c.score for c in cands]) if lagged is not None else items

        def ask_line(prefix, doc=doc):
            items = predictor.predict(prefix, "\n", doc_id=doc, max_items=2, want_line=True)
            return next((c.text for c in items if c.kind == "line"), None)

        score_file(f.text, ask, eng, WordCompletion(), base, language=f.language,
                   on_refresh=lambda t, doc=doc, lang=f.language: predictor.observe_document(doc, t, lang),
                   ask_line=ask_line if lines else None)
        predictor.forget_document(doc)
        log.info("%s done (%.0f s)", f.name, time.perf_counter() - t0)
    if workspace:
        predictor.set_workspace({})
    return scores, time.perf_counter() - t0


def pool_recall(files: list[EvalFile], predictor, size: int | None = None) -> dict[str, float]:
    """Per language, the share of identifier occurrences (at the boundary, 0 typed) that are in the
    candidate pool."""
    hits: dict[str, list[int]] = {}
    size = size or predictor.config.pool_size
    for f in files:
        doc = f"file:///{f.name}"
        last = 0
        hit_total = hits.setdefault(f.language, [0, 0])
        predictor.reset()
        predictor.observe_document(doc, "", f.language)
        predictor.predict("", doc_id=doc, max_items=1)  # selects the document's language pool
        for start, word in targets(f.text, f.language):
            if start - last >= REFRESH_CHARS:
                predictor.observe_document(doc, f.text[:start], f.language)
                last = start
            predictor.window.tokens(f.text[:start])
            predictor._begin_pool(f.text[:start], predictor._docs.get(doc))
            words, _, _ = predictor.pool.candidates("", size)
            hit_total[1] += 1
            hit_total[0] += word in {words[i] for i in range(len(words))}
        predictor.forget_document(doc)
    predictor.reset()
    return {k: h / max(1, t) for k, (h, t) in hits.items()}


_COMMENT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
_COMMENT_MARK = re.compile(r"^\s*(?:#+|//+!?|/\*+!?|\*+(?!/))\s?")


def comment_targets(text: str, language: str):
    """``(start offset, word)`` for every word of 2+ characters inside a comment (Pygments'
    Comment tokens, less preprocessor lines, their file names and shebangs): what a user types
    in comments."""
    from pygments.token import Comment

    out = []
    for start, ttype, value in _lexed(text, language):
        if ttype in Comment and not any(ttype in t for t in (Comment.Preproc, Comment.PreprocFile, Comment.Hashbang)):
            out.extend((start + m.start(), m.group()) for m in _COMMENT_WORD.finditer(value)
                       if len(m.group()) >= 2)
    return out


def comment_context(prefix: str) -> str:
    """The comment being typed at the end of ``prefix``, as prose: the comment lines of its block
    above and its own line from the comment marker on, markers stripped (a prose model's context)."""
    start = prefix.rfind("\n") + 1
    lines = [prefix[start:]]
    while start > 0:
        above = prefix.rfind("\n", 0, start - 1) + 1
        line = prefix[above : start - 1]
        if not _COMMENT_MARK.match(line) or line.rstrip().endswith("*/"):
            break
        lines.insert(0, line)
        start = above
    cut = max(lines[-1].find(m) for m in ("#", "//", "/*"))
    if cut > 0 and not _COMMENT_MARK.match(lines[-1]):
        lines[-1] = lines[-1][cut:]  # a comment after code on the cursor's line
    return "\n".join(_COMMENT_MARK.sub("", ln, count=1) for ln in lines)


def evaluate_comments(files: list[EvalFile], code, prose) -> dict[str, tuple[Score, Score, Score]]:
    """Words typed inside comments: the code model as it serves them (the whole prefix as its
    context), the prose model (``comment_context`` as its context, the file's words as its
    document), and word completion; ``{language: (code, prose, word completion)}``."""
    out: dict[str, tuple[Score, Score, Score]] = {}
    for f in files:
        sc_code, sc_prose, sc_words = out.setdefault(f.language, (Score(), Score(), Score()))
        doc = f"file:///{f.name}"
        for p, lang in ((code, f.language), (prose, "prose")):
            p.reset()
            p.observe_document(doc, "", lang)

        def ask_code(prefix, doc=doc):
            return [c.text for c in code.predict(prefix, doc_id=doc, max_items=20) if c.kind != "line"]

        def ask_prose(prefix, doc=doc):
            return [c.text for c in prose.predict(comment_context(prefix), doc_id=doc, max_items=20,
                                                 language="prose") if c.kind != "line"]

        score_file(f.text, ask_code, sc_code, WordCompletion(), sc_words, language=f.language,
                   on_refresh=lambda t, doc=doc, lang=f.language: code.observe_document(doc, t, lang),
                   target_fn=comment_targets)
        score_file(f.text, ask_prose, sc_prose, language=f.language,
                   on_refresh=lambda t, doc=doc: prose.observe_document(doc, t, "prose"),
                   target_fn=comment_targets)
        for p in (code, prose):
            p.forget_document(doc)
    return out


def report(scores: dict[str, tuple[Score, Score]], recall: dict[str, float] | None = None) -> str:
    """The per-language table: engine and word completion rows, pool recall."""
    lines = [HEADER]
    for lang, (eng, base) in sorted(scores.items()):
        r = f"   pool recall {100 * recall[lang]:.1f}%" if recall and lang in recall else ""
        lines.append(f"[{lang}] {eng.chars} identifier characters{r}")
        lines.append(eng.row("  laya"))
        lines.append(base.row("  word completion"))
        lines.append(eng.split_row(base))
        if eng.line_offered:
            lines.append(eng.line_row())
    return "\n".join(lines)
