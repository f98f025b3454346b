"""How System 2 should change the fast engine's list: the floor for its guess going first
(``engine.system2.MIN_WORD_LOGPROB``) and the weights of its re-ranking (``engine.system2.rerank``).

``record`` types held-out files in process as ``laya eval --system2`` does
(:class:`laya_tools.evaluate.LaggedSystem2`), asking at every character of every identifier
(not stopping at the first right item, so any rule can be replayed), and keeps per keystroke the
fast engine's first items and their scores, System 2's guess with the log-probability of its
rest (``engine.system2.Continuation.scored_word_at``), and System 2's scores of the items and
the guess (``engine.system2.System2.word_scores``). ``sweep`` replays the records under floors
and re-ranking weights and prints keystrokes saved per language (as ``laya eval`` counts them:
the first keystroke at which the first item is the word accepts it), next to System 2 off, a
perfect choice between the two first items, and a perfect choice among all items kept (the most
a re-ranking could give).

    python -m laya_tools.system2_floor record --split tune --files 1 --max-chars 2000 --out t.json
    python -m laya_tools.system2_floor sweep t.json [more.json ...]

Records are JSON lists of ``[language, file, start, word, typed, fast, guess, logprob, items,
fast scores, System 2 scores]`` (the last None where System 2 had none for the place), and with
``--exact`` a last ``{word: full score}`` (records of an earlier version end at ``logprob``, and
``sweep`` replays the floors on them).
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

FLOORS = (-4.0, -3.0, -2.0, -1.5, -1.0, -0.5)
"""Floors ``sweep`` tries (nats)."""
TOP = 10
"""The fast engine's items a record keeps (with their scores and System 2's)."""
WEIGHTS = (0.1, 0.25, 0.4, 0.6)
"""Weights of the fast engine's score that ``sweep`` tries in :func:`rescored` (rows named
``re-ranked WEIGHT ITEMS MISS``; ``*``: the server's constants)."""
MISSES = (1.0, 2.0, 4.0)
"""``GUESS_MISS`` values ``sweep`` tries."""


def record(files, predictor, system2, exact: int = 0) -> list[list]:
    """Per-keystroke records of typing ``files`` (``laya_tools.evaluate.EvalFile``) with the
    fast engine ``predictor`` and ``system2`` (``engine.system2.System2``), one guess late.
    ``exact``: also System 2's full scores of the first this many items and the guess
    (``engine.system2.System2.exact_word_scores``, computed at the keystroke itself: no lag)."""
    from engine.system2 import KEEP_STEPS

    from .evaluate import REFRESH_CHARS, LaggedSystem2, targets

    rows: list[list] = []
    for fi, f in enumerate(files):
        doc = f"file:///{f.name}"
        predictor.reset()
        predictor.observe_document(doc, "", f.language)
        lagged = LaggedSystem2(system2, path=f.name.rsplit("/", 1)[-1], min_logprob=-math.inf,
                               keep_steps=KEEP_STEPS)
        last_refresh = 0
        for start, word in targets(f.text, f.language):
            if start - last_refresh >= REFRESH_CHARS:
                predictor.observe_document(doc, f.text[:start], f.language)
                last_refresh = start
            for c in range(len(word)):
                prefix = f.text[: start + c]
                cands = [x for x in predictor.predict(prefix, doc_id=doc, max_items=20)
                         if x.kind != "line" and x.text.startswith(word[:c]) and len(x.text) > c][:TOP]
                items = [x.text for x in cands]
                lagged(items, prefix)
                guess, lp = lagged.last or (None, None)
                scored = items + ([guess] if guess and guess not in items else [])
                s2 = system2.word_scores(lagged.used, prefix, scored)
                rows.append([f.language, fi, start, word, c, items[0] if items else None, guess, lp,
                             items, [round(x.score, 4) for x in cands],
                             None if s2 is None else [round(x, 4) for x in s2]])
                if exact:
                    if c == 0:
                        known: dict[str, float] = {}  # the text before the word stays: scores too
                    want = items[:exact] + ([guess] if fits(rows[-1]) and guess not in items[:exact] else [])
                    new = [w for w in want if w not in known]
                    got = system2.exact_word_scores(prefix, new, path=lagged.path) if new else []
                    known.update(zip(new, got or [None] * len(new)))
                    rows[-1].append({w: round(known[w], 4) for w in want if known[w] is not None})
        predictor.forget_document(doc)
    return rows


def saved(rows: list[list], first) -> dict[str, float]:
    """Keystrokes saved per language (% of identifier characters) when ``first(row)`` is the
    list's first item at each recorded keystroke."""
    words: dict[tuple, list] = defaultdict(list)
    for r in rows:
        words[(r[0], r[1], r[2])].append(r)
    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (lang, _, _), rs in words.items():
        rs.sort(key=lambda r: r[4])
        word = rs[0][3]
        got[lang][1] += len(word)
        for r in rs:
            if first(r) == word:
                got[lang][0] += len(word) - r[4] - 1
                break
    return {lang: 100 * a / b for lang, (a, b) in sorted(got.items())}


def fits(r) -> bool:
    """The guess can go first at this keystroke (``engine.system2.merge``'s rule)."""
    word, typed, guess = r[3], r[4], r[6]
    return bool(guess) and len(guess) > typed and guess.startswith(word[:typed])


def with_floor(floor: float):
    """The first item under a floor: System 2's guess when it fits and its rest is at least
    ``floor`` nats likely, else the fast engine's."""
    return lambda r: r[6] if fits(r) and r[7] >= floor else r[5]


def rescored(weight: float, k: int = TOP, floor: float = -1.5, miss: float | None = None):
    """The first item when System 2 re-ranks the fast engine's first ``k`` items and its own
    guess (``engine.system2.rerank``; the guess, when the fast engine has not got it, counts
    ``miss`` below the lowest fast score, ``engine.system2.GUESS_MISS`` by default). Where
    System 2 has no scores for the place, :func:`with_floor`'s rule."""
    from engine.system2 import GUESS_MISS, rerank, rerank_pool

    fallback = with_floor(floor)
    miss = GUESS_MISS if miss is None else miss

    def first(r):
        if len(r) < 11 or r[10] is None or not r[8]:
            return fallback(r)
        s2 = dict(zip(r[8], r[10]))
        if fits(r) and r[6] not in s2:  # scored last
            s2[r[6]] = r[10][-1]
        words, fast = rerank_pool(r[8], r[9], r[6] if fits(r) else None, r[3][: r[4]], k, miss)
        return rerank(words, fast, [s2[w] for w in words], weight)[0] if words else r[5]
    return first


def exactly(weight: float):
    """The first item when the fast engine's first items and the guess are re-ranked by
    ``weight`` x their fast score + System 2's full score (records made with ``--exact``)."""
    from engine.system2 import rerank, rerank_pool

    def first(r):
        scores = r[11] if len(r) >= 12 else None
        if not scores:
            return r[5]
        n = next((i for i, w in enumerate(r[8]) if w not in scores), len(r[8]))  # the first n were scored
        words, fast = rerank_pool(r[8], r[9], r[6] if fits(r) and r[6] in scores else None, r[3][: r[4]], n)
        return rerank(words, fast, [scores[w] for w in words], weight)[0] if words else r[5]
    return first


def _shipped() -> tuple[float, int, float]:
    from engine.system2 import GUESS_MISS, RERANK_TOP, RERANK_WEIGHT

    return RERANK_WEIGHT, RERANK_TOP, GUESS_MISS


def sweep(rows: list[list], floors=FLOORS) -> list[tuple[str, dict[str, float]]]:
    """``(rule, {language: keystrokes saved %})`` for off, always first, each floor and the
    perfect choice."""
    out = [("System 2 off", saved(rows, lambda r: r[5])),
           ("always first", saved(rows, with_floor(-math.inf)))]
    out += [(f"first above {f:g} nats", saved(rows, with_floor(f))) for f in floors]
    out.append(("perfect choice", saved(rows, lambda r: r[6] if fits(r) and r[6] == r[3] else r[5])))
    if any(len(r) >= 11 and r[10] is not None for r in rows):
        for w in WEIGHTS:
            for k in (5, TOP):
                for miss in MISSES:
                    name = f"re-ranked {w:g} {k} {miss:g}" + (" *" if (w, k, miss) == _shipped() else "")
                    out.append((name, saved(rows, rescored(w, k, miss=miss))))
    if any(len(r) >= 12 for r in rows):
        for w in WEIGHTS:
            out.append((f"exact, re-ranked {w:g}", saved(rows, exactly(w))))
    if any(len(r) >= 11 and r[10] is not None for r in rows):
        out.append((f"in the first {TOP}+guess", saved(rows, lambda r: r[3] if len(r) >= 11 and (
            r[3] in r[8] or (fits(r) and r[6] == r[3])) else r[5])))
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m laya_tools.system2_floor")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="per-keystroke records of both engines on held-out files")
    rec.add_argument("--split", default="tune", choices=("tune", "eval"))
    rec.add_argument("--files", type=int, default=1, help="files per language")
    rec.add_argument("--max-chars", type=int, default=2000)
    rec.add_argument("--languages", default=None)
    rec.add_argument("--corpus", default="corpus/build")
    rec.add_argument("--system2", default=None, help="the GGUF (default: `laya system2 install`'s)")
    rec.add_argument("--out", required=True)
    rec.add_argument("--exact", type=int, default=0, metavar="N",
                     help="also score the fast engine's first N items and the guess in full (slow: ~25 ms a token)")
    sw = sub.add_parser("sweep", help="keystrokes saved under each floor")
    sw.add_argument("records", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "record":
        from engine.predictor import Predictor
        from engine.system2 import System2, System2Error, default_path

        from .evaluate import pick_files

        files = pick_files(Path(a.corpus), a.files, a.max_chars, split=a.split,
                           languages=a.languages.split(",") if a.languages else None)
        if not files:
            print(f"no {a.split} files under {a.corpus}/{a.split}: run `laya corpus` first", file=sys.stderr)
            return 2
        try:
            system2 = System2(Path(a.system2) if a.system2 else default_path(), n_threads=1)
        except System2Error as e:
            print(f"python -m laya_tools.system2_floor: {e}", file=sys.stderr)
            return 2
        p = Predictor.load(None)
        p.warmup()
        rows = record(files, p, system2, exact=a.exact)
        Path(a.out).write_text(json.dumps(rows))
        print(f"{len(rows)} keystrokes of {len(files)} files -> {a.out}")
        return 0
    rows = []
    for i, path in enumerate(a.records):  # files of different records stay apart
        rows += [[r[0], (i, r[1]), *r[2:]] for r in json.loads(Path(path).read_text())]
    table = sweep(rows)
    langs = list(table[0][1])
    print(f"{'rule':26s}" + "".join(f"{lang[:10]:>11s}" for lang in langs) + "       mean")
    for name, d in table:
        print(f"{name:26s}" + "".join(f"{d[lang]:10.1f}%" for lang in langs)
              + f"{sum(d.values()) / len(d):10.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
