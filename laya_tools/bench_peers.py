"""``laya bench --peers``: Laya's backends against llama.cpp on the same weights and token ids.

Workload (issue 8): 300 tokens of a real file cached; append 1 (or 3) new tokens, get the last
token's logits over the whole vocabulary, roll the cache back to 300 tokens. 100 warm-up, then 1000
timed decisions per runner and size. Every runner does decision ``i`` before any does ``i + 1``
(interleaved, so a noisy machine slows all of them alike), in a new random order each time (a
runner always run right after the same other one finds its weights pushed out of the caches by
that one's; a random order spreads this over all of them alike), and ratios are medians divided
by llama.cpp Q8_0 on 1 thread.

llama.cpp runs through llama-cpp-python (the opt-in ``peers`` extra, built from source) on the model
exported by :mod:`laya_tools.export_gguf`: float32 (the 6-bit numbers dequantized) and Q8_0 (quantized
by llama.cpp's own ``llama_model_quantize`` from the float32 file), each on 1 and 2 threads.
Rollback is ``llama_memory_seq_rm`` (``LlamaContext.kv_cache_seq_rm`` in the Python API). Laya's
backends run ``forward`` + ``logits`` + ``trim``.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CACHED = 300
"""Tokens in the cache before each decision."""
SIZES = (1, 3)
"""New tokens per decision."""


class LlamaCppRunner:
    """One llama.cpp context on a GGUF file, driven through llama-cpp-python's context and batch."""

    def __init__(self, path: Path, threads: int, n_ctx: int = 512):
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads,
                         n_threads_batch=threads, logits_all=False, verbose=False)
        self.n_vocab = self.llm.n_vocab()
        self.offset = 0

    def prefill(self, ids) -> None:
        self.llm.reset()
        self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        self.llm.eval(list(ids))
        self.offset = len(ids)

    def decide(self, new) -> np.ndarray:
        """Append ``new`` after the cache, return the last token's ``(vocab,)`` logits, roll back."""
        batch, ctx = self.llm._batch, self.llm._ctx
        batch.set_batch(new, n_past=self.offset, logits_all=False)
        ctx.decode(batch)
        out = np.ctypeslib.as_array(ctx.get_logits_ith(-1), shape=(self.n_vocab,)).copy()
        ctx.kv_cache_seq_rm(-1, self.offset, -1)
        return out


class LayaRunner:
    """A Laya backend (``numpy``, ``numba``) on the shipped model folder."""

    def __init__(self, folder: Path, kind: str, capacity: int = 512):
        from engine.backends import make_backend

        self.b = make_backend(folder, kind, capacity)

    def prefill(self, ids) -> None:
        self.b.reset()
        self.b.forward(list(ids))

    def decide(self, new) -> np.ndarray:
        out = self.b.logits(self.b.forward(new))
        self.b.trim(len(new))
        return out


def make_gguf_files(folder: Path | None, out_dir: Path) -> dict[str, Path]:
    """``{"f32": path, "Q8_0": path}``: the float32 export, and llama.cpp's own Q8_0 of it (the
    ``gguf`` package's Q8_0 writer when ``llama_model_quantize`` fails)."""
    import logging

    import llama_cpp

    from .export_gguf import export_gguf

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp logs every tensor at INFO
    logging.getLogger("gguf").setLevel(logging.WARNING)

    f32 = export_gguf(folder, out_dir / "laya-f32.gguf", "f32")
    q8 = out_dir / "laya-q8_0.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.nthread = 1
    if llama_cpp.llama_model_quantize(str(f32).encode(), str(q8).encode(), params) != 0:
        print("llama_model_quantize failed: Q8_0 written by the gguf package instead", file=sys.stderr)
        export_gguf(folder, q8, "q8_0")
    return {"f32": f32, "Q8_0": q8}


def run(model: str | None, backends: list[str], warmup: int, runs: int, text: str) -> tuple[dict, dict]:
    """Time every runner on the workload and print the table.

    Returns:
        ``({runner: {"+n": summary, "top1_vs_llama_cpp_f32": share}}, {"runner, +n": [seconds]})``.
    """
    from .bench import summary
    from engine.model_io import DEFAULT_MODEL_DIR
    from engine.tokenizer import load_tokenizer

    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:
        raise SystemExit("laya bench --peers needs llama-cpp-python (~13 min to build): "
                         "CMAKE_ARGS='-DGGML_NATIVE=ON' pip install -e '.[peers]'") from e
    folder = Path(model) if model else DEFAULT_MODEL_DIR
    ids = load_tokenizer(folder / "tokenizer.json").encode(text).ids
    spread = 100  # decision i appends the tokens that follow position CACHED + i % spread
    assert len(ids) >= CACHED + spread + max(SIZES), f"the text has only {len(ids)} tokens"
    prefix = ids[:CACHED]
    runners: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = make_gguf_files(model, Path(tmp))
        for kind in ("Q8_0", "f32"):
            for threads in (1, 2):
                runners[f"llama.cpp {kind}, {threads} thread{'s' if threads > 1 else ''}"] = \
                    LlamaCppRunner(files[kind], threads)
        for b in backends:
            runners[f"Laya {b}"] = LayaRunner(folder, b)
        for r in runners.values():
            r.prefill(prefix)
        # parity on this workload: top-1 of every runner against llama.cpp f32 on the same ids
        ref_name = "llama.cpp f32, 1 thread"
        agree = {name: 0 for name in runners}
        checks = 50
        for i in range(checks):
            new = ids[CACHED + i : CACHED + i + 1]
            ref = runners[ref_name].decide(new)
            for name, r in runners.items():
                agree[name] += int(np.argmax(r.decide(new)) == np.argmax(ref))
        times = {name: {n: [] for n in SIZES} for name in runners}
        rng = random.Random(0)
        for i in range(warmup + runs):
            j = CACHED + i % spread
            for n in SIZES:
                new = ids[j : j + n]
                order = list(runners.items())
                rng.shuffle(order)  # no runner always follows the same one (whose weights left the caches)
                for name, r in order:
                    t = time.perf_counter()
                    r.decide(new)
                    dt = time.perf_counter() - t
                    if i >= warmup:
                        times[name][n].append(dt)
        runners.clear()
    base = "llama.cpp Q8_0, 1 thread"
    print(f"\n{CACHED} tokens cached; append +1 / +3 tokens, logits, roll back; {warmup} warm-up, {runs} timed, "
          f"runners interleaved; ratio = median / median of {base}")
    out: dict = {}
    head = f"{'runner':26s}" + "".join(f" | +{n}: median    p90    p99  ratio" for n in SIZES)
    print(head + "\n" + "-" * len(head))
    for name, by in times.items():
        row = f"{name:26s}"
        out[name] = {"top1_vs_llama_cpp_f32": agree[name] / checks}
        for n in SIZES:
            s = summary(by[n])
            s["ratio_vs_q8_0_1t"] = s["p50"] / float(np.median(times[base][n]) * 1e3)
            out[name][f"+{n}"] = s
            row += f" | {s['p50']:9.3f} {s['p90']:6.3f} {s['p99']:6.3f} {s['ratio_vs_q8_0_1t']:5.2f}x"
        print(row)
    print("(ms; top-1 of the next token vs llama.cpp f32 over 50 decisions: "
          + ", ".join(f"{k} {v['top1_vs_llama_cpp_f32']:.0%}" for k, v in out.items()) + ")")
    return out, {f"{name}, +{n}": by[n] for name, by in times.items() for n in SIZES}
