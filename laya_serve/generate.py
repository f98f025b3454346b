"""The engine-thread side of the service: candidates for one :class:`CompletionRequest`.

A request's path: ``Predictor.predict`` takes the prompt's last ``max_seq_len`` tokens as its
window (its hysteresis keeps the window's start while the prompt grows, then slides it by half,
shifting the KV cache rather than prefilling again) and syncs the KV cache to that window (the
longest common prefix with the previous request's, or
with a recent window's KV state kept in ``predictor.windows``, ``engine.window_cache``: only new
tokens are prefilled; where the Predictor answered from a short window after a jump, the full
window is prefilled before generating) and ranks identifiers; each candidate then starts with a
*head* and continues token by token:

- the model's next token (after the context and the typed part of the word) goes on with an
  identifier, or, before the typed part, tokens that extend it outweigh the one that is exactly it
  (token healing: ``os.pa`` goes on as ``path``):
  the head is an identifier from the Predictor's candidate filter (the top ``n`` at
  temperature 0, drawn from its scores otherwise), counted as one token of ``max_tokens``;
- otherwise (no word, or a complete one such as ``return``) the head is the typed part and the
  model's next token comes after it (the ``n`` best at temperature 0, drawn otherwise).

Continuation tokens are greedy at temperature 0, else drawn from ``softmax(logits / T)`` cut to
``top_p``. A candidate ends at ``<|endoftext|>``, at a stop sequence (cut before it), or after
``max_tokens``; the KV cache is then trimmed back to the context for the next candidate.

Runs on the engine thread only (``engine.worker.EngineThread``): it drives the Predictor's backend.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from engine.text import word_prefix
from engine.worker import current_stop

from .params import CompletionRequest

log = logging.getLogger(__name__)

@dataclass(slots=True)
class Choice:
    """One candidate: the text after the prompt and why it ended (``stop`` or ``length``)."""

    text: str
    finish_reason: str
    tokens: int


@dataclass(slots=True)
class Completion:
    """The answer to one request."""

    choices: list[Choice]
    prompt_tokens: int
    ms: float
    """Engine time for the request (milliseconds)."""
    prefilled_tokens: int = 0
    """Context tokens that had to be run through the model (the rest were in a KV cache)."""


class Superseded(Exception):
    """A newer request from the same client arrived (latest wins), or the request was cancelled."""


def superseded_check(is_current: Callable[[], bool]) -> Callable[[], None]:
    """A check to call between steps of an engine job: raises :class:`Superseded` once
    ``is_current()`` is False or the job's stop event (``engine.worker.current_stop``) is set."""
    stop_event = current_stop()

    def check() -> None:
        if not is_current() or (stop_event is not None and stop_event.is_set()):
            raise Superseded()

    return check


class Generator:
    """Completions from a :class:`engine.predictor.Predictor`, on its engine thread."""

    def __init__(self, predictor, max_seq_len: int = 256, window_store_mb: int | None = None):
        """
        Args:
            predictor: a loaded Predictor (its backend and KV cache are used).
            max_seq_len: the context is at most the prompt's last this-many tokens (the seed's
                256), at least half as many once the prompt is that long: it sets the
                Predictor's window (so a Predictor serving LSP requests too should not be given here).
            window_store_mb: memory for recent windows' KV states (``predictor.windows``); None
                keeps the engine's default.
        """
        self.p = predictor
        self.tok = predictor.tok
        self.eos = predictor.eos
        self.max_seq_len = max_seq_len = min(max_seq_len, predictor.config.max_context_tokens)
        predictor.window.max = max_seq_len
        predictor.window.min = max(1, max_seq_len // 2)
        if window_store_mb is not None:
            predictor.windows.max_bytes = window_store_mb << 20
        vocab = self.tok.get_vocab_size()
        texts = self._texts = [self.tok.decode([i]) for i in range(vocab)]
        self._prefixed: dict[str, tuple] = {}  # typed part -> (token ids starting with it, exact)
        self._longest_text = max(map(len, texts), default=0)
        self._ident_start = np.array([bool(t) and (t[0].isalpha() or t[0] == "_") for t in texts])
        self._ident_cont = np.array([bool(t) and (t[0].isalnum() or t[0] == "_") for t in texts])

    # ----------------------------------------------------------------- public
    def complete(self, req: CompletionRequest, is_current: Callable[[], bool] = lambda: True) -> Completion:
        """Candidates for ``req`` (engine thread).

        Args:
            req: the validated request.
            is_current: False once a newer request of the same client has arrived; checked
                before the work starts and between tokens.

        Raises:
            Superseded: ``is_current()`` turned False, or the job's stop event was set.
        """
        t0 = time.perf_counter()
        check = superseded_check(is_current)
        check()
        text = req.prompt
        typed = word_prefix(text)
        p = self.p
        rng = np.random.default_rng(req.seed)
        want = req.n if req.temperature == 0 else max(req.n, 8)
        before = dict(p.stats)
        idents = [c for c in p.predict(text, max_items=want) if c.kind != "line"]
        if p.stats["short_windows"] != before["short_windows"]:
            # answered from the short window after a jump: prefill the full one, then use it
            p.advance(1 << 30)
            idents = [c for c in p.predict(text, max_items=want) if c.kind != "line"]
        prefilled = (p.stats["forward_tokens"] - before["forward_tokens"]
                     + p.stats["background_tokens"] - before["background_tokens"])
        n_ctx = len(p.cached)  # the context is in the KV cache now
        heals = bool(typed) and n_ctx > 0 and self._goes_on(typed, n_ctx)
        if typed:  # the model's view after the typed part: does the word go on, or is it complete?
            h = self._forward(self.tok.encode(typed).ids)
            logits = p.backend.logits(h) if h is not None else None
            self._trim(n_ctx)
        else:
            logits = p.backend.logits(p.backend.hid[n_ctx - 1])
        choices = []
        try:
            for i in range(req.n):
                check()
                head, first = self._head(i, req, typed, idents, logits, rng, heals)
                choices.append(self._continue(req, typed, head, first, rng, check))
                self._trim(n_ctx)
        finally:
            self._trim(n_ctx)
        return Completion(choices, n_ctx, (time.perf_counter() - t0) * 1e3, prefilled)

    def warmup(self) -> None:
        """Run a few requests so first-use costs are paid before the port opens; then forget them."""
        for t in (0.0, 0.8):
            for prompt in ("import os\n\ndef main(argv):\n    path = os.pa", "def f(x):\n    return"):
                self.complete(CompletionRequest(prompt=prompt, max_tokens=8, n=2, temperature=t, seed=0))
        self.p.reset()

    # ----------------------------------------------------------------- steps
    def _head(self, i: int, req: CompletionRequest, typed: str, idents: list, logits: np.ndarray | None,
              rng: np.random.Generator, heals: bool = False) -> tuple[str, int | None]:
        """Candidate ``i``'s start: ``(head, first token or None)``.

        ``logits`` is the model's next-token view after the context and the typed part of the
        word. The head is an identifier of the Predictor's when the next token goes on with an
        identifier (or starts one), or when ``heals`` (token healing says the typed part goes on:
        :meth:`_goes_on`); else it is the typed part itself (the word is complete) and the
        model's token comes next.
        """
        greedy = req.temperature == 0
        if logits is None:  # no room in the KV cache for the typed part
            return (idents[min(i, len(idents) - 1)].text, None) if idents else (typed, None)
        if greedy:
            order = np.argsort(-logits, kind="stable")
            first = int(order[0])
        else:
            first = sample(logits, req.temperature, req.top_p, rng)
        word_goes_on = (self._ident_cont if typed else self._ident_start)[first]
        if typed and idents and heals:
            word_goes_on = True
        if idents and word_goes_on:
            if not greedy:
                scores = np.array([c.score for c in idents])
                return idents[sample(scores, req.temperature, req.top_p, rng)].text, None
            if i < len(idents):
                return idents[i].text, None
        elif idents and typed and greedy and 0 < i <= len(idents):
            # the word looks complete: candidate 0 goes on after it, the others complete it
            return idents[i - 1].text, None
        if greedy and i > 0:
            first = int(order[min(i, len(order) - 1)])
        return typed, first

    def _goes_on(self, typed: str, n_ctx: int) -> bool:
        """Token healing: True when, before the typed part, the model puts more probability on
        tokens that extend it (``path``, ``parent`` after ``os.`` for ``pa``) than on the token that
        is exactly it. The model's next token after the typed part is a poor judge of that: it was
        trained on ``path`` as one token, never on ``pa`` + ``th``. False when no token extends it."""
        if len(typed) > self._longest_text:
            return False  # no token extends it (and a 1 MB word would be a 1 MB cache key)
        hit = self._prefixed.get(typed)
        if hit is None:
            if len(self._prefixed) > 4096:
                self._prefixed.clear()
            ids = np.array([i for i, t in enumerate(self._texts) if t.startswith(typed)], np.int64)
            hit = self._prefixed[typed] = (ids, np.array([self._texts[i] == typed for i in ids], bool))
        ids, exact = hit
        if not len(ids) or exact.all():
            return False
        lg = self.p.backend.logits(self.p.backend.hid[n_ctx - 1])[ids]
        pr = np.exp(lg - lg.max())
        return pr[~exact].sum() > pr[exact].sum()

    def _continue(self, req: CompletionRequest, typed: str, head: str, first: int | None,
                  rng: np.random.Generator, check: Callable[[], None]) -> Choice:
        """Generate after the head; the KV cache holds the context on entry (trimmed by the caller).

        The head is ``typed`` itself (nothing of it is new text) or an identifier that extends it
        (counted as one token); ``first`` is the first token after it (None: picked here).
        """
        b = self.p.backend
        out_head = head[len(typed):]
        if req.max_tokens == 0:
            return Choice("", "length", 0)
        used = 1 if out_head else 0
        stopped = _cut_at_stop(out_head, req.stop)
        if stopped is not None:
            return Choice(stopped, "stop", used)
        if used >= req.max_tokens:
            return Choice(out_head, "length", used)
        if head:
            h = self._forward(self.tok.encode(head).ids)
            if h is None:
                return Choice(out_head, "length", used)
        else:
            h = b.hid[len(self.p.cached) - 1]
        t = first if first is not None else self._pick(b.logits(h), req, rng)
        ids: list[int] = []
        while True:
            if t == self.eos:
                return Choice(whole_chars(out_head + self.tok.decode(ids)), "stop", used)
            ids.append(t)
            used += 1
            text = out_head + self.tok.decode(ids)
            stopped = _cut_at_stop(text, req.stop)
            if stopped is not None:
                return Choice(whole_chars(stopped), "stop", used)
            if used >= req.max_tokens:
                return Choice(whole_chars(text), "length", used)
            check()
            h = self._forward([t])
            if h is None:
                return Choice(whole_chars(text), "length", used)
            t = self._pick(b.logits(h), req, rng)

    def _pick(self, logits: np.ndarray, req: CompletionRequest, rng: np.random.Generator) -> int:
        if req.temperature == 0:
            return int(np.argmax(logits))
        return sample(logits, req.temperature, req.top_p, rng)

    def _forward(self, ids: list[int]) -> np.ndarray | None:
        """Run ``ids`` after the cached tokens; None when the KV cache has no room for them."""
        p = self.p
        if not ids or len(p.cached) + len(ids) >= p.backend.capacity:
            return None
        h = p.backend.forward(ids)
        p.cached.extend(ids)
        return h

    def _trim(self, n_ctx: int) -> None:
        p = self.p
        if len(p.cached) > n_ctx:
            p.backend.trim(len(p.cached) - n_ctx)
            del p.cached[n_ctx:]


def sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """Draw an index from ``softmax(logits / temperature)`` cut to the nucleus ``top_p``
    (the smallest set of most likely entries whose probability reaches ``top_p``)."""
    z = (np.asarray(logits, np.float64) - np.max(logits)) / temperature
    prob = np.exp(z)
    prob /= prob.sum()
    if top_p < 1.0:
        order = np.argsort(-prob, kind="stable")
        k = int(np.searchsorted(np.cumsum(prob[order]), top_p)) + 1
        keep = order[:k]
        q = prob[keep] / prob[keep].sum()
        return int(keep[rng.choice(len(keep), p=q)])
    return int(rng.choice(len(prob), p=prob))


def whole_chars(text: str) -> str:
    """``text`` without U+FFFD: byte-level tokens that end inside a multi-byte UTF-8 character (a
    CJK character or an emoji spans several tokens), or a stray continuation byte the model picked,
    decode to U+FFFD; those bytes are dropped, not shown."""
    return text.replace("\ufffd", "")


def _cut_at_stop(text: str, stops: tuple[str, ...]) -> str | None:
    """``text`` up to the earliest stop sequence in it, or None when it has none."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return None if cut < 0 else text[:cut]
