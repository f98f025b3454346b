"""``laya bench --kernels``: the projections of one decode step on each CPU option, side by side.

One decode step of the shipped model multiplies one token's activations by 16 matrices (4 layers of
``q|k|v`` 768x256, ``o`` 256x256, ``gate|up`` 1024x256, ``down`` 256x512) and, once per context,
the 4096x256 LM head. Each option below computes exactly those products from the same 6-bit model,
interleaved round by round (so background load hits all alike); missing packages are skipped:

* ``numpy-f32``: dequantized float32 matrices, OpenBLAS ``sgemv`` (the NumPy backend; 14.7 MB).
* ``numba-u8``: 6-bit codes one per byte, dequantization fused (``engine.backend_numba``; 3.7 MB).
* ``onnxruntime``: ``com.microsoft.MatMulNBits`` (8-bit codes, block 64, uint8 zero points: the
  weights re-quantized to 8 bits, as its CPU kernel requires), one session per matrix (ONNX
  Runtime's quantized MatMul for LLM weights).
* ``mlx-cpu``: ``mx.quantized_matmul`` on 6-bit weights (MLX's CPU kernels; ``mx.quantize`` of the
  dequantized matrices picks its own scales, hence its max|diff|).

Prints per-step time (median/p90/p99 over rounds), bytes streamed and the max abs difference from
the float32 products. Then the same 16 products for several new tokens at once (a word's end: 3;
the short window after a jump: 18), where the numba backend runs ``_qgemm`` (each code row
converted once for all tokens) and the NumPy backend an OpenBLAS ``sgemm``.
"""

from __future__ import annotations

import time

import numpy as np


def _matrices(folder):
    from engine.backends import dequantized_numpy_weights

    codes: dict = {}
    args, config, weights = dequantized_numpy_weights(folder, codes)
    mats = []  # (name, float32 (out, in), QuantWeights)
    for i in range(args.num_hidden_layers):
        p = f"model.layers.{i}."
        from engine.backend_numba import QuantWeights

        groups = {"qkv": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "o": ["self_attn.o_proj"],
                  "gate_up": ["mlp.gate_proj", "mlp.up_proj"], "down": ["mlp.down_proj"]}
        for g, names in groups.items():
            q = QuantWeights.concat([codes[p + n + ".weight"] for n in names])
            w = np.concatenate([weights[p + n + ".weight"] for n in names])
            mats.append((f"{i}.{g}", w, q))
    head = "model.embed_tokens.weight"
    return config, mats, (weights[head], codes[head])


def _numpy_f32(mats, head):
    ws = [np.ascontiguousarray(w.T) for _, w, _ in mats]
    hw = np.ascontiguousarray(head[0])

    def step(xs):
        return [x @ w for x, w in zip(xs, ws)]

    return step, (lambda h: hw @ h), sum(w.nbytes for w in ws) + hw.nbytes


def _numba_u8(mats, head):
    from engine.kernels_numba import _qgemv

    ts = [q.transposed() for _, _, q in mats]
    ht = head[1].transposed()
    outs = [np.empty(t[0].shape[1], np.float32) for t in ts]
    hout = np.empty(ht[0].shape[1], np.float32)

    def step(xs):
        for x, t, o in zip(xs, ts, outs):
            _qgemv(*t, x, o)
        return outs

    def lm(h):
        _qgemv(*ht, h, hout)
        return hout

    return step, lm, sum(a.nbytes for t in ts for a in t) + sum(a.nbytes for a in ht)


def _onnxruntime(mats, head):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1

    def session(q):
        n_out, n_in = q.codes.shape
        gs = n_in // q.scales.shape[1]
        # ORT's CPU kernel takes 8-bit codes only with uint8 zero points, and the 6-bit model's
        # bias is not an integer multiple of its scale: re-quantize to 8 bits per block of 64
        # (asymmetric, w = (code - zp) * s); the error this adds shows in max|diff|.
        w = (q.codes.astype(np.float32).reshape(n_out, -1, gs) * q.scales[..., None] + q.biases[..., None])
        lo, hi = np.minimum(w.min(-1), 0), np.maximum(w.max(-1), 0)
        sc = np.maximum((hi - lo) / 255, 1e-12).astype(np.float32)
        zp = np.clip(np.round(-lo / sc), 0, 255).astype(np.uint8)
        blob = np.clip(np.round(w / sc[..., None]) + zp[..., None], 0, 255).astype(np.uint8)
        q = type(q)(q.codes, sc, sc)
        node = helper.make_node("MatMulNBits", ["x", "w", "s", "zp"], ["y"], domain="com.microsoft",
                                K=n_in, N=n_out, bits=8, block_size=gs)
        g = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n_in])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n_out])],
                              [numpy_helper.from_array(blob, "w"), numpy_helper.from_array(q.scales.reshape(-1), "s"),
                               numpy_helper.from_array(zp.reshape(-1), "zp")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
        return ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])

    sess = [session(q) for _, _, q in mats]
    hs = session(head[1])

    def step(xs):
        return [s.run(None, {"x": x[None]})[0][0] for x, s in zip(xs, sess)]

    nbytes = sum(q.codes.nbytes + 2 * q.scales.nbytes for _, _, q in mats) + head[1].codes.nbytes
    return step, (lambda h: hs.run(None, {"x": h[None]})[0][0]), nbytes


def _mlx_cpu(mats, head, config):
    import mlx.core as mx

    q = config["quantization"]
    mx.set_default_device(mx.cpu)

    def pack(qw):
        w = mx.array(qw.codes.astype(np.float32) * np.repeat(qw.scales, qw.codes.shape[1] // qw.scales.shape[1], 1)
                     + np.repeat(qw.biases, qw.codes.shape[1] // qw.biases.shape[1], 1))
        return mx.quantize(w, group_size=q["group_size"], bits=q["bits"])

    packed = [pack(qw) for _, _, qw in mats]
    hp = pack(head[1])

    def mm(x, p):
        y = mx.quantized_matmul(mx.array(x[None]), *p, transpose=True, group_size=q["group_size"], bits=q["bits"])
        return np.array(y)[0]

    def step(xs):
        return [mm(x, p) for x, p in zip(xs, packed)]

    return step, (lambda h: mm(h, hp)), sum(a.nbytes for p in packed for a in p) + sum(a.nbytes for a in hp)


def main(folder, rounds: int = 300, warmup: int = 30) -> dict:
    """Time each option's step projections and LM head; print a table; return the numbers."""
    config, mats, head = _matrices(folder)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(w.shape[1]).astype(np.float32) for _, w, _ in mats]
    h = rng.standard_normal(head[0].shape[1]).astype(np.float32)
    ref = [w @ x for (_, w, _), x in zip(mats, xs)]
    ref_head = head[0] @ h
    makers = {"numpy-f32": lambda: _numpy_f32(mats, head), "numba-u8": lambda: _numba_u8(mats, head),
              "onnxruntime": lambda: _onnxruntime(mats, head), "mlx-cpu": lambda: _mlx_cpu(mats, head, config)}
    opts = {}
    for name, make in makers.items():
        try:
            opts[name] = make()
        except ImportError as e:
            print(f"  {name}: skipped ({e.name} not installed)")
        except Exception as e:  # noqa: BLE001 - an option that fails to build is reported, not fatal
            print(f"  {name}: skipped ({type(e).__name__}: {e})")
    times = {n: {"step": [], "head": []} for n in opts}
    err = {}
    for r in range(warmup + rounds):
        for name, (step, lm, _) in opts.items():
            t = time.perf_counter()
            ys = step(xs)
            t1 = time.perf_counter()
            yh = lm(h)
            t2 = time.perf_counter()
            if r >= warmup:
                times[name]["step"].append(t1 - t)
                times[name]["head"].append(t2 - t1)
            elif r == 0:
                err[name] = max(max(float(np.abs(y - z).max()) for y, z in zip(ys, ref)),
                                float(np.abs(yh - ref_head).max()))
    out = {}
    base = np.median(times["numpy-f32"]["step"]) if "numpy-f32" in times else None
    print(f"one decode step's 16 projections and the LM head, {rounds} interleaved rounds after {warmup} warm-up")
    print(f"{'option':12s} {'MB':>6s} {'step p50':>9s} {'p90':>7s} {'p99':>7s} {'head p50':>9s} {'vs f32':>7s} {'max|diff|':>10s}")
    for name, (_, _, nbytes) in opts.items():
        s = np.asarray(times[name]["step"]) * 1e3
        hh = np.asarray(times[name]["head"]) * 1e3
        ratio = base / np.median(times[name]["step"]) if base is not None else float("nan")
        print(f"{name:12s} {nbytes / 1e6:6.2f} {np.median(s):7.3f}ms {np.percentile(s, 90):7.3f} "
              f"{np.percentile(s, 99):7.3f} {np.median(hh):7.3f}ms {ratio:6.2f}x {err[name]:10.2e}")
        out[name] = {"bytes": nbytes, "step_ms": _pcts(s), "head_ms": _pcts(hh), "max_abs_diff": err[name]}
    return out


def batched(folder, rounds: int = 200, warmup: int = 20, sizes=(3, 18)) -> dict:
    """Time the step's 16 products for ``sizes`` new tokens at once: numba's ``_qgemm`` on the
    codes against NumPy's float32 ``sgemm``, interleaved round by round; prints and returns ms."""
    _, mats, _ = _matrices(folder)
    try:
        from engine.kernels_numba import _qgemm
    except ImportError as e:
        print(f"  batched products: skipped ({e.name} not installed)")
        return {}
    rng = np.random.default_rng(0)
    ts = [q.transposed() for _, _, q in mats]
    ws = [np.ascontiguousarray(w.T) for _, w, _ in mats]
    xs = {L: [rng.standard_normal((L, w.shape[1])).astype(np.float32) for _, w, _ in mats] for L in sizes}
    outs = {L: [np.empty((L, t[0].shape[1]), np.float32) for t in ts] for L in sizes}
    times = {(name, L): [] for name in ("numpy-f32", "numba-u8") for L in sizes}
    for r in range(warmup + rounds):
        for L in sizes:
            t = time.perf_counter()
            for x, w in zip(xs[L], ws):
                x @ w
            t1 = time.perf_counter()
            for x, q, o in zip(xs[L], ts, outs[L]):
                _qgemm(*q, x, o)
            t2 = time.perf_counter()
            if r >= warmup:
                times[("numpy-f32", L)].append(t1 - t)
                times[("numba-u8", L)].append(t2 - t1)
    print(f"the same 16 products for several new tokens at once, {rounds} interleaved rounds (ms, median / p90 / p99)")
    out = {}
    for (name, L), v in times.items():
        a = np.asarray(v) * 1e3
        print(f"{name:12s} {L:3d} tokens {np.median(a):7.3f} {np.percentile(a, 90):7.3f} {np.percentile(a, 99):7.3f}")
        out[f"{name} x{L}"] = _pcts(a)
    return out


def _pcts(a) -> dict:
    return {"p50": float(np.median(a)), "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99)),
            "n": int(len(a))}
