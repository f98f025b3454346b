"""Held-out evaluation: next-identifier accuracy and keystrokes saved, against word completion.

Protocol (the same in-process and through the server, ``--through-server``):

* Files come from the eval split (packages never seen in training, ``corpus/manifest.json``); each
  is typed top to bottom, so the "document" at any point is the text before the cursor.
* Every identifier of at least 2 characters is a target: Python's own ``tokenize`` NAME tokens
  (keywords included, since they are typed the same way), so words inside comments and strings,
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

The document's n-gram is refreshed every ``REFRESH_CHARS`` typed characters, standing in for the
server's once-a-second refresh at a fast typist's speed, so numbers are deterministic.
"""

from __future__ import annotations

import logging
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

IDENT = re.compile(r"[^\W\d]\w*")
REFRESH_CHARS = 200
TYPED = (0, 1, 2)


@dataclass
class Score:
    """Accumulated metrics of one completer."""

    chars: int = 0
    saved: int = 0
    n_at: dict = field(default_factory=lambda: {c: 0 for c in TYPED})
    top1: dict = field(default_factory=lambda: {c: 0 for c in TYPED})
    top5: dict = field(default_factory=lambda: {c: 0 for c in TYPED})

    def row(self, name: str) -> str:
        acc = "  ".join(f"{100 * self.top1[c] / max(1, self.n_at[c]):5.1f} {100 * self.top5[c] / max(1, self.n_at[c]):5.1f}"
                        for c in TYPED)
        return f"{name:16s} {100 * self.saved / max(1, self.chars):6.1f}%   {acc}"


HEADER = ("completer        saved      top1@0 top5@0  top1@1 top5@1  top1@2 top5@2\n"
          "                 (share of identifier characters; accuracies in %)")


def targets(text: str):
    """``(start offset, identifier)`` for every NAME token of 2+ characters.

    A text cut inside a string or bracket (held-out files are cut at ``--max-chars``) keeps the
    NAME tokens read before the point where Python's tokenizer gives up; the unterminated rest is
    not code.
    """
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
               bscore: Score | None = None, on_refresh=None) -> None:
    """Replay one file. ``ask(prefix) -> list[str]`` returns ranked identifier items."""
    last_refresh = 0
    for start, word in targets(text):
        if on_refresh and start - last_refresh >= REFRESH_CHARS:
            on_refresh(text[:start])
            last_refresh = start
        if baseline is not None:
            baseline.advance(text, start)
        for completer, sc in ((ask, score), (baseline, bscore)):
            if completer is None:
                continue
            sc.chars += len(word)
            accepted = False
            for c in range(len(word)):
                typed = word[:c]
                if completer is ask:
                    items = [w for w in ask(text[: start + c]) if w.startswith(typed) and len(w) > c][:5]
                else:
                    if c > max(TYPED) and accepted:
                        break
                    items = completer.items(typed)
                if c in TYPED:
                    sc.n_at[c] += 1
                    sc.top1[c] += bool(items) and items[0] == word
                    sc.top5[c] += word in items
                if not accepted and items and items[0] == word:
                    sc.saved += len(word) - c - 1
                    accepted = True
                if accepted and c >= max(TYPED):
                    break


def pick_files(corpus_dir: Path, n: int, max_chars: int, seed: int = 0,
               exclude: set[str] = frozenset()) -> list[tuple[str, str]]:
    """``n`` held-out files (name, text cut to ``max_chars`` at a line end), one package after another.

    Skips tests, files under 2 KB, the copies wheels keep under ``*.data/`` and ``exclude`` names
    (so a tuning set can be kept apart from the reported one).
    """
    from .corpus import iter_files

    by_pkg: dict[str, list[Path]] = {}
    for pkg, f in iter_files(corpus_dir, "eval"):
        rel = f"{pkg}/{f.relative_to(corpus_dir / 'eval' / pkg)}"
        if f.stat().st_size > 2000 and "test" not in f.name and ".data/" not in rel and rel not in exclude:
            by_pkg.setdefault(pkg, []).append(f)
    rnd = random.Random(seed)
    for v in by_pkg.values():
        rnd.shuffle(v)
    out = []
    pkgs = sorted(by_pkg)
    i = 0
    while len(out) < n and any(by_pkg.values()):
        pkg = pkgs[i % len(pkgs)]
        i += 1
        if by_pkg[pkg]:
            f = by_pkg[pkg].pop()
            text = f.read_text("utf-8").replace("\r\n", "\n")
            if len(text) > max_chars:
                text = text[: text.rfind("\n", 0, max_chars) + 1]
            out.append((f"{pkg}/{f.relative_to(corpus_dir / 'eval' / pkg)}", text))
    return out


def evaluate_in_process(files, predictor) -> tuple[Score, Score, float]:
    """Score the engine and the baseline on ``files``; returns ``(engine, baseline, seconds)``."""
    eng, base = Score(), Score()
    t0 = time.perf_counter()
    for name, text in files:
        doc = f"file:///{name}"
        predictor.reset()
        predictor.observe_document(doc, "")

        def ask(prefix, doc=doc):
            return [c.text for c in predictor.predict(prefix, doc_id=doc, max_items=20) if c.kind != "line"]

        score_file(text, ask, eng, WordCompletion(), base,
                   on_refresh=lambda t, doc=doc: predictor.observe_document(doc, t))
        log.info("%s done (%.0f s)", name, time.perf_counter() - t0)
    return eng, base, time.perf_counter() - t0


def pool_recall(files, predictor, size: int | None = None) -> float:
    """Share of identifier occurrences (at the boundary, 0 typed) that are in the candidate pool."""
    hit = total = 0
    size = size or predictor.config.pool_size
    for name, text in files:
        doc = f"file:///{name}"
        last = 0
        predictor.observe_document(doc, "")
        for start, word in targets(text):
            if start - last >= REFRESH_CHARS:
                predictor.observe_document(doc, text[:start])
                last = start
            predictor.window.tokens(text[:start])
            predictor._begin_pool(text[:start], predictor._docs.get(doc))
            words, _, _ = predictor.pool.candidates("", size)
            total += 1
            hit += word in {words[i] for i in range(len(words))}
        predictor.reset()
    return hit / max(1, total)


def main(a) -> int:
    from .predictor import Predictor

    files = pick_files(Path(a.corpus), a.files, a.max_chars, seed=a.seed)
    if not files:
        print(f"no eval files under {a.corpus}/eval: run `laya corpus` first", file=sys.stderr)
        return 2
    p = Predictor.load(a.model)
    p.warmup()
    nchars = sum(len(t) for _, t in files)
    print(f"held-out files: {len(files)} ({nchars} chars): " + ", ".join(n for n, _ in files))
    if a.through_server:
        from laya_client.replay import evaluate_through_server

        eng, base, secs = evaluate_through_server(files, model=a.model)
        where = "through the LSP server (stdio)"
    else:
        eng, base, secs = evaluate_in_process(files, p)
        where = "in process"
    print(f"\nkeystrokes saved and next-identifier accuracy, {where}, {secs:.0f} s")
    print(HEADER)
    print(eng.row("laya"))
    print(base.row("word completion"))
    recall = pool_recall(files, p)
    print(f"\ncandidate pool recall at pool size {p.config.pool_size} (identifier at a boundary in the pool): "
          f"{100 * recall:.1f}%")
    return 0
