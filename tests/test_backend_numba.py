"""The numba backend (6-bit codes, fused dequantization) against the float32 reference, and the
``Backend`` protocol every backend implements."""

import inspect
import textwrap

import numpy as np
import pytest

from engine.backends import Backend, MLXBackend, make_backend
from engine.model_io import DEFAULT_MODEL_DIR
from engine.tokenizer import load_tokenizer

# Real code nobody here wrote, and not in the training corpus's held-out packages' way: the stdlib's
# textwrap (the corpus has the stdlib, so this checks arithmetic, not generalisation).
TEXT = open(inspect.getsourcefile(textwrap), encoding="utf-8").read()


@pytest.fixture(scope="module")
def pair():
    return make_backend(DEFAULT_MODEL_DIR, "numpy", 600), make_backend(DEFAULT_MODEL_DIR, "numba", 600)


@pytest.fixture(scope="module")
def ids():
    return load_tokenizer(DEFAULT_MODEL_DIR / "tokenizer.json").encode(TEXT).ids


@pytest.mark.parametrize("kind", ["numpy", "numba", "mlx"])
def test_every_backend_implements_the_protocol(kind):
    b = make_backend(DEFAULT_MODEL_DIR, kind, 64) if kind != "mlx" else MLXBackend(DEFAULT_MODEL_DIR, 64)
    assert isinstance(b, Backend)
    assert b.name == kind and b.capacity == 64 and b.offset == 0
    assert b.config["quantization"] == {"group_size": 64, "bits": 6}
    assert b.hid.shape == (64, b.args.hidden_size)
    for name in ("forward", "logits", "trim", "reset", "shift", "swap"):
        assert callable(getattr(b, name))


def test_step_by_step_logits_match_float32(pair, ids):
    """Decode steps on the codes vs float32 NumPy: same 6-bit weights, so the difference is
    summation order only; top-1 agrees at every position."""
    ref, q = pair
    ref.reset()
    q.reset()
    ref.forward(ids[:100])
    q.forward(ids[:100])
    diffs, agree = [], []
    for t in ids[100:400]:
        a = ref.logits(ref.forward([t]))
        b = q.logits(q.forward([t]))
        diffs.append(np.abs(a - b).max())
        agree.append(a.argmax() == b.argmax())
    assert max(diffs) < 2e-3
    assert np.mean(agree) == 1.0
    assert np.allclose(ref.hid[:400], q.hid[:400], atol=1e-4)


def test_few_token_forward_equals_prefill(pair, ids):
    """Up to STEP_MAX new tokens run through the compiled (batched) kernels; more through the float32 prefill."""
    _, q = pair
    q.reset()
    full = q.forward(ids[:40], all_positions=True)
    q.reset()
    q.forward(ids[:34])
    few = q.forward(ids[34:40], all_positions=True)
    assert few.shape == (6, q.args.hidden_size)
    assert np.abs(few - full[34:]).max() < 1e-4


def test_several_new_tokens_equal_single_steps(pair, ids):
    """Several new tokens in one ``forward`` give each position (and the KV cache) what one
    ``forward`` per token gives."""
    _, q = pair
    q.reset()
    q.forward(ids[:30])
    batched = q.forward(ids[30:47], all_positions=True)
    cached_batched = (q.kT[:, :, :, :47].copy(), q.v[:, :, :47].copy())
    q.reset()
    q.forward(ids[:30])
    single = np.stack([q.forward([t]) for t in ids[30:47]])
    assert np.abs(batched - single).max() < 1e-4
    assert np.abs(cached_batched[0] - q.kT[:, :, :, :47]).max() < 1e-4
    assert np.abs(cached_batched[1] - q.v[:, :, :47]).max() < 1e-4


def test_swap_keeps_both_caches(pair, ids):
    _, q = pair
    q.reset()
    h1 = q.forward(ids[:50])
    first = q.swap()
    assert q.offset == 0
    q.forward(ids[200:230])
    second = q.swap(first)
    assert q.offset == 50
    q.trim(1)
    assert np.abs(q.forward(ids[49:50]) - h1).max() < 1e-4
    q.swap(second)
    assert q.offset == 30


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="numba"):
        make_backend(DEFAULT_MODEL_DIR, "tpu", 8)


def test_groups_the_kernels_cannot_take_are_refused_by_name():
    """The batched products take 8 code rows per pass: a model quantized in groups of 4 inputs (the same
    weights, each scale repeated) is refused with a clear error, not computed wrong."""
    from engine.backend_numba import NumbaBackend, QuantWeights
    from engine.backends import dequantized_numpy_weights

    codes: dict = {}
    args, config, weights = dequantized_numpy_weights(DEFAULT_MODEL_DIR, codes)
    NumbaBackend(args, weights, codes, 8, config)  # as shipped (groups of 64): fine
    name = "model.layers.2.mlp.down_proj.weight"
    w = codes[name]
    g = w.codes.shape[1] // w.scales.shape[1]
    codes[name] = QuantWeights(w.codes, np.repeat(w.scales, g // 4, axis=1), np.repeat(w.biases, g // 4, axis=1))
    with pytest.raises(ValueError, match="multiple of 8 inputs"):
        NumbaBackend(args, weights, codes, 8, config)
