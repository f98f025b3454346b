"""The exported GGUF through llama.cpp itself (llama-cpp-python, ``logits_all``) against Laya's NumPy
backend, on the same token ids of real held-out text.

Opt-in: llama-cpp-python builds llama.cpp from source (~13 minutes on the 2-core dev machine), so it
is only in the ``peers`` extra, never in ``test`` or CI; without it this file is skipped, saying why.
The same checks without llama.cpp (a NumPy re-implementation of its graph) are in
``test_gguf_export.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gguf", reason="the gguf package is not installed (pip install -e '.[test]')")
llama_cpp = pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed (opt-in, ~13 min build: "
                        "CMAKE_ARGS='-DGGML_NATIVE=ON' pip install -e '.[peers]')")

from laya_tools.bench_peers import make_gguf_files  # noqa: E402
from laya_tools.export_gguf import export_gguf  # noqa: E402
from tests.gguf_reference import held_out_ids, laya_logits  # noqa: E402

N = 511  # one llama.cpp context of 512 (the model's window)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gguf")
    out = make_gguf_files(None, tmp)  # f32, and Q8_0 by llama.cpp's own quantizer
    out["gguf Q8_0"] = export_gguf(None, tmp / "laya-gguf-q8_0.gguf", "q8_0")
    return out


@pytest.fixture(scope="module")
def held_out():
    ids = held_out_ids(N)
    return ids, laya_logits(ids)


def llama_cpp_logits(path, ids, kv_f32: bool = True) -> np.ndarray:
    kw = {"type_k": 0, "type_v": 0} if kv_f32 else {}  # GGML_TYPE_F32 (default: an f16 KV cache)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_batch=512, n_threads=2, logits_all=True,
                          verbose=False, **kw)
    llm.eval(ids)
    out = np.array(llm.scores[: len(ids)], dtype=np.float32)
    llm.close()
    return out


def compare(got, ref) -> tuple[float, float]:
    return float(np.abs(got - ref).max()), float(np.mean(got.argmax(-1) == ref.argmax(-1)))


@pytest.mark.parametrize("kind, kv_f32, max_diff, min_top1", [
    ("f32", True, 1e-2, 0.99),    # the same numbers: differences are summation order only
    ("f32", False, 0.1, 0.99),    # llama.cpp's default f16 KV cache
    ("Q8_0", True, 1.0, 0.97),    # 8-bit re-quantization of the 6-bit weights (0.32 with the
                                  # first release's weights, 0.63 with the six-language ones)
])
def test_llama_cpp_matches_laya(files, held_out, kind, kv_f32, max_diff, min_top1):
    ids, ref = held_out
    diff, top1 = compare(llama_cpp_logits(files[kind], ids, kv_f32), ref)
    print(f"llama.cpp {kind} (KV {'f32' if kv_f32 else 'f16'}) vs Laya numpy over {len(ids)} held-out tokens: "
          f"max |logit difference| {diff:.2e}, top-1 agreement {top1:.2%}")
    assert diff < max_diff and top1 >= min_top1


def test_gguf_package_q8_0_is_llama_cpps(files, held_out):
    """Q8_0 written by ``laya export --gguf-type q8_0`` (the gguf package) runs as llama.cpp's own."""
    ids, _ = held_out
    a = llama_cpp_logits(files["Q8_0"], ids[:128])
    b = llama_cpp_logits(files["gguf Q8_0"], ids[:128])
    assert float(np.abs(a - b).max()) < 1e-3
