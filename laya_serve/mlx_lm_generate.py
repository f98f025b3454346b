"""``/complete`` from any mlx-lm model folder (another architecture, 4/6/8-bit), through ``mlx_lm``.

``laya serve --model FOLDER`` serves Laya's own model folders with :class:`laya_serve.generate.Generator`
(identifier heads from the candidate filter); any other folder that ``mlx_lm.load`` opens (a Qwen
coder at 4 bits on Apple Silicon, say) is served by :class:`MlxLmGenerator`: plain next-token
generation with mlx-lm's model, KV caches and sampler.

Prompt cache: the KV caches of the most recent prompts (the seed's 64, bounded in bytes too) are
kept with their tokens; a request takes the one sharing the longest token prefix with its prompt,
trims it to that prefix (``mlx_lm.models.cache.trim_prompt_cache``) and prefills only the rest.
Each candidate runs after the prompt and is trimmed back off, so ``n`` candidates share one
prefill. Needs the ``convert`` extra (``mlx-lm``, which pulls in ``transformers`` for the tokenizer).
Engine thread only.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from .generate import Choice, Completion, _cut_at_stop, superseded_check, whole_chars
from .params import CompletionRequest

log = logging.getLogger(__name__)

PROMPT_CACHE_ENTRIES = 64
"""Recent prompts whose KV caches are kept (the seed's serve mode kept 64 prefixes)."""


def is_laya_folder(folder: Path) -> bool:
    """True for a Laya model folder (it ships candidate filters, ``lexicon*.npz``)."""
    return any(Path(folder).glob("lexicon*.npz"))


def _common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class MlxLmGenerator:
    """Completions from an mlx-lm model, with a cache of recent prompts' KV states."""

    def __init__(self, folder: str | Path, max_seq_len: int = 256, cache_mb: int = 128,
                 entries: int = PROMPT_CACHE_ENTRIES):
        """
        Args:
            folder: an mlx-lm model folder (``config.json``, weights, tokenizer files).
            max_seq_len: the context is the prompt's last this-many tokens.
            cache_mb: bytes for kept prompt caches (the oldest are dropped first).
            entries: most prompt caches kept.

        Raises:
            ImportError: mlx-lm is not installed.
            Exception: whatever ``mlx_lm.load`` raises for a folder it cannot open.
        """
        import mlx_lm

        self.folder = Path(folder)
        self.model, self.tokenizer = mlx_lm.load(str(folder))
        self.max_seq_len = max_seq_len
        self.max_bytes = cache_mb << 20
        self.entries = entries
        self.cache: OrderedDict[int, tuple[list[int], list]] = OrderedDict()
        self._keys = iter(range(1 << 62))
        self.stats = {"prefilled_tokens": 0, "reused_tokens": 0}

    @property
    def name(self) -> str:
        return self.folder.name

    # ----------------------------------------------------------------- prompt cache
    def _take(self, tokens: list[int]) -> tuple[list, int]:
        """A KV cache holding a prefix of ``tokens`` (taken out of the store) and its length."""
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

        best, best_n = None, 0
        for key, (toks, _) in self.cache.items():
            n = _common_prefix(toks, tokens)
            if n > best_n:
                best, best_n = key, n
        if best is not None:
            toks, kv = self.cache.pop(best)
            best_n = min(best_n, len(tokens) - 1)  # the last prompt token is run again for its logits
            if best_n == len(toks) or (can_trim_prompt_cache(kv) and trim_prompt_cache(kv, len(toks) - best_n) == len(toks) - best_n):
                return kv, best_n
        return make_prompt_cache(self.model), 0

    def _put(self, tokens: list[int], kv: list) -> None:
        self.cache[next(self._keys)] = (list(tokens), kv)
        while len(self.cache) > self.entries or (len(self.cache) > 1 and self._nbytes() > self.max_bytes):
            self.cache.popitem(last=False)

    def _nbytes(self) -> int:
        return sum(sum(getattr(c, "nbytes", 0) for c in kv) for _, kv in self.cache.values())

    # ----------------------------------------------------------------- public
    def complete(self, req: CompletionRequest, is_current: Callable[[], bool] = lambda: True) -> Completion:
        """Candidates for ``req`` (see :meth:`laya_serve.generate.Generator.complete`).

        Raises:
            Superseded: a newer request of the same client arrived, or the job was stopped.
        """
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache
        from mlx_lm.sample_utils import make_sampler

        t0 = time.perf_counter()
        check = superseded_check(is_current)
        check()
        tokens = self.tokenizer.encode(req.prompt)[-self.max_seq_len :] or [self.tokenizer.eos_token_id or 0]
        kv, reused = self._take(tokens)
        new = tokens[reused:]
        logits = self.model(mx.array(new)[None], cache=kv)[:, -1, :]
        mx.eval(logits)
        self.stats["prefilled_tokens"] += len(new)
        self.stats["reused_tokens"] += reused
        if req.seed is not None:
            mx.random.seed(req.seed)
        sampler = make_sampler(temp=req.temperature, top_p=req.top_p if req.top_p < 1.0 else 0.0)
        eos = set(getattr(self.tokenizer, "eos_token_ids", None) or [self.tokenizer.eos_token_id])
        choices = []
        try:
            for _ in range(req.n):
                check()
                choices.append(self._one(req, logits, kv, sampler, eos, check))
                extra = kv[0].offset - len(tokens) if hasattr(kv[0], "offset") else 0
                if extra > 0:
                    trim_prompt_cache(kv, extra)
        finally:
            self._put(tokens, kv)
        return Completion(choices, len(tokens), (time.perf_counter() - t0) * 1e3, len(new))

    def _one(self, req: CompletionRequest, logits, kv, sampler, eos: set, check) -> Choice:
        import mlx.core as mx

        out: list[int] = []
        finish = "length"
        text = ""
        for _ in range(req.max_tokens):
            logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
            t = int(sampler(logprobs).item())
            if t in eos:
                finish = "stop"
                break
            out.append(t)
            text = self.tokenizer.decode(out)
            cut = _cut_at_stop(text, req.stop)
            if cut is not None:
                return Choice(whole_chars(cut), "stop", len(out))
            check()
            logits = self.model(mx.array([[t]]), cache=kv)[:, -1, :]
        return Choice(whole_chars(text), finish, len(out))

    def line(self, prompt: str, max_tokens: int, should_stop: Callable[[], bool]) -> str:
        """Greedy text after ``prompt`` to the end of its line (engine thread): the ghost text of
        the language server's inline completion (``laya_lsp.inline_model``).

        Stops before a line break, at the end of text, after ``max_tokens`` tokens, or as soon as
        ``should_stop()`` is True (checked before each token after the first), returning what it
        has: a partial line is still worth showing, and the prompt's KV cache is kept either way.
        """
        import mlx.core as mx

        tokens = self.tokenizer.encode(prompt)[-self.max_seq_len :] or [self.tokenizer.eos_token_id or 0]
        kv, reused = self._take(tokens)
        out: list[int] = []
        text = ""
        try:
            new = tokens[reused:]
            logits = self.model(mx.array(new)[None], cache=kv)[:, -1, :]
            self.stats["prefilled_tokens"] += len(new)
            self.stats["reused_tokens"] += reused
            eos = set(getattr(self.tokenizer, "eos_token_ids", None) or [self.tokenizer.eos_token_id])
            for _ in range(max_tokens):
                t = int(mx.argmax(logits, axis=-1).item())
                if t in eos:
                    break
                out.append(t)
                text = self.tokenizer.decode(out)
                if "\n" in text:
                    text = text.split("\n", 1)[0]
                    break
                if should_stop():
                    break
                logits = self.model(mx.array([[t]]), cache=kv)[:, -1, :]
        finally:
            extra = kv[0].offset - len(tokens) if hasattr(kv[0], "offset") else 0
            if extra > 0:
                from mlx_lm.models.cache import trim_prompt_cache

                trim_prompt_cache(kv, extra)
            self._put(tokens, kv)
        return whole_chars(text)

    def warmup(self) -> None:
        """One small request, so first-use costs are paid before the port opens; then forget it."""
        self.complete(CompletionRequest(prompt="def main():\n    return", max_tokens=2, n=1))
        self.cache.clear()
