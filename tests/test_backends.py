"""The shipped model folder: mlx-lm compatibility, MLX/NumPy logits parity, KV-cache invariants."""

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine import _blas  # noqa: E402

_blas.preload()

import mlx.core as mx  # noqa: E402

from engine.backends import MLXBackend, make_backend  # noqa: E402
from engine.model_io import DEFAULT_MODEL_DIR, load_model  # noqa: E402
from engine.tokenizer import load_tokenizer  # noqa: E402

TOL = 2e-3
"""Max abs logit difference allowed between float paths computing the same 6-bit weights
(float32 throughout; differences come from summation order only)."""

TEXT = "import os\n\n\ndef join_all(parts):\n    return os.path.join(*parts)\n"


@pytest.fixture(scope="module")
def tokens():
    return load_tokenizer(DEFAULT_MODEL_DIR / "tokenizer.json").encode(TEXT).ids


@pytest.fixture(scope="module")
def numpy_backend():
    return make_backend(DEFAULT_MODEL_DIR, "numpy", 256)


@pytest.fixture(scope="module")
def numba_backend():
    return make_backend(DEFAULT_MODEL_DIR, "numba", 256)


def _backend(kind, numpy_backend, numba_backend):
    return {"numpy": numpy_backend, "numba": numba_backend}.get(kind) or MLXBackend(DEFAULT_MODEL_DIR, 256)


def test_mlx_lm_load_opens_the_folder_with_the_same_logits(tokens):
    mlx_lm = pytest.importorskip("mlx_lm")
    ref_model, _ = mlx_lm.load(str(DEFAULT_MODEL_DIR))
    ours, config = load_model(DEFAULT_MODEL_DIR)
    assert config["quantization"] == {"group_size": 64, "bits": 6}
    x = mx.array([tokens])
    a = np.array(ref_model(x))
    b = np.array(ours(x))
    assert a.shape == b.shape == (1, len(tokens), config["vocab_size"])
    assert np.abs(a - b).max() < TOL


def test_numpy_backend_matches_mlx_logits(tokens, numpy_backend):
    ours, _ = load_model(DEFAULT_MODEL_DIR)
    ref = np.array(ours(mx.array([tokens])))[0]
    numpy_backend.reset()
    h = numpy_backend.forward(tokens, all_positions=True)
    got = np.stack([numpy_backend.logits(v) for v in h])
    assert np.abs(got - ref).max() < TOL
    # and the argmax (what greedy decoding uses) is identical everywhere
    assert (got.argmax(-1) == ref.argmax(-1)).mean() > 0.99


@pytest.mark.parametrize("kind", ["numpy", "numba", "mlx"])
def test_kv_reuse_and_trim_equal_a_fresh_prefill(tokens, kind, numpy_backend, numba_backend):
    b = _backend(kind, numpy_backend, numba_backend)
    b.reset()
    fresh = b.logits(b.forward(tokens))
    # incremental: prefix, then one token at a time
    b.reset()
    b.forward(tokens[:5])
    for t in tokens[5:]:
        h = b.forward([t])
    assert b.offset == len(tokens)
    assert np.abs(b.logits(h) - fresh).max() < TOL
    # rollback: extend with junk, trim it, re-prefill the real tail
    b.forward([7, 8, 9])
    assert b.trim(3 + 4) == 7
    assert b.offset == len(tokens) - 4
    h = b.forward(tokens[-4:])
    assert np.abs(b.logits(h) - fresh).max() < TOL
    b.reset()
    assert b.offset == 0


def test_pool_head_equals_full_head_rows(tokens, numpy_backend):
    numpy_backend.reset()
    h = numpy_backend.forward(tokens)
    ids = np.array([3, 17, 400, 4095])
    assert np.allclose(numpy_backend.logits(h, ids), numpy_backend.logits(h)[ids], atol=1e-5)


def test_cache_capacity_is_enforced(numpy_backend):
    numpy_backend.reset()
    with pytest.raises(ValueError, match="KV cache holds"):
        numpy_backend.forward(list(range(300)))


@pytest.mark.parametrize("kind", ["numpy", "numba", "mlx"])
def test_context_shift_moves_keys_exactly(tokens, kind, numpy_backend, numba_backend):
    """Layer-0 keys/values depend only on the token and its position, so after dropping the first
    ``d`` tokens and re-rotating, they must equal a fresh prefill of the kept tokens."""
    b = _backend(kind, numpy_backend, numba_backend)
    d = 7

    def layer0(backend, n):
        if kind != "mlx":
            return backend.kT[0, :, :, :n].transpose(0, 2, 1).copy(), backend.v[0, :, :n].copy()
        c = backend.cache[0]
        return np.array(c.keys[0, :, :n]), np.array(c.values[0, :, :n])

    b.reset()
    b.forward(tokens)
    b.shift(d)
    assert b.offset == len(tokens) - d
    k_shift, v_shift = layer0(b, len(tokens) - d)
    b.reset()
    b.forward(tokens[d:])
    k_fresh, v_fresh = layer0(b, len(tokens) - d)
    assert np.abs(k_shift - k_fresh).max() < 1e-4
    assert np.abs(v_shift - v_fresh).max() < 1e-5
    b.reset()


@pytest.mark.parametrize("kind", ["numpy", "numba", "mlx"])
def test_final_hidden_states_are_kept_per_position(tokens, kind, numpy_backend, numba_backend):
    """The neural cache reads ``hid[i]``, the final hidden state after token ``i``."""
    b = _backend(kind, numpy_backend, numba_backend)
    b.reset()
    all_h = b.forward(tokens[:10], all_positions=True)
    last = b.forward(tokens[10:11])
    assert np.allclose(b.hid[:10], all_h, atol=1e-6)
    assert np.allclose(b.hid[10], last, atol=1e-6)
    b.shift(4)
    assert np.allclose(b.hid[:7], np.concatenate([all_h[4:], last[None]]), atol=1e-6)
    b.reset()
