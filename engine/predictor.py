"""``Predictor``: the typing-decision engine (the seed's API: ``predict``, ``reset``, ``warmup``).

One decision, for a text before the cursor:

1. Split off the identifier being typed (``engine.text.word_prefix``); the model's context is the
   text before that word, which ends on a token boundary training also saw (no token healing).
2. Window tokens (``engine.context``); the KV cache keeps the longest common token prefix with the
   previous call, trims the rest (the rollback on deletion) and prefills only the new tokens.
   While the user types inside one word the context does not change, so there is no forward pass
   at all: only re-filtering and re-ranking of the scored pool.
3. The n-gram filter (``engine.pool.PoolBuilder``) picks up to ``pool_size`` identifiers starting with
   the typed prefix; the network scores their first BPE tokens through a pool head (the tied
   embedding rows of those tokens only, not the whole vocabulary).
4. The network's word probability is ``P_net(w) = P(first(w)) P_prior(w | first(w))``: it decides
   between first tokens, the n-gram prior between identifiers that share one. It is interpolated
   with the prior: ``P(w) = b P_net(w) + (1 - b) P_prior(w)`` (``net_weight``; the ``product`` mix
   ``logit + log P_prior(w | t1) + prior_weight log P_prior(w)`` is the alternative).
5. Optionally a rest-of-line continuation: the best identifier, then greedy tokens up to the end of
   the line; the cache is trimmed back afterwards.
6. In the pause after an answer (``idle_step``), the best identifier's tokens are prefilled after
   the context (speculative prefill): when the user ends that word, the next decision prefills
   only what follows it; a wrong guess is trimmed like a deletion.

All methods must run on one thread (``engine.worker.EngineThread``): MLX state is not thread-safe.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import go_imports
from .compounds import MAX_COMPOUNDS
from .config import EngineConfig, load_variant, model_path
from .context import ContextWindow, LineCache
from .imports import (DEFINES, from_import_at, load_module_members,
                      module_name_at, next_parts, resolve_module)
from .languages import BY_NAME, UNKNOWN, Language
from .lexicon import CorpusLexicon, merge_lexicons
from .model_io import ModelLoadError
from .pieces import DocLexicon, context_keys, pieces
from .pool import PoolBuilder
from .rerank import (COUNT_CAP, FEATURES as RERANK_FEATURES, FILE as RERANK_FILE, RECENCY_ABSENT, Reranker,
                     recency_ranks)
from .text import after_mark, in_number, word_prefix
from .tokenizer import EOS, load_tokenizer
from .types import Candidate
from .continuation import (MAX_WORD_TOKENS, continue_line, fit_to_suffix, line_before, line_before_suffix,
                           line_from_document, line_from_workspace, line_is_open)
from .kv_sync import KVSync
from .memory import freeze_loaded_objects, release_free_heap
from .scoring import with_neural_cache
from .window_cache import CHUNK_TOKENS, common_prefix
from .workspace_counts import WorkspaceCounts, count_workspace

log = logging.getLogger(__name__)

FIRST_CACHE_MAX = 20000
"""Most words whose first BPE token is cached (cleared when full and on ``reset``)."""


def kv_capacity(cfg: EngineConfig) -> int:
    """KV-cache capacity in tokens, planned in one place: the context window, the identifier
    being continued (at most ``MAX_WORD_TOKENS``), the greedy continuation, one spare."""
    return cfg.max_context_tokens + MAX_WORD_TOKENS + cfg.line_max_tokens + 1


_NOT_BEGUN = object()
"""``Predictor._pool_doc`` when the current pool has not begun a context (never equal to a document
or to None, the document of a decision without ``doc_id``)."""


_NAME_AFTER = re.compile(r"(?<![\w.])(\w+)[ \t]+$")


def _reserved_here(lang: Language, ctx_text: str) -> frozenset[str]:
    """The reserved words that cannot be the identifier at the end of ``ctx_text``: after a member
    access (``self.``, not ``..`` or a number's ``1.``) or a keyword that a new name follows
    (``def``), or another member or path operator (``Language.member_ops``: ``p->``, ``std::``);
    see ``Language.not_after_dot``. A fresh user's ``x = self.c`` offered ``class`` first,
    ``obj.i`` ``import``, ``def c`` ``class``, ``p->v`` ``void``, ``std::f`` ``fn``. Right after
    one of ``Language.name_signs`` (JavaScript's ``$el``: ``else`` was offered), every reserved
    word that the last 16 KiB do not write after that sign (``$this`` stays)."""
    if ctx_text[-1:] and ctx_text[-1] in lang.name_signs:
        recent = ctx_text[-REPEAT_WINDOW:]
        return frozenset(w for w in lang.keywords if ctx_text[-1] + w not in recent)
    if not lang.not_after_dot:
        return frozenset()
    if lang.member_ops:
        end = ctx_text[-72:].rstrip(" \t")
        if any(end.endswith(op) for op in lang.member_ops):
            return lang.not_after_dot - lang.path_words
    if ctx_text.endswith(".") and not ctx_text.endswith(".."):
        before = ctx_text[:-1]
        return frozenset() if before[-1:].isdigit() and in_number(before) else lang.not_after_dot
    m = _NAME_AFTER.search(ctx_text, max(0, len(ctx_text) - 64))
    return lang.not_after_dot if m and m.group(1) in lang.name_after else frozenset()


_ACCESS = re.compile(r"(?<![\w.])([^\W\d]\w*)[ \t]*(\.|->|::)[ \t]*$")


REPEAT_WINDOW = 16_384
"""Characters before the cursor :func:`_repeated_name` looks for the name after itself in (16 us
where it is not there, 50 us over the whole 64 KiB context)."""


def _repeated_name(lang: Language, ctx_text: str) -> str | None:
    """The name before a member access that ends ``ctx_text`` (``os`` of ``os.``, ``p`` of
    ``p->``, ``std`` of ``std::``), unless the text already has that name after itself there
    (``node.node``): the name is ranked below the other items (``os.`` offered ``os`` first, and
    its ghost text ``os.``, to a fresh user; in typed Python, the name before the dot was the first
    item at 9 of 114 member accesses, always ``self.``)."""
    if lang.name == "prose":
        return None  # a sentence's full stop
    m = _ACCESS.search(ctx_text, max(0, len(ctx_text) - 96))
    if m is None or (m.group(2) not in lang.member_ops if m.group(2) != "." else ctx_text[-1] != "."):
        return None  # (blanks may follow ``->`` and ``::``, not ``.``)
    name, op = m.group(1), m.group(2)
    return None if ctx_text.find(f"{name}{op}{name}", max(0, len(ctx_text) - REPEAT_WINDOW)) >= 0 else name


def _indented(text: str) -> bool:
    """Whether the last line of ``text`` starts with a blank."""
    start = text.rfind("\n") + 1
    return text[start : start + 1].isspace()


_LOG_RANK = np.log1p(np.arange(256))
"""The re-ranker's ``rank`` feature by place (``engine.rerank``; ``k`` is at most 256)."""

PASSED_CONTEXT_CHARS = 256
"""Characters before the word being typed that tell it from another (``Predictor._track_passed``)."""

FULL_HEAD_MAX_VOCAB = 8192
"""Up to this vocabulary size the whole LM head is computed once per context (see ``predict``)."""


OVERLAP_MAX_NEW = 8
"""``EngineConfig.overlap_pool`` applies to decisions that forward at most this many new tokens
(typing). After a jump or a paste, and while the full window is being prefilled
(``KVSync.pending``), the pool is prepared after the network, on this thread: there the helper's
hand-off cost more than it gave (over LSP, two servers interleaved: the first keystroke after a
jump 5.01 / 7.38 / 13.60 ms without the helper against 5.34 / 9.13 / 17.24 ms with it)."""


_HELPER: ThreadPoolExecutor | None = None
_HELPER_LOCK = threading.Lock()


def _pool_helper() -> ThreadPoolExecutor:
    """The one helper thread (``EngineConfig.overlap_pool``) all predictors of the process share,
    started on first use: predictors are used one at a time on the engine's thread, and one that
    the garbage collector never frees (``engine.memory.freeze_loaded_objects``) must not keep a
    thread of its own."""
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None:
            _HELPER = ThreadPoolExecutor(1, thread_name_prefix="laya-pool")
        return _HELPER


class Predictor:
    """Ranked completions for the text before (and after) the cursor."""

    def __init__(self, backend, tokenizer, lexicons: dict[str, CorpusLexicon | Path], config: EngineConfig,
                 folder: Path | None = None, reranker: Reranker | None = None):
        """
        Args:
            backend: the decoder (``engine.backends``).
            tokenizer: its ``tokenizers.Tokenizer``.
            lexicons: corpus candidate filter per language name (``engine.languages``), loaded
                or as the path of its ``lexicon-<language>.npz`` (then loaded when a document of
                that language first needs it: each costs tens of MB in memory); a language
                without one gets the document's and the workspace's words only.
            config: the engine variant.
            folder: the model folder it came from (for messages).
            reranker: the model folder's learned re-ranker (``engine.rerank``), used when
                ``config.rerank`` is on; None: the engine's score alone.
        """
        self.backend = backend
        self.tok = tokenizer
        self.lexicons = dict(lexicons)
        self._lexicon_lock = threading.Lock()
        self._workspace: dict[str, CorpusLexicon] = {}
        self._expected: dict[str, tuple] = {}  # doc id -> (import index, names): _expected_names
        self._members: dict[str, dict] | None = None  # imports-python.json, read on first use
        self._go_members: dict[str, dict] | None = None  # imports-go.json, read on first use
        self._exported_only = False  # the word follows an imported Go package's dot (per context)
        self._pools: dict[str, PoolBuilder] = {}
        self._doc_lang: dict[str, Language] = {}
        self.language: Language = UNKNOWN
        self.config = config
        self.folder = folder
        self.eos = tokenizer.token_to_id(EOS)
        self.window = ContextWindow(LineCache(tokenizer), self.eos, config.max_context_tokens,
                                    config.min_context_tokens)
        self.reranker = reranker
        self._recency: tuple | None = None  # the context's (ranks, line's, recent lines'), when first needed
        self.rerank_log = None
        """Called with each re-ranked decision's ``(features, words, typed, language)`` when set
        (``laya_tools.rerank_fit`` collects its data so)."""
        # the word being typed: its document and the text before it, what was typed at the last
        # decision, the first item shown then, and the first items typed past since it began
        # (the re-ranker's ``passed_over``)
        self._word_at: tuple | None = None
        self._word_typed = ""
        self.shown_first: str | None = None
        """The first identifier item of the last decision (None: none); ``laya_tools.rerank_fit``
        sets it to the first one of the re-ranker it collects for."""
        self._passed: set[str] = set()
        self.stats = {"decisions": 0, "reused": 0, "overlapped": 0}  # KVSync adds its counters (forward_tokens, ...)
        self.kv = KVSync(backend, config.context_shift, self.stats,  # the KV cache and its tokens
                         prior_after_jump=config.prior_after_jump)
        # finish that full window on keystrokes that need no forward pass; the server turns this
        # off and calls ``advance`` when the engine thread is idle (``engine.worker``) instead
        self.advance_on_keystroke = True
        self._no_words: frozenset[str] = frozenset()  # reserved words that cannot come here
        self._repeated: str | None = None  # the name before the member access here (``os.``)
        self.doc_id: str | None = None
        self._docs: dict[str, DocLexicon] = {}
        self._ctx: list[int] | None = None  # context of the last decision
        self._hidden: np.ndarray | None = None  # after the context's last token; None: prior only
        self._synced = False  # the KV cache was synced to ``_ctx`` (False: sync at the next decision)
        self._first_logits = np.zeros(tokenizer.get_vocab_size())
        self._first_known = np.zeros(tokenizer.get_vocab_size(), bool)
        self.pool = self._pool_for(BY_NAME["python"] if "python" in self.lexicons else UNKNOWN)
        self._first_cache: dict[str, int] = {}
        self._line_cache: dict[str, str] = {}
        # the document the pool was begun with; _NOT_BEGUN: the pool must begin at the next decision
        self._pool_doc: DocLexicon | None | object = _NOT_BEGUN
        self._ctx_text: str | None = None
        self._spec_word: str | None = None  # the identifier :meth:`idle_step` would prefill
        # speculative prefill in pauses (``LAYA_SPECULATE=0``: off, for side-by-side benchmarks)
        self.speculate = config.speculative_prefill and os.environ.get("LAYA_SPECULATE", "1") != "0"
        self._prefetch_text: str | None = None  # context text :meth:`idle_step` should prefill
        self._prefetch_ctx: list[int] | None = None  # its tokens, once computed
        # prefill after edits no request followed (``LAYA_PREFETCH=0``: off, for side-by-side benchmarks)
        self.prefetching = os.environ.get("LAYA_PREFETCH", "1") != "0"
        # the pool's context on a helper thread during the forward pass (``EngineConfig.overlap_pool``;
        # ``LAYA_OVERLAP=0``: off, for side-by-side benchmarks)
        self.overlap = config.overlap_pool and os.environ.get("LAYA_OVERLAP", "1") != "0"
        vocab = tokenizer.get_vocab()
        self._id_to_text = {i: t for t, i in vocab.items()}
        self.window.alternates = self.kv.windows.windows  # coming back keeps a stored window's start
        self._upgrade = backend.__dict__.pop("upgrade", None) if hasattr(backend, "__dict__") else None
        """``engine.backends.NumbaUpgrade`` while the NumPy backend stands in (see
        :meth:`_check_upgrade`; taken off the backend, so nothing keeps it once done)."""
        self._upgrade_checked = 0.0
        self._trim_heap = True
        """Whether :meth:`idle_step` should give freed heap back to the OS (``engine.memory``): set
        by a load (a language's lexicon, the workspace index), cleared by the trim."""

    def use_backend(self, backend) -> None:
        """Decode with ``backend`` (the same model, the same KV-cache layout: NumPy's and numba's)
        from now on. The live KV cache moves over (``swap``), and with it the stored and pending
        windows stay valid: the next decision goes on as if nothing happened. Engine thread only."""
        backend.forward([self.eos])  # first-call costs (the kernels' pages) now, on its own cache
        backend.swap(self.backend.swap(None))
        self.kv.backend = self.backend = backend
        self._trim_heap = True  # the float32 weights of the backend left behind

    def _check_upgrade(self) -> bool:
        """Switch to the numba backend once its kernels are built (``engine.backends.NumbaUpgrade``);
        True when the check is done for good (switched, or the build failed)."""
        state = self._upgrade.state()
        if state == "building":
            return False
        up, self._upgrade = self._upgrade, None
        backend = up.build() if state == "built" else None
        if backend is not None:
            self.use_backend(backend)
            log.info("numba kernels built: switched to the numba backend")
        return True

    # the KV-cache state lives in ``self.kv`` (engine.kv_sync); these read it
    @property
    def cached(self) -> list[int]:
        """Tokens in the KV cache."""
        return self.kv.cached

    @property
    def windows(self):
        """Stored windows' KV caches (``engine.window_cache.WindowStore``)."""
        return self.kv.windows

    @property
    def _pending(self):
        return self.kv.pending

    @property
    def fast_path(self) -> bool:
        """Answer from a short window after a jump (``LAYA_FAST_PATH=0``: off)."""
        return self.kv.fast_path

    @fast_path.setter
    def fast_path(self, on: bool) -> None:
        self.kv.fast_path = on

    def advance(self, max_tokens: int = CHUNK_TOKENS) -> bool:
        """Prefill more of the full window behind a short one (``KVSync.advance``); True while
        there is more to do."""
        return self.kv.advance(max_tokens)

    def idle_step(self) -> bool:
        """One step of work for a pause between keystrokes (the server's engine thread calls it
        when idle, ``engine.worker``); True while there is more to do.

        First the full window behind a short one (:meth:`advance`); then the window at the cursor
        after an edit that no decision followed (:meth:`prefetch`); then, when
        ``speculative_prefill`` is on, the best identifier of the last decision is prefilled
        after its context (``KVSync.speculate``), so that when the user ends that word the next
        decision prefills only what follows it (the separator: one token instead of two or three).
        A wrong guess costs nothing at the next decision but a trim.

        Before all that, a predictor that started on the NumPy backend while the numba kernels
        were compiled (``engine.backends.NumbaUpgrade``) switches to them once they are built."""
        if self._upgrade is not None and self._check_upgrade():
            return True
        if self._trim_heap:  # a lexicon or a workspace index was loaded: give its temporaries back
            self._trim_heap = False
            freeze_loaded_objects()  # and keep what it keeps out of the collector's walks
            release_free_heap()
            return True
        if self.kv.pending is not None and not self.kv.pending.done:
            # and once it is done, the next steps go on with what follows
            return self.advance() or self._prefetch_text is not None or self._spec_word is not None
        if self._prefetch_text is not None:
            return self._prefetch_step()
        word, self._spec_word = self._spec_word, None
        if word is not None:  # set only by a decision with the network's context (``predict``)
            ids = self.tok.encode(word).ids
            if len(ids) <= MAX_WORD_TOKENS:
                self.kv.speculate(ids)
        return False

    def prefetch(self, prefix: str, doc_id: str) -> None:
        """Engine thread: the user edited document ``doc_id`` and the cursor is at the end of
        ``prefix`` (LF line ends), but no decision was asked for there yet (a paste, a comment or
        a line break typed, an undo: an editor asks for completions on identifier keys only). The
        next pauses prefill the context window there (:meth:`idle_step`, ``KVSync.prefill``), so
        the decision at the next identifier key prefills a token or two instead of the whole
        change, and answers from the full window instead of a short one.

        Ignored for another document than the last decision's (a request for it resets the
        engine), and where the context before the word at the cursor is the last decision's.
        The next decision cancels it."""
        if not self.prefetching or doc_id != self.doc_id:
            return
        typed = word_prefix(prefix)
        ctx_text = prefix[: len(prefix) - len(typed)] if typed else prefix
        if ctx_text == self._ctx_text:
            self._prefetch_text = self._prefetch_ctx = None
            return
        self._prefetch_text, self._prefetch_ctx = ctx_text, None

    def _prefetch_step(self) -> bool:
        """One idle step of :meth:`prefetch`'s prefill; True while there is more to do."""
        if self._prefetch_ctx is None:
            self._prefetch_ctx = self.window.tokens(self._prefetch_text)
            # ``window.tokens`` now describes this context (its identifiers and lines): the next
            # decision recomputes its own, even at the last decision's context
            self._ctx_text = None
            self._spec_word = None  # a speculation goes after the decision's context, not this one
            return True
        self._synced = False  # the cache no longer holds the last decision's context as it was
        more = self.kv.prefill(self._prefetch_ctx)
        if not more:
            self._prefetch_text = self._prefetch_ctx = None
        return more

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(cls, model_dir: str | Path | None = None, variant: str = "code",
             backend: str | None = None, defer_jit: bool = False) -> "Predictor":
        """Load a model folder (default: the variant's shipped model).

        Args:
            model_dir: mlx-lm-format folder; None for the variant's model.
            variant: ``configs/<variant>.toml``.
            backend: ``numpy``, ``numba``, ``mlx`` or ``auto``; None for the variant's setting.
            defer_jit: ``auto`` on a machine whose numba kernels are not built yet starts on the
                NumPy backend and switches once they are (``engine.backends.make_backend``): in
                :meth:`idle_step`, or, when ``advance_on_keystroke`` (no idle steps), in
                :meth:`predict` (a check at most once a second).

        Raises:
            ModelLoadError: missing, corrupt or mismatched model files (the message names the file).
            FileNotFoundError / ValueError: unknown variant or bad variant file.
        """
        from .backends import make_backend

        cfg = load_variant(variant)
        if backend:
            cfg.backend = backend
        folder = Path(model_dir).expanduser() if model_dir else model_path(cfg)
        if folder is None:
            raise ModelLoadError(f"variant {cfg.name!r} ships no trained model yet; pass a model folder")
        t0 = time.perf_counter()
        capacity = kv_capacity(cfg)
        try:
            b = make_backend(folder, cfg.backend, capacity, defer_jit=defer_jit)
        except KeyError as e:
            raise ModelLoadError(f"{folder / 'model.safetensors'} lacks weight {e} required by config.json") from e
        try:
            tok = load_tokenizer(folder / "tokenizer.json")
        except (FileNotFoundError, ValueError) as e:
            raise ModelLoadError(str(e)) from e
        if tok.get_vocab_size() != b.args.vocab_size:
            raise ModelLoadError(f"{folder / 'tokenizer.json'} has {tok.get_vocab_size()} tokens but "
                                 f"config.json says vocab_size={b.args.vocab_size}")
        lexicons: dict[str, Path] = {}
        for lex_path in sorted(folder.glob("lexicon*.npz")):
            # lexicon-<language>.npz; a model folder of the first release has one lexicon.npz (Python)
            name = lex_path.stem.partition("-")[2] or "python"
            if name in BY_NAME:
                try:
                    CorpusLexicon.check(lex_path)  # cheap (zip directory); loaded on first use
                except ValueError as e:
                    raise ModelLoadError(str(e)) from e
                lexicons[name] = lex_path
        reranker = None
        if (folder / RERANK_FILE).exists():
            try:
                reranker = Reranker.load(folder / RERANK_FILE)
            except ValueError as e:
                raise ModelLoadError(str(e)) from e
        p = cls(b, tok, lexicons, cfg, folder, reranker)
        log.info("loaded %s (%s backend%s) in %.0f ms", folder, b.name,
                 (", learned re-ranker (" + ("network" if reranker.mlp is not None else "linear") + ")")
                 if reranker is not None else "", (time.perf_counter() - t0) * 1e3)
        return p

    def warmup(self) -> None:
        """Run a few decisions so first-use costs (allocation, BLAS threads) are paid now."""
        text = "import os\n\n\ndef main(argv):\n    path = os.path.join(argv[0], 'x')\n    return pa"
        for i in range(len(text) - 12, len(text) + 1):
            self.predict(text[:i], want_line=True)
        self.reset()
        freeze_loaded_objects()  # the model's objects stay for the session (``engine.memory``)
        release_free_heap()  # the load's temporaries
        self._trim_heap = False

    # ----------------------------------------------------------------- state
    def reset(self) -> None:
        """Drop the KV cache and per-document context, empty the engine's caches (lines' tokens,
        first tokens, continuations, the pools' last context) and free MLX's buffer cache."""
        import mlx.core as mx

        self.kv.reset()
        self.window.reset()
        self._ctx = None
        self._ctx_text = None
        self._hidden = None
        self._synced = False
        self._pool_doc = _NOT_BEGUN
        self._spec_word = None
        self._prefetch_text = self._prefetch_ctx = None
        self._word_at, self._word_typed, self.shown_first, self._passed = None, "", None, set()
        self._line_cache.clear()
        self._first_cache.clear()
        self.window.lines.d.clear()  # tokens of lines (up to LineCache.size): rebuilt as needed
        for pool in self._pools.values():
            pool.release()
        self.doc_id = None
        mx.clear_cache()

    def observe_document(self, doc_id: str, text: str, language: str | Language | None = None) -> None:
        """(Re)build the online n-gram of an open document from its text.

        The server runs this as a background job (about once a second while a document changes);
        the sorted arrays the pool needs are built here too, so no keystroke pays for them.

        Args:
            doc_id: the document (its URI in the server).
            text: its whole text.
            language: its language (a name of ``engine.languages`` or a ``Language``); None keeps
                the one set before, else Python when the model has a Python lexicon.
        """
        self.set_document(doc_id, self.build_document(text, language), language)

    # ----------------------------------------------------------------- languages and workspace
    def corpus_lexicon(self, name: str) -> CorpusLexicon | None:
        """The shipped lexicon of a language, loaded on first use (None if there is none or it
        fails to load; the failure is logged with the file's name)."""
        with self._lexicon_lock:  # the workspace index calls this off the engine thread
            lex = self.lexicons.get(name)
            if isinstance(lex, Path):
                try:
                    lex = CorpusLexicon.load(lex)
                except ValueError as e:
                    log.error("%s", e)
                    lex = None
                self.lexicons[name] = lex
            return lex

    def _pool_for(self, lang: Language) -> PoolBuilder:
        pool = self._pools.get(lang.name)
        if pool is None:
            lex = self._workspace.get(lang.name) or self.corpus_lexicon(lang.name)
            cfg = self.config.for_language(lang.name)
            pool = self._pools[lang.name] = PoolBuilder(lex, self._first_token, cfg.prior_weights,
                                                        cfg.doc_confidence)
            self._trim_heap = True
        return pool

    def _language(self, language) -> Language:
        if isinstance(language, Language):
            return language
        return BY_NAME.get(language or "", UNKNOWN)

    def language_of(self, doc_id: str | None) -> Language:
        """The language a document was registered with (Python for unregistered ones when the
        model has a Python lexicon, as the first release assumed)."""
        lang = self._doc_lang.get(doc_id) if doc_id is not None else None
        if lang is None:
            return BY_NAME["python"] if "python" in self.lexicons else UNKNOWN
        return lang

    def build_workspace(self, texts: dict[str, list[str]], weight: float | None = None,
                        paths: dict[str, list[str]] | None = None) -> dict[str, CorpusLexicon]:
        """Count a workspace's files, per language, merged into each language's corpus lexicon:
        :func:`engine.workspace_counts.count_workspace` then :meth:`merge_workspace` (the server
        runs the first in a child process, ``laya_lsp.workspace_index``).

        Touches no model state, so it may (and should: ~0.1-1 s) run off the engine thread;
        install the result with :meth:`set_workspace`.

        Args:
            texts: language name -> texts of the workspace's files of that language.
            weight: the workspace's share of unigram mass relative to the corpus (1: as much;
                ``engine.lexicon.merge_lexicons``); None: the variant's ``workspace_weight``.
            paths: language name -> the files' paths, in the order of ``texts`` (absolute, or
                relative to a workspace folder): the imports of Python, JavaScript and
                TypeScript files then name what each module is expected to define and what it
                exports (``engine.imports``; the ``expect`` and ``from`` weights).

        Returns:
            Language name -> merged lexicon (the workspace's alone for a language that ships none).
        """
        return self.merge_workspace(count_workspace(texts, self.tok, paths), weight)

    def merge_workspace(self, counts: WorkspaceCounts, weight: float | None = None) -> dict[str, CorpusLexicon]:
        """Merge :func:`engine.workspace_counts.count_workspace`'s counts into each language's
        corpus lexicon (``weight``: see :meth:`build_workspace`). Touches no model state."""
        out = {}
        for name, part in counts.languages.items():
            ws = CorpusLexicon(part.arrays)
            w = weight if weight is not None else self.config.for_language(name).workspace_weight
            merged = merge_lexicons(self.corpus_lexicon(name), ws, w)
            if merged is not self.corpus_lexicon(name):  # never the shared shipped one
                merged.matches = part.matches
                merged.lines = part.lines
                merged.imports = counts.imports
            out[name] = merged
        return out

    def set_workspace(self, merged: dict[str, CorpusLexicon]) -> None:
        """Install lexicons built by :meth:`build_workspace` (replacing all earlier ones; ``{}``
        drops the workspace). Their words and n-grams enter the pool and the prior from the next
        decision on."""
        self._workspace = dict(merged)
        self._trim_heap = True
        self._expected.clear()  # names of the old index
        self._pools.clear()
        self.pool = self._pool_for(self.language)
        self._pool_doc = _NOT_BEGUN

    def build_document(self, text: str, language: str | Language | None = None, pause=None) -> DocLexicon:
        """Count a document's identifiers and n-grams, with the arrays the pool needs.

        Touches no model state, so it may run on any thread (the server runs it off the engine
        thread, so counting a large file never delays a keystroke); install the result with
        :meth:`set_document` on the engine thread. ``pause``: see :class:`DocLexicon`.
        """
        doc = DocLexicon(text.replace("\r\n", "\n"), pause)
        lang = self._language(language) if language is not None else self.language
        self._pool_for(lang).doc_arrays(doc)
        return doc

    def set_document(self, doc_id: str, doc: DocLexicon, language: str | Language | None = None) -> None:
        """Install a document's n-gram built by :meth:`build_document` (with the same language)."""
        self._docs[doc_id] = doc
        if language is not None:
            self._doc_lang[doc_id] = self._language(language)

    def forget_document(self, doc_id: str) -> None:
        self._docs.pop(doc_id, None)
        self._doc_lang.pop(doc_id, None)
        if self.doc_id == doc_id:
            self.reset()

    # ----------------------------------------------------------------- decision
    def _begin_pool(self, ctx_text: str, doc: DocLexicon | None) -> None:
        """Prepare the candidate filter for the word starting after ``ctx_text`` (whose window
        :meth:`ContextWindow.tokens` has just computed)."""
        before = pieces(ctx_text[-200:])
        # a top-level definition (the keyword's line is not indented): what other modules import
        defining = (bool(before) and before[-1] in DEFINES.get(self.language.name, ())
                    and not _indented(ctx_text))
        members = None
        if self.language.name == "python" and "import" in ctx_text[-2000:]:
            members = self._module_members(ctx_text)
        if self.language.name == "python" and members is None:
            members = self._module_names(ctx_text)
        self._exported_only = False
        if self.language.name == "go":
            at = go_imports.package_at(ctx_text)
            if at is not None:  # ``strings.``: an exported name of the package, its most used first
                self._exported_only = True
                if self._go_members is None:
                    self._go_members = load_module_members(self.folder, go_imports.MEMBERS_FILE)
                members = dict(self._go_members.get("members", {}).get(at[1], ())) or None
        self.pool.begin(context_keys(before), doc, self.window.idents,
                        self.window.line_idents, self.window.recent_idents, before,
                        self._expected_names() if defining else (), members)
        self._pool_doc = doc

    def _module_members(self, ctx_text: str) -> dict[str, float] | None:
        """Inside ``from M import ...``: what the corpus's code (the model folder's
        ``imports-python.json``) and the workspace's files import from ``M``, less the names the
        statement already lists; None elsewhere."""
        at = from_import_at(ctx_text)
        if at is None:
            return None
        module, listed = at
        sources = []  # the corpus's counts and the workspace's, each as shares (the workspace's are few)
        if not module.startswith("."):
            sources.append(dict(self._import_table().get("members", {}).get(module, ())))
        imports = getattr(self.pool.corpus, "imports", None)
        if imports is not None:
            parts = resolve_module(self.doc_id or "", module)
            if parts:
                sources.append(imports.names_of("py", parts))
        out: Counter = Counter()
        for counts in sources:
            counts = {w: n for w, n in counts.items() if w not in listed}
            tot = sum(counts.values())
            for w, n in counts.items():
                out[w] += n / tot
        return dict(out) or None

    def _module_names(self, ctx_text: str) -> dict[str, float] | None:
        """Where a Python ``import``/``from`` statement names its module: the module names (or
        the next part after a typed ``pkg.``) the corpus imports, by count; None elsewhere."""
        head = module_name_at(ctx_text)
        if head is None:
            return None
        return next_parts(self._import_table().get("modules", {}), head) or None

    def _import_table(self) -> dict[str, dict]:
        """The model folder's ``imports-python.json`` (``engine.imports.module_members``), read on
        first use."""
        if self._members is None:
            self._members = load_module_members(self.folder)
        return self._members

    def _expected_names(self) -> list[str]:
        """Names the workspace imports from the current document's module (remembered per
        document and workspace; ``[]`` without a workspace import index)."""
        imports = getattr(self.pool.corpus, "imports", None)
        if imports is None or self.doc_id is None:
            return []
        hit = self._expected.get(self.doc_id)
        if hit is None or hit[0] is not imports:
            if len(self._expected) > 64:
                self._expected.clear()
            hit = self._expected[self.doc_id] = (imports, imports.expected(self.doc_id))
        return hit[1]

    def _first_token(self, word: str) -> int:
        t = self._first_cache.get(word)
        if t is None:
            t = self.tok.encode(word).ids[0]
            if len(self._first_cache) > FIRST_CACHE_MAX:
                self._first_cache.clear()
            self._first_cache[word] = t
        return t

    def predict(self, prefix: str, suffix: str | None = None, doc_id: str | None = None,
                max_items: int = 20, want_line: bool = False, stop=None,
                language: str | Language | None = None, line_word: str | None = None) -> list[Candidate]:
        """Rank completions for the cursor at the end of ``prefix``.

        Args:
            prefix: document text before the cursor (LF line ends; only the last
                ``max_context_tokens`` tokens are used).
            suffix: text after the cursor (used to skip the line continuation when the rest of the
                line is not empty).
            doc_id: the document this text belongs to (its online n-gram is used); the caller
                resets the engine on a document switch.
            max_items: most candidates returned.
            want_line: also compute a rest-of-line continuation (costs up to ``line_max_tokens``
                forward steps at a new context; cached while the user types within the word). When
                one is found it is always in the result (second, after the identifier it extends).
            stop: a ``threading.Event``; when set, the continuation stops early (request cancelled).
            language: the document's language (``engine.languages`` name); remembered for
                ``doc_id``. None: the one registered for ``doc_id`` (Python by default).
            line_word: with ``want_line``, the identifier the line starts with instead of the
                best item: the one the editor's list has selected (VS Code's inline completion
                shows only a line that extends it). Ignored unless it is an identifier that
                starts with the typed prefix and is longer than it.

        Returns:
            Candidates, best first. Identifier candidates start with the typed prefix and are
            longer than it. None inside a number literal (``0xab``: ``engine.text.in_number``) or
            an identifier split by a combining mark (``engine.text.after_mark``).
        """
        if self._upgrade is not None and self.advance_on_keystroke:  # no idle steps to do it
            now = time.monotonic()
            if now - self._upgrade_checked > 1.0:
                self._upgrade_checked = now
                self._check_upgrade()
        if in_number(prefix) or after_mark(prefix):
            return []
        typed = word_prefix(prefix)
        ctx_text = prefix[: len(prefix) - len(typed)] if typed else prefix
        self._prefetch_text = self._prefetch_ctx = None  # this decision's context replaces it
        self._track_passed(doc_id, ctx_text, typed)
        if doc_id is not None:
            self.doc_id = doc_id
            if language is not None:
                self._doc_lang[doc_id] = self._language(language)
        lang = self.language_of(doc_id) if doc_id is not None or language is None else self._language(language)
        if lang is not self.language:
            self.language = lang
            self.pool = self._pool_for(lang)
            self._pool_doc = _NOT_BEGUN  # a document-less decision must still begin the new pool
        cfg = self.config.for_language(lang.name)
        if ctx_text == self._ctx_text and self._ctx is not None:
            ctx = self._ctx  # same word start as the last call: same window
        else:
            ctx = self.window.tokens(ctx_text)
            self._ctx_text = ctx_text
        self.stats["decisions"] += 1
        doc = self._docs.get(doc_id) if doc_id is not None else None
        if self._pending is not None and ctx == self._ctx:
            if self.advance_on_keystroke:
                self.advance()  # no new context this keystroke: finish the full window instead
            if self._pending.done:
                self._synced = False  # and switch to it now (``KVSync.sync``)
        cands = None  # the pool's candidates for ``typed``, when the helper has taken them
        if ctx == self._ctx and self._synced and doc is self._pool_doc:
            self.stats["reused"] += 1
        else:
            if ctx != self._ctx or not self._synced:
                job = None
                if self.overlap and self.kv.pending is None and \
                        len(ctx) - common_prefix(self.kv.cached, ctx) <= OVERLAP_MAX_NEW:
                    # the pool (its context, then the typed prefix's candidates) on the helper
                    # while this thread runs the network and its LM head
                    job = _pool_helper().submit(self._begin_and_candidates, ctx_text, doc, typed, cfg.pool_size)
                    self.stats["overlapped"] += 1
                try:
                    # None right after a jump or a paste: the window is prefilled later, and this
                    # decision is the n-gram prior's alone (``KVSync.prior_after_jump``)
                    self._hidden = self.kv.sync(ctx)
                    self._first_known[:] = False
                    if job is not None and self._hidden is not None:
                        self._head_logits(cfg)
                except BaseException:
                    self._synced = False  # the KV cache may hold this context, the rest not
                    raise
                finally:
                    if job is not None:
                        try:
                            cands = job.result()  # (re-raises what the helper raised)
                        except BaseException:
                            self._synced = False  # the pool is half begun: begin it again next time
                            raise
                self._synced = True
                self._ctx = ctx
                self._line_cache.clear()
                if job is None:
                    self._begin_pool(ctx_text, doc)
            else:
                self._begin_pool(ctx_text, doc)
            self._recency = None
            self._no_words = _reserved_here(lang, ctx_text)  # per context, as the pool
            self._repeated = _repeated_name(lang, ctx_text)
        out = self._rank_words(typed, lang, cfg, max_items, cands)
        if lang.name == "prose" and typed[:1].islower() and len(out) < max_items:
            # prose: "tues" also offers "Tuesday" (after the words that match as typed), as
            # editors' word completion does
            have = {c.text for c in out}
            more = self._rank_words(typed[0].upper() + typed[1:], lang, cfg, max_items)
            out += [c for c in more if c.text not in have][: max_items - len(out)]
        head = out[0].text if out else None
        if line_word is not None and len(typed) < len(line_word) <= 256 and line_word.startswith(typed) and \
                word_prefix(line_word) == line_word:  # an identifier (no leading digit) extending typed
            head = line_word
        line = None
        if want_line and head and line_is_open(suffix) and (
                self.config.line_match_min_chars > 0 or (self._hidden is not None and self.config.line_max_tokens > 0)):
            line = self._line_from_text(ctx_text, head, typed)
            if line is None and self._hidden is not None and self.config.line_max_tokens > 0:
                self.kv.unspeculate()  # the continuation goes on from the context itself
                line = self._continuation(head, stop)
            line = fit_to_suffix(line, suffix, line_before(ctx_text)) if line else None
        elif want_line and head and self.config.line_match_min_chars > 0:
            # mid-line, more than closers after the cursor: an earlier line that goes on with the
            # same text after it (a fresh user's `print(self.rec|, 'x done')` had no ghost text)
            line = line_before_suffix(self._line_from_text(ctx_text, head, typed), suffix)
        if line and line != head:
            score = out[0].score - 1e-3 if out else 0.0
            out.insert(1, Candidate(line, score, "line"))
            if len(out) > max(2, max_items):
                del out[max(2, max_items):]
        if self.speculate and out and out[0].kind != "line" and self._hidden is not None:
            self._spec_word = out[0].text
        self.shown_first = out[0].text if out and out[0].kind != "line" else None
        return out

    def _track_passed(self, doc_id: str | None, ctx_text: str, typed: str) -> None:
        """Keep the first items typed past while one word is typed (``passed_over``): the last
        decision's first item joins them when this one is the same word with more typed after
        it; a new word (another document or text before it) starts empty, and the same or less
        typed (asked again, a deletion) adds nothing. The text before the word is compared by its
        last :data:`PASSED_CONTEXT_CHARS` (the server's prefix is the last 64 KB before the cursor,
        whose start moves as the user types)."""
        here = ctx_text[-PASSED_CONTEXT_CHARS:]
        at = self._word_at
        if at is None or at[0] != doc_id or at[1] != here:
            self._word_at = (doc_id, here)
            if self._passed:
                self._passed = set()
        elif len(typed) > len(self._word_typed) and typed.startswith(self._word_typed) and self.shown_first:
            self._passed.add(self.shown_first)
        self._word_typed = typed
        self.shown_first = None

    def _line_from_text(self, ctx_text: str, word: str, typed: str) -> str | None:
        """A rest-of-line item from an earlier line of the document, else of the workspace, that
        starts as the cursor's line does with ``word`` (the best item), or with what is typed (an
        identifier typed in full is not among the items, which are longer than it)."""
        n = self.config.line_match_min_chars
        lines = self.pool.corpus.lines if self.pool.corpus is not None else None
        for w in (word, typed) if typed and typed != word else (word,):
            line = line_from_document(ctx_text, w, n) or line_from_workspace(ctx_text, w, n, lines)
            if line is not None:
                return line
        return None

    def _begin_and_candidates(self, ctx_text: str, doc: DocLexicon | None, typed: str, size: int):
        """:meth:`_begin_pool`, then the pool's candidates for ``typed`` (the helper thread's part
        of a decision, ``EngineConfig.overlap_pool``)."""
        self._begin_pool(ctx_text, doc)
        return self.pool.candidates(typed, size)

    def _head_logits(self, cfg) -> None:
        """With a vocabulary of up to ``FULL_HEAD_MAX_VOCAB`` tokens: the LM head over all of it,
        mixed with the neural cache, into ``_first_logits`` (once per context)."""
        if len(self._first_logits) <= FULL_HEAD_MAX_VOCAB and not self._first_known[0]:
            lg = self.backend.logits(self._hidden)
            # log-probabilities (a mixture of two normalised distributions): log Z = 0
            ctx = self.cached[: len(self.cached) - self.kv.speculated] if self.kv.speculated else self.cached
            self._first_logits[:] = with_neural_cache(lg, self.backend.hid, self._hidden, ctx,
                                                      cfg.cache_weight, cfg.cache_theta)
            self._first_known[:] = True

    def _rank_words(self, typed: str, lang: Language, cfg, max_items: int, cands=None) -> list[Candidate]:
        """The pool's words for ``typed`` (``cands``: already taken, :meth:`_begin_and_candidates`)
        scored by the network and the prior, best first (the context is the last decision's:
        ``self._hidden``, the pool's n-gram keys)."""
        words, prior, firsts = cands if cands is not None else self.pool.candidates(typed, cfg.pool_size)
        if not len(words):
            return []
        if self._hidden is None:
            return self._ranked(words, np.log(prior + cfg.word_prior_alpha / len(words)), typed, lang,
                                max_items)
        # LM head over the pool's first tokens, computed once per context. With this model's
        # 4096-token vocabulary one full GEMV (~0.06 ms) is cheaper than gathering the pool's rows
        # and de-duplicating them, so small vocabularies take the whole head; larger ones a
        # pool head (the tied-embedding rows of the pool's distinct first tokens only).
        if len(self._first_logits) <= FULL_HEAD_MAX_VOCAB:
            self._head_logits(cfg)
        else:
            need = np.unique(firsts[~self._first_known[firsts]])
            if len(need):
                self._first_logits[need] = self.backend.logits(self._hidden, need)
                self._first_known[need] = True
        net = self._first_logits[firsts]
        p = prior + cfg.word_prior_alpha / len(words)
        # P(w | t1): normalise the prior inside each first-token group
        group = np.bincount(firsts, weights=p, minlength=len(self._first_logits))[firsts]
        if cfg.mix == "linear" and len(self._first_logits) <= FULL_HEAD_MAX_VOCAB:
            # P(w) = b * P_net(t1) P_prior(w | t1) + (1 - b) * P_prior(w), with P_net a softmax over
            # the whole vocabulary and P_prior normalised over the pool
            p_net = np.exp(net) * (p / group)  # ``net`` is already log-probabilities
            b = cfg.net_weight
            score = np.log(b * p_net + (1 - b) * p / p.sum())
        else:
            score = net + np.log(p / group) + cfg.prior_weight * np.log(p)
        if cfg.rerank and self.reranker is not None:
            scorer = self.reranker.scorer(lang.name)
            if scorer is not None:
                out = self._reranked(words, score, net, p, group, typed, lang, scorer, max_items)
                if out is not None:
                    return out
        return self._ranked(words, score, typed, lang, max_items)

    def _rerank_top(self, words, score: np.ndarray, typed: str) -> tuple[list[int], list[str]]:
        """The engine's best ``reranker.k`` candidates that :meth:`_ranked` would list (longer
        than ``typed``, not excluded here, distinct, not the name before a member access, which
        :meth:`_ranked` lists last): pool indices and words, best first."""
        k = self.reranker.k
        top: list[int] = []
        ws: list[str] = []
        seen: set[str] = set()
        n = len(typed)
        m = min(len(score), k + 8)  # almost every pool word is eligible: a few more than k
        cand = _best_stable(score, m)  # ties keep the pool's order, as in _ranked
        while True:
            ix = cand.tolist()
            for i, w in zip(ix, words.take(ix)):  # pool words (``_LazyWords``), read in one pass
                if len(w) > n and w not in seen and w not in self._no_words and w != self._repeated and (
                        not self._exported_only or w[:1].isupper()):
                    seen.add(w)
                    top.append(i)
                    ws.append(w)
                    if len(top) >= k:
                        return top, ws
            if m >= len(score):
                return top, ws
            m2 = min(len(score), 4 * m)  # too few eligible: the next ones (the first m again
            cand = np.argsort(-score, kind="stable")[:m2]  # too, as ties may order them otherwise;
            m = m2  # ``seen`` skips those taken)

    def _static_features(self, ws: list[str]) -> np.ndarray:
        """The features of ``ws`` that stay the same while one word is typed (``engine.rerank``
        columns ``in_document``, ``document_count``, ``recency``, ``not_in_window``, ``on_line``,
        ``keyword``, ``document_trigram``, ``document_bigram``, ``long_match``,
        ``recent_lines``, ``corpus_count``): ``(len(ws), 11)``. (Remembering rows per context
        did not pay: a typed character brings mostly words the last keystroke did not list.)"""
        if self._recency is None:  # once per context
            self._recency = (recency_ranks(self.window.line_idents, self.window.done_idents),
                             frozenset(self.window.line_idents), frozenset(self.window.recent_idents))
        rec, line, recent = self._recency
        pool = self.pool
        doc = pool.doc
        k3, k2 = pool.keys
        tri = (doc.tri.get(k3) or {}) if doc is not None else {}
        bi = (doc.bi.get(k2) or {}) if doc is not None else {}
        uni = doc.uni if doc is not None else {}
        at = pool.arr[1] if pool.arr is not None else {}
        follow = pool.long_followers
        keywords = self.language.keywords
        a = np.array([[uni.get(w, 0) for w in ws], [rec.get(w, -1) for w in ws],
                      [w in line for w in ws], [w in keywords for w in ws], [tri.get(w, 0) for w in ws],
                      [bi.get(w, 0) for w in ws], [follow.get(w, 0.0) for w in ws],
                      [w in recent for w in ws], [at.get(w, -1) for w in ws]], np.float64)
        out = np.empty((len(ws), 11))
        out[:, 0] = a[0] > 0
        out[:, 1] = np.log1p(np.minimum(a[0], COUNT_CAP))
        absent = a[1] < 0
        out[:, 2] = np.log1p(np.where(absent, RECENCY_ABSENT, np.minimum(a[1], RECENCY_ABSENT)))
        out[:, 3] = absent
        out[:, 4:6] = a[2:4].T
        out[:, 6:9] = np.log1p(np.minimum(a[4:7].T, COUNT_CAP))
        out[:, 9] = a[7]
        pos = a[8].astype(np.int64)
        ccount = pool.arr[3] if pool.arr is not None else ()
        out[:, 10] = np.log1p(ccount[pos]) * (pos >= 0) if len(ccount) else 0.0
        return out

    def rerank_features(self, words, score, net, p, group, typed: str, top: list[int],
                        ws: list[str]) -> np.ndarray:
        """``(len(top), len(engine.rerank.FEATURES))`` features of pool entries ``top`` (words
        ``ws``) at this decision; the module ``engine.rerank`` defines them."""
        n = len(top)
        ix = np.asarray(top, np.int64)
        f = np.empty((n, len(RERANK_FEATURES)))
        f[:, 0] = score[ix]
        f[:, 0] -= f[0, 0]
        f[:, 1] = net[ix]
        pi = p[ix]
        f[:, 2] = np.log(pi / p.sum())
        f[:, 3] = np.log(pi / group[ix])
        st = self._static_features(ws)
        f[:, 4:10] = st[:, [0, 1, 2, 3, 4, 5]]
        f[:, 10] = [math.log(max(1, len(w) - len(typed))) for w in ws]
        f[:, 11] = _LOG_RANK[:n]
        corpus_part = 1 if self.pool.corpus is not None else -1
        f[:, 12] = [q != 0 and q != corpus_part for q in (words.part[i] for i in top)]
        f[:, 13:17] = st[:, 6:10]
        f[:, 17] = st[:, 10]
        passed = self._passed if self.config.rerank_passed_over else ()
        f[:, 18] = [w in passed for w in ws] if passed else 0.0
        return f

    def _reranked(self, words, score, net, p, group, typed: str, lang: Language, scorer,
                  max_items: int) -> list[Candidate] | None:
        """The items, best first: the engine's best ``reranker.k`` candidates re-scored by the
        learned re-ranker (``engine.rerank``), then, when more are asked for, the others as
        :meth:`_ranked` lists them. None when fewer than two are to be re-ranked."""
        top, ws = self._rerank_top(words, score, typed)
        if len(top) < 2:
            return None
        f = self.rerank_features(words, score, net, p, group, typed, top, ws)
        if self.rerank_log is not None:
            self.rerank_log(f, ws, typed, lang.name)
        s = scorer(f, len(typed))  # ``Reranker.scorer``
        plain = "word" if lang.name == "prose" else "identifier"
        keywords = lang.keywords
        out = [Candidate(ws[j], float(s[j]), "keyword" if ws[j] in keywords else plain)
               for j in np.argsort(-s, kind="stable")[:max_items].tolist()]
        if len(out) < max_items:  # more than the re-ranked: the rest in the engine's order, below
            have = set(ws)
            low = out[-1].score
            for c in self._ranked(words, score, typed, lang, max_items + len(ws)):
                if c.text not in have:
                    low -= 1e-3
                    out.append(Candidate(c.text, low, c.kind))
                    if len(out) >= max_items:
                        break
        return out

    def _ranked(self, words, score: np.ndarray, typed: str, lang: Language, max_items: int) -> list[Candidate]:
        """The ``max_items`` best-scored words longer than ``typed``, best first."""
        k = max_items + 2 + MAX_COMPOUNDS  # the typed word and repeated compounds are skipped below
        # the best k only (a full sort of a 1024-word pool costs ~30 us)
        order = (_best_stable(score, k) if len(score) > 4 * k else np.argsort(-score, kind="stable")).tolist()
        out: list[Candidate] = []
        seen: set[str] = set()  # a compound (``engine.compounds``) may also be a known word
        plain = "word" if lang.name == "prose" else "identifier"
        last = None  # the name before the member access (``_repeated_name``), if it is an item
        for i in order:
            w = words[i]
            if len(w) > len(typed) and w not in seen and w not in self._no_words and (
                    not self._exported_only or w[:1].isupper()):
                seen.add(w)
                c = Candidate(w, float(score[i]), "keyword" if w in lang.keywords else plain)
                if w == self._repeated:
                    last = c
                    continue
                out.append(c)
                if len(out) >= max_items:
                    break
        if last is not None and len(out) < max_items:
            out.append(Candidate(last.text, out[-1].score - 1e-3 if out else last.score, last.kind))
        return out

    def _continuation(self, word: str, stop=None) -> str:
        """``word`` plus greedy tokens to the end of the line (cached per context and word)."""
        hit = self._line_cache.get(word)
        if hit is not None:
            return hit
        line, complete = continue_line(self.kv, self.tok, word, self.config.line_max_tokens,
                                       self.config.line_min_prob, self.eos, self._id_to_text, stop,
                                       self.config.line_min_joint_prob)
        if complete:
            self._line_cache[word] = line
        return line


def _best_stable(score: np.ndarray, m: int) -> np.ndarray:
    """``np.argsort(-score, kind="stable")[:m]`` without sorting it all: the indices of the ``m``
    best scores, best first, ties in index order. (``np.argpartition`` alone picks an arbitrary
    member of a tie at the cut, and which one can differ between machines: NumPy picks its
    partition code by the CPU's vector instructions; on this AVX-512 machine the engine's list and
    the identity re-ranker's differed at a tie.)"""
    if len(score) <= m:
        return np.argsort(-score, kind="stable")
    cut = np.partition(score, len(score) - m)[len(score) - m]  # the m-th best score
    above = np.flatnonzero(score > cut)
    cand = np.concatenate([above, np.flatnonzero(score == cut)[: m - len(above)]])
    return cand[np.argsort(-score[cand], kind="stable")]
