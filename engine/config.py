"""Engine variants (``configs/<variant>.toml``) as a typed, defaulted dataclass, read with cattrs."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

import cattrs

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
"""Variant files ship inside the package (``engine/configs``); the repo's ``configs/`` links here."""


@dataclass(kw_only=True)
class EngineConfig:
    """One engine variant. Every field has a default, so a variant file lists only what it changes."""

    name: str = "code"
    """Variant name (the file stem)."""
    model: str = "models/laya-code"
    """Model folder, relative to the ``engine`` package or absolute; empty means no trained model yet."""
    bits: int = 6
    """Weight quantization the variant ships with (affine, mlx ``nn.quantize``)."""
    group_size: int = 64
    """Quantization group size (weights per scale/bias pair)."""
    pool_size: int = 512
    """Candidate pool: identifiers picked by the n-gram filter before the network scores them.
    The seed's typing variant used 200; code needs more (``laya eval`` prints recall at this size).
    Measured on the tune packages (6 files x 6,000 characters per language, 2026-12-01): keystrokes
    saved over the six languages 50.19 / 50.17 / 50.15 / 50.14 / 50.15% at 128 / 256 / 512 / 1024 /
    2048 (the first item almost always comes from the best few); recall at a word boundary
    (Python, Go, JavaScript) 89.3-90.8% at 256-1024; decisions interleaved in one process, network
    decision median 1.27-1.30 ms at 512 against 1.37-1.40 ms at 1024, re-rank p90 0.19-0.21 against
    0.24-0.30 ms. 512 keeps most of the recall and most of the time saved."""
    max_context_tokens: int = 512
    """Tokens before the cursor fed to the model (the model was trained on 512-token windows). The
    code variant uses 256: on the tune packages (6 files x 6,000 characters per language,
    2026-12-01) keystrokes saved over the six languages were 50.16 / 50.16 / 50.17% at 512 / 384 /
    256 and ghost-text lines exactly right 1,304 / 1,331 of ~2,450 at 512 / 256 (the document's
    n-grams and long-context matches see the whole file), while a network decision took 1.18-1.20
    against 1.33-1.37 ms at the median (interleaved in one process): shorter attention, a smaller
    neural cache."""
    min_context_tokens: int = 256
    """When the window must slide, it restarts with at least this many tokens (hysteresis: a full
    re-prefill happens about once per ``max - min`` new tokens, not on every line)."""
    context_shift: bool = True
    """When the window slides, drop the oldest tokens from the KV cache and re-rotate the kept keys
    (RoPE makes a position shift one rotation; llama.cpp's "context shift") instead of re-prefilling
    ``min_context_tokens`` tokens. A slide then costs ~0.1 ms instead of a long prefill; the kept
    tokens' cache differs slightly from a fresh prefill (they had seen the dropped tokens)."""
    prior_after_jump: bool = True
    """Right after a jump or a paste (more than ``FAST_MIN_NEW`` new tokens and no stored window),
    answer from the n-gram prior alone, prefilling nothing; the window is prefilled while the
    user pauses, or (its last 16 tokens) when the context next changes. Measured on 616 jumps to
    identifiers of held-out Python and Go files, the first keystroke there: top-1 90.7% with the
    prior alone, 89.3% with a 16-token window (3.65 ms), 89.9% with the whole window: the
    document's n-grams carry that keystroke. False: prefill the 16-token window at once."""
    speculative_prefill: bool = True
    """In pauses between keystrokes, prefill the best identifier of the last answer after its
    context (``Predictor.idle_step``): when the user ends that word, the next decision prefills
    only the separator after it. The server does it on its engine thread when idle; in process,
    callers run ``idle_step`` themselves."""
    overlap_pool: bool = True
    """At a decision that runs the network, prepare the candidate pool's context part
    (``Predictor._begin_pool``: the n-gram followers, the window's words) on a helper thread while
    the calling thread runs the forward pass, whose compiled kernels release the GIL
    (``engine.kernels_numba``): the two overlap on a second core. The network's state stays on
    the calling thread (MLX's rule); the helper touches only the pool. Off: one after the other."""
    line_max_tokens: int = 12
    """Greedy tokens for the rest-of-line candidate (0 disables it)."""
    line_min_prob: float = 0.35
    """The continuation stops before a greedy token whose probability is below this: ghost text
    should be what the model is sure of, not a guess."""
    line_min_joint_prob: float = 0.4
    """... and before a greedy token that would leave the line's probability (the product of its
    greedy tokens' probabilities after the identifier) below this; 0: no such limit. With
    ``line_min_prob`` 0.35, chosen on the tune packages (6 files x 8,000 characters per language,
    in process, 2026-12-02): against 0.25 and no joint limit, characters gained 13,859 -> 13,930,
    wrong lines shown 1,081 -> 735; 0.55 alone 13,705 and 627; 0.35 with 0.3 14,046 and 815. On
    the eval packages 15,401 -> 15,090 characters, 1,259 -> 905 wrong lines."""
    line_match_min_chars: int = 3
    """The rest-of-line candidate comes first from the earlier lines of the document that start with
    the same text as the cursor's line (at least this many characters of it, the word included;
    ``engine.continuation.line_from_document``); 0: from the network only. Since those lines must
    agree, short keys pay: eval packages (6 files x 8,000 characters per language, in process)
    12,649 characters gained at 10, 13,104 at 8, 13,596 at 6, 15,020 at 4, 15,335 at 3 (62.5% ->
    69.4% of the lines shown right); tune packages 5,487 at 10, 6,137 at 4, 6,246 at 3, 6,212 at 2."""
    backend: str = "auto"
    """``"numba"`` (decode steps on the shipped 6-bit codes, dequantization fused; ~3x less memory
    traffic than float32), ``"numpy"`` (float32, the fallback), ``"mlx"`` (MLX, Metal on Apple
    Silicon) or ``"auto"``: mlx on macOS arm64, numba elsewhere when it is installed, else numpy
    (MLX-cpu costs ~30-120 us per op here). ``LAYA_BACKEND`` in the environment overrides it."""
    prior_weight: float = 0.5
    """Weight of the n-gram log-prior against the network's log-probability in a candidate's score."""
    mix: str = "linear"
    """How the network and the n-gram prior combine: ``"linear"`` interpolation of probabilities
    (``net_weight``) or ``"product"`` of experts (``prior_weight``)."""
    net_weight: float = 0.3
    """Weight of the network in linear interpolation."""
    cache_weight: float = 0.4
    """Weight of the neural cache (Grave et al., 2017) in the next-token distribution: window
    positions whose final hidden state resembles the current one vote for the token that followed
    them. Measured on held-out tuning files: +0.9 points of keystrokes saved (54.3% -> 55.2%), with
    the first release's network. The code variant sets 0.2 since 2026-12-03 (the step-13,300
    network, which needs the cache less): tune packages (6 files x 8,000 characters per language,
    in process, no workspace) 0.4 -> 0.2: C 46.1 -> 46.0, Go 53.4 -> 53.9, JavaScript 53.5 -> 53.8,
    Python 57.1 -> 57.3, Rust 55.9 -> 56.1, TypeScript 50.8 -> 51.0% (0.0 / 0.1 / 0.3: 52.93 /
    53.02 / 52.93%, the six languages' mean; 0.2: 53.02%); then the eval packages, unseen by that choice: C
    53.7 -> 53.9, Go 51.0 -> 51.5, JavaScript 52.9 -> 53.1, Python 58.9 -> 59.4, Rust 55.7 ->
    56.1, TypeScript 54.9 -> 55.2%, with the workspace +0.1 to +0.5, ghost-text characters +3.3%."""
    rerank: bool = True
    """Re-rank the engine's best candidates with the model folder's learned re-ranker
    (``rerank.json``, ``engine.rerank``), when it has one. Since 2026-12-03 (night), a two-layer
    network fitted on the tune packages (48 files x 8,000 characters per language, typed alone and
    with their package as the workspace: 472,468 decisions). Keystrokes saved, eval packages (6
    files x 8,000 characters per language, in process, without / with the workspace), off ->
    linear (the first file, 2026-12-03 evening) -> network: C 53.9 -> 54.2 -> 54.8 / 66.6 -> 67.6
    -> 68.7, Go 51.5 -> 53.2 -> 54.5 / 58.2 -> 59.6 -> 61.2, JavaScript 53.1 -> 53.9 -> 55.3 / 56.2
    -> 57.5 -> 58.7, Python 59.4 -> 59.5 -> 60.1 / 62.7 -> 62.9 -> 63.8, Rust 56.1 -> 56.5 -> 57.1 /
    59.4 -> 60.0 -> 60.6, TypeScript 55.2 -> 56.0 -> 57.1 / 66.4 -> 66.9 -> 68.4%. Cost: a network
    decision 1.20x, a keystroke inside a word +0.2 ms at the median (``laya bench --ablate
    rerank``, interleaved). Since 2026-12-04 it also sees what the user typed past
    (``rerank_passed_over``), fitted on 667,381 decisions of 398 tune files with the ones after
    a word's first item was right weighed 0.3: in process, without / with the workspace, C 57.4 /
    70.7, Go 57.2 / 63.8, JavaScript 57.4 / 60.7, Python 61.1 / 64.9, Rust 58.8 / 62.0,
    TypeScript 59.4 / 70.6% (README, "Measured numbers")."""
    rerank_passed_over: bool = True
    """Give the re-ranker the ``passed_over`` feature (``engine.rerank``): which candidates were
    the first item at an earlier keystroke of the word being typed, and typed past. Off: 0 for
    every candidate, as after a jump."""
    cache_theta: float = 0.3
    """Sharpness of the neural cache's similarity (``exp(theta * h_i . h)``)."""
    word_prior_alpha: float = 0.5
    """Additive smoothing of identifier counts inside one first token's group."""
    prior_weights: dict[str, float] = field(default_factory=lambda: {
        "doc3": 0.2, "doc2": 0.15, "doc1": 0.15, "win": 0.1, "cor3": 0.15, "cor2": 0.1, "cor1": 0.15,
        "recent": 0.1, "long": 0.4, "wlong": 0.4, "seg": 0.005, "expect": 8.0, "from": 2.0})
    """Interpolation weights of the n-gram prior (Jelinek-Mercer smoothing): document trigram,
    bigram and unigram, the context window's identifiers, corpus trigram, bigram and unigram (the
    corpus includes the workspace). They should sum to 1; ``recent`` comes on top: the identifiers
    of the last ``engine.context.RECENT_LINES`` complete lines share it (tune packages, 6 files x
    6,000 characters per language: keystrokes saved 48.44 -> 48.96% over all six languages; 3, 6
    and 10 lines and 0.05-0.2 all within 0.2 points of that). ``long`` also comes on top: the
    document's long-context matches (``engine.pieces.DocLexicon.followers``; tune packages:
    48.96 -> 49.96%, 0.2-0.8 all within 0.15 points of that), and ``wlong`` too: the workspace
    files' long-context matches (tune packages with the workspace: 56.52 -> 57.91%), and ``seg``:
    compound candidates, the typed head of an identifier plus a segment of the document's or the
    corpus's identifiers (``engine.compounds``; tune packages 50.10 -> 51.87%), and ``expect``:
    right after ``def`` or ``class``, the names the workspace's other Python files import from this
    document's module that it does not define yet (``engine.imports``; tune packages with the
    workspace, Python, 6 files x 8,000 characters: 60.64 -> 62.15%; 0.2 at every word start gave
    61.26%, and the gain grows with the weight up to about 8, where these names lead the list), and
    ``from``: inside a Python ``from M import`` statement, what the training corpus's code and the
    workspace's files import from ``M`` (the model folder's ``imports-python.json``; tune packages,
    Python, 6 files x 8,000 characters: 56.42 -> 56.50%, eval packages 57.64 -> 58.16%; 0.5-8
    within 0.01 of each other), and where ``import``/``from`` name a module, the corpus's module
    names by how often they are imported (56.50 -> 56.61%, 58.16 -> 58.31%); and after an
    imported Go package's dot (``os.``), what the corpus's Go code uses from that package
    (``imports-go.json``, ``engine.go_imports``; with only exported names offered there: tune
    packages, Go, 62.8 -> 63.0%, eval packages 54.5 -> 54.6%)."""
    doc_confidence: float = 1.0
    """A document n-gram context seen ``n`` times gets ``n / (n + doc_confidence)`` of its weight
    (Witten-Bell-style: a context seen often in this document is trusted more)."""
    workspace_weight: float = 1.0
    """The workspace's share of corpus unigram mass when it is merged into a language's lexicon
    (``engine.lexicon.merge_lexicons``): 1 means the workspace's identifiers together weigh as
    much as the whole shipped corpus's."""
    language: dict[str, dict] = field(default_factory=dict)
    """Per-language overrides of the ranking options above (``[language.go]`` tables in the
    variant file), tuned on the ``tune`` packages of that language (``laya eval --split tune``)."""

    def for_language(self, name: str) -> "EngineConfig":
        """This config with the overrides of language ``name`` applied (itself when there are none).

        Raises:
            ValueError: an override names an unknown option or has a wrong type.
        """
        over = self.language.get(name)
        if not over:
            return self
        cached = self.__dict__.setdefault("_per_language", {})
        if name not in cached:
            data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "language"}
            data.update(over)
            try:
                cached[name] = _converter.structure(data, EngineConfig)
            except Exception as e:
                raise ValueError(f"variant {self.name!r}, [language.{name}]: {e}") from e
        return cached[name]


_converter = cattrs.Converter(forbid_extra_keys=True)


def load_variant(name_or_path: str = "code") -> EngineConfig:
    """Read a variant by name (``configs/<name>.toml``) or path.

    Raises:
        FileNotFoundError: no such variant file (the message lists the known variants).
        ValueError: the file has an unknown key or a value of the wrong type.
    """
    path = Path(name_or_path)
    if not path.suffix:
        path = CONFIG_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.toml")))
        raise FileNotFoundError(f"engine variant file {path} does not exist (known variants: {known})")
    data = tomllib.loads(path.read_text())
    data.setdefault("name", path.stem)
    try:
        return _converter.structure(data, EngineConfig)
    except Exception as e:
        raise ValueError(f"{path}: {cattrs.transform_error(e) if isinstance(e, cattrs.BaseValidationError) else e}") from e


def model_path(cfg: EngineConfig) -> Path | None:
    if not cfg.model:
        return None
    p = Path(cfg.model)
    return p if p.is_absolute() else Path(__file__).resolve().parent / p
