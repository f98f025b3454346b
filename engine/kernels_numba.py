"""The numba kernels of the plain-CPU decoder (``engine.backend_numba``), JIT-compiled.

``_qgemv`` is the product of a 6-bit-code matrix with a vector, dequantization fused; ``_step`` is
one token through every layer, ``_steps`` several new tokens at once (``_qgemm``).
``engine.kernels`` loads these, or the same functions compiled ahead of time into an extension
module (``build_aot``), which runs without importing numba or LLVM at all: ~100 MB less resident
memory in the server.
"""

from __future__ import annotations

import numba
import numpy as np

@numba.njit(fastmath=True, cache=True, nogil=True)
def _qgemv(codes_t, scales_t, biases_t, x, out):
    """``out = dequant(codes, scales, biases) @ x``, all stored transposed: ``codes_t (n_in, n_out)``
    uint8, ``scales_t/biases_t (n_in / group, n_out)`` float32, ``x (n_in,)`` float32.

    Transposed, the inner loop is an axpy over outputs (no horizontal reduction), which LLVM turns
    into 8-wide FMAs on AVX2: ~2-3x faster than the row-dot form on this CPU (12 vs 23-35 us for
    1024x256). Two or four code rows per pass (as :func:`_qgemm` takes eight) were faster with the
    codes in cache and slower without: one step's 16 products and the LM head 0.252 -> 0.206 /
    0.197 ms warm, 0.316 -> 0.347 / 0.353 ms after 24 MB of other reads (2026-12-03, JIT, median
    of 300); ``laya bench --kernels``, which runs the float32 and MLX options in between, measured
    0.255 -> 0.370 ms, and in-process decisions did not move. A keystroke's step seldom finds the
    codes warm, so it stays one row per pass.
    """
    n_in, n_out = codes_t.shape
    ng = scales_t.shape[0]
    gs = n_in // ng
    acc = np.empty(n_out, np.float32)
    for o in range(n_out):
        out[o] = 0.0
    for g in range(ng):
        for o in range(n_out):
            acc[o] = 0.0
        xs = np.float32(0.0)
        for i in range(g * gs, (g + 1) * gs):
            xi = x[i]
            xs += xi
            for o in range(n_out):
                acc[o] += np.float32(codes_t[i, o]) * xi
        for o in range(n_out):
            out[o] += scales_t[g, o] * acc[o] + biases_t[g, o] * xs


@numba.njit(fastmath=True, cache=True, nogil=True)
def _softmax_unnormed(sc, n, bits):
    """``sc[:n] = exp(sc[:n] - max)``; returns their sum. ``bits`` is int32 scratch of ``>= n``.

    ``exp`` as ``2^k * 2^f``: ``2^f`` on ``[0, 1)`` by its degree-7 Taylor polynomial in ``f ln 2``
    (relative error < 4e-7, float32's own is 6e-8), ``2^k`` by writing the exponent bits. numba
    has no vector ``exp`` without Intel's SVML, so ``np.exp`` ran one scalar call per position:
    0.84 instead of 1.93 us for 512 positions, 16 per token (4 layers x 4 heads)."""
    m = sc[0]
    for p in range(1, n):
        if sc[p] > m:
            m = sc[p]
    scale = bits[:n].view(np.float32)
    for p in range(n):
        y = max((sc[p] - m) * np.float32(1.4426950408889634), np.float32(-126.0))
        k = np.floor(y)
        f = y - k
        sc[p] = np.float32(1.0) + f * (np.float32(0.6931471805599453) + f * (np.float32(0.2402265069591007)
                + f * (np.float32(0.05550410866482158) + f * (np.float32(0.009618129107628477)
                + f * (np.float32(0.0013333558146428443) + f * np.float32(0.00015403530393381609))))))
        bits[p] = (np.int32(k) + 127) << 23
    tot = np.float32(0.0)
    for p in range(n):
        e = sc[p] * scale[p]
        sc[p] = e
        tot += e
    return tot


@numba.njit(fastmath=True, cache=True, nogil=True)
def _rms_scale(x, w, eps, out):
    n = x.shape[0]
    ss = np.float32(0.0)
    for i in range(n):
        ss += x[i] * x[i]
    r = np.float32(1.0) / np.sqrt(ss / n + eps)
    for i in range(n):
        out[i] = x[i] * r * w[i]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _rope_store(qkv, pos, layer, kT, v, cos, sin, n_heads, n_kv):
    """RoPE on one token's q and k at position ``pos`` (features are interleaved (re, im) pairs, see
    NumpyBackend), then its k and v written into the cache there. ``qkv (nq + 2 nk,)``, in place."""
    hd = kT.shape[2]
    nq = n_heads * hd
    nk = n_kv * hd
    for hh in range(n_heads + n_kv):
        base = hh * hd
        for j in range(hd // 2):
            re = qkv[base + 2 * j]
            im = qkv[base + 2 * j + 1]
            c = cos[pos, j]
            s = sin[pos, j]
            qkv[base + 2 * j] = re * c - im * s
            qkv[base + 2 * j + 1] = re * s + im * c
    for kh in range(n_kv):
        for i in range(hd):
            kT[layer, kh, i, pos] = qkv[nq + kh * hd + i]
            v[layer, kh, pos, i] = qkv[nq + nk + kh * hd + i]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _attend(qkv, end, layer, kT, v, n_heads, n_kv, sc, bits, att):
    """One token's attention over cache positions ``0 .. end - 1``: ``att (nq,)`` gets each head's
    weighted values. ``sc`` / ``bits``: scratch of ``>= end``; the head size a multiple of 4.
    Four key rows, and four positions' values, per pass (as :func:`_qgemm` takes eight code rows):
    4 layers over 250 positions 65 -> 52 us with the cache warm, 112 -> 110 us after 24 MB of
    other reads (2026-12-03, JIT, median of 500)."""
    hd = kT.shape[2]
    group = n_heads // n_kv
    for hh in range(n_heads):
        kh = hh // group
        base = hh * hd
        for p in range(end):
            sc[p] = 0.0
        for i in range(0, hd, 4):
            q0 = qkv[base + i]
            q1 = qkv[base + i + 1]
            q2 = qkv[base + i + 2]
            q3 = qkv[base + i + 3]
            for p in range(end):
                sc[p] += (q0 * kT[layer, kh, i, p] + q1 * kT[layer, kh, i + 1, p]
                          + q2 * kT[layer, kh, i + 2, p] + q3 * kT[layer, kh, i + 3, p])
        r = np.float32(1.0) / _softmax_unnormed(sc, end, bits)
        for i in range(hd):
            att[base + i] = 0.0
        e4 = end - end % 4
        for p in range(0, e4, 4):
            w0 = sc[p] * r
            w1 = sc[p + 1] * r
            w2 = sc[p + 2] * r
            w3 = sc[p + 3] * r
            for i in range(hd):
                att[base + i] += (w0 * v[layer, kh, p, i] + w1 * v[layer, kh, p + 1, i]
                                  + w2 * v[layer, kh, p + 2, i] + w3 * v[layer, kh, p + 3, i])
        for p in range(e4, end):
            wgt = sc[p] * r
            for i in range(hd):
                att[base + i] += wgt * v[layer, kh, p, i]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _silu_mul(gu, act):
    """``act[i] = silu(gate[i]) * up[i]`` with ``gu = gate | up``."""
    inter = act.shape[0]
    for i in range(inter):
        g = gu[i]
        act[i] = g / (np.float32(1.0) + np.exp(-g)) * gu[inter + i]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _step(x, off, ln1, qkv_c, qkv_s, qkv_b, o_c, o_s, o_b, ln2, gu_c, gu_s, gu_b, d_c, d_s, d_b,
          norm, kT, v, cos, sin, n_heads, n_kv, eps, out):
    """One token through every layer. ``x (d,)`` is its embedding (updated in place as the residual
    stream); keys/values are written at cache position ``off``; ``out`` gets the final normed state."""
    d = x.shape[0]
    xn = np.empty(d, np.float32)
    qkv = np.empty(qkv_c.shape[2], np.float32)
    att = np.empty(n_heads * kT.shape[2], np.float32)
    tmp = np.empty(d, np.float32)
    gu = np.empty(gu_c.shape[2], np.float32)
    act = np.empty(gu_c.shape[2] // 2, np.float32)
    sc = np.empty(off + 1, np.float32)
    bits = np.empty(off + 1, np.int32)
    for layer in range(qkv_c.shape[0]):
        _rms_scale(x, ln1[layer], eps, xn)
        _qgemv(qkv_c[layer], qkv_s[layer], qkv_b[layer], xn, qkv)
        _rope_store(qkv, off, layer, kT, v, cos, sin, n_heads, n_kv)
        _attend(qkv, off + 1, layer, kT, v, n_heads, n_kv, sc, bits, att)
        _qgemv(o_c[layer], o_s[layer], o_b[layer], att, tmp)
        for i in range(d):
            x[i] += tmp[i]
        _rms_scale(x, ln2[layer], eps, xn)
        _qgemv(gu_c[layer], gu_s[layer], gu_b[layer], xn, gu)
        _silu_mul(gu, act)
        _qgemv(d_c[layer], d_s[layer], d_b[layer], act, tmp)
        for i in range(d):
            x[i] += tmp[i]
    _rms_scale(x, norm, eps, out)


@numba.njit(fastmath=True, cache=True, nogil=True)
def _qgemm(codes_t, scales_t, biases_t, x, out):
    """``out[t] = dequant(codes, scales, biases) @ x[t]`` for each row ``t`` of ``x (L, n_in)``;
    ``out (L, n_out)``; the group size a multiple of 8. As :func:`_qgemv`, with each code row
    converted once for all ``L`` tokens (the weights are streamed once per batch, not once per
    token), eight rows at a time: each accumulator is loaded and stored once per eight products.
    One row at a time this ran at ~14 GMAC/s whatever ``L`` (no faster per token than ``L``
    single steps); eight: 256x768 at 18 tokens 266 -> 114 us, 512x256 158 -> 73 us, 256x1024 336
    -> 177 us (2026-12-03, 2-core AMD EPYC, AVX2, JIT, median of 300 calls; four rows: 131, 83,
    175 us). Unlike :func:`_qgemv`'s, the gain holds with cold caches: a step's 16 products for 3
    tokens 0.72 -> 0.57 ms and for 18 tokens 3.54 -> 1.96 ms after 24 MB of other reads (0.66 ->
    0.45 and 3.41 -> 1.78 ms warm)."""
    n_in, n_out = codes_t.shape
    L = x.shape[0]
    ng = scales_t.shape[0]
    gs = n_in // ng
    acc = np.empty((L, n_out), np.float32)
    c8 = np.empty((8, n_out), np.float32)
    xs = np.empty(L, np.float32)
    for t in range(L):
        for o in range(n_out):
            out[t, o] = 0.0
    for g in range(ng):
        for t in range(L):
            xs[t] = 0.0
            for o in range(n_out):
                acc[t, o] = 0.0
        for i in range(g * gs, (g + 1) * gs, 8):
            for k in range(8):
                for o in range(n_out):
                    c8[k, o] = np.float32(codes_t[i + k, o])
            for t in range(L):
                x0 = x[t, i]
                x1 = x[t, i + 1]
                x2 = x[t, i + 2]
                x3 = x[t, i + 3]
                x4 = x[t, i + 4]
                x5 = x[t, i + 5]
                x6 = x[t, i + 6]
                x7 = x[t, i + 7]
                xs[t] += x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7
                for o in range(n_out):
                    acc[t, o] += (c8[0, o] * x0 + c8[1, o] * x1 + c8[2, o] * x2 + c8[3, o] * x3
                                  + c8[4, o] * x4 + c8[5, o] * x5 + c8[6, o] * x6 + c8[7, o] * x7)
        for t in range(L):
            for o in range(n_out):
                out[t, o] += scales_t[g, o] * acc[t, o] + biases_t[g, o] * xs[t]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _steps(x, off, ln1, qkv_c, qkv_s, qkv_b, o_c, o_s, o_b, ln2, gu_c, gu_s, gu_b, d_c, d_s, d_b,
           norm, kT, v, cos, sin, n_heads, n_kv, eps, out):
    """``L`` new tokens through every layer at once: ``x (L, d)`` are their embeddings (updated in
    place), written at cache positions ``off .. off + L - 1``, each attending causally; ``out (L, d)``
    gets their final normed states. :func:`_step`'s arithmetic, the projections as :func:`_qgemm`."""
    L, d = x.shape
    xn = np.empty((L, d), np.float32)
    qkv = np.empty((L, qkv_c.shape[2]), np.float32)
    att = np.empty((L, n_heads * kT.shape[2]), np.float32)
    tmp = np.empty((L, d), np.float32)
    gu = np.empty((L, gu_c.shape[2]), np.float32)
    act = np.empty((L, gu_c.shape[2] // 2), np.float32)
    sc = np.empty(off + L, np.float32)
    bits = np.empty(off + L, np.int32)
    for layer in range(qkv_c.shape[0]):
        for t in range(L):
            _rms_scale(x[t], ln1[layer], eps, xn[t])
        _qgemm(qkv_c[layer], qkv_s[layer], qkv_b[layer], xn, qkv)
        for t in range(L):
            _rope_store(qkv[t], off + t, layer, kT, v, cos, sin, n_heads, n_kv)
        for t in range(L):
            _attend(qkv[t], off + t + 1, layer, kT, v, n_heads, n_kv, sc, bits, att[t])
        _qgemm(o_c[layer], o_s[layer], o_b[layer], att, tmp)
        for t in range(L):
            for i in range(d):
                x[t, i] += tmp[t, i]
            _rms_scale(x[t], ln2[layer], eps, xn[t])
        _qgemm(gu_c[layer], gu_s[layer], gu_b[layer], xn, gu)
        for t in range(L):
            _silu_mul(gu[t], act[t])
        _qgemm(d_c[layer], d_s[layer], d_b[layer], act, tmp)
        for t in range(L):
            for i in range(d):
                x[t, i] += tmp[t, i]
    for t in range(L):
        _rms_scale(x[t], norm, eps, out[t])


F1, F2, F3, F4 = "float32[::1]", "float32[:,::1]", "float32[:,:,::1]", "float32[:,:,:,::1]"
U2, U3 = "uint8[:,::1]", "uint8[:,:,::1]"
SIGNATURES = {
    "qgemv": f"void({U2}, {F2}, {F2}, {F1}, {F1})",
    "step": (f"void({F1}, int64, {F2}, {U3}, {F3}, {F3}, {U3}, {F3}, {F3}, {F2}, {U3}, {F3}, {F3}, "
             f"{U3}, {F3}, {F3}, {F1}, {F4}, {F4}, {F2}, {F2}, int64, int64, float32, {F1})"),
    "steps": (f"void({F2}, int64, {F2}, {U3}, {F3}, {F3}, {U3}, {F3}, {F3}, {F2}, {U3}, {F3}, {F3}, "
              f"{U3}, {F3}, {F3}, {F1}, {F4}, {F4}, {F2}, {F2}, int64, int64, float32, {F2})"),
}
"""Exported names and their exact numba signatures (the arrays ``NumbaBackend`` passes)."""


def build_aot(out_dir, module_name: str) -> None:
    """Compile ``_step``, ``_steps`` and ``_qgemv`` ahead of time into ``out_dir/<module_name>*.so`` (numba's
    ``pycc``, for this machine's CPU: ``target_cpu = "host"``, as the JIT does). Needs a C
    compiler (``cc``) to link; takes ~4-6 s.

    Raises:
        Exception: whatever ``pycc`` raises (no compiler, no ``setuptools``, ...).
    """
    import warnings

    warnings.simplefilter("ignore")  # pycc is pending deprecation in numba; it still works
    import numba.pycc.compiler as pycc_compiler
    from numba.pycc import CC

    class _ReleaseGilFlags(pycc_compiler.Flags):
        """pycc has no ``nogil`` option; the wrappers it writes release the GIL around the call
        when the compile flags say so (numba's ``release_gil``, what ``nogil=True`` sets for the
        JIT)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    pycc_compiler.Flags = _ReleaseGilFlags  # this build process only (a child of the server)

    cc = CC(module_name)
    cc.output_dir = str(out_dir)
    cc.target_cpu = "host"
    cc.verbose = False
    cc.export("qgemv", SIGNATURES["qgemv"])(_qgemv.py_func)
    cc.export("step", SIGNATURES["step"])(_step.py_func)
    cc.export("steps", SIGNATURES["steps"])(_steps.py_func)
    cc.compile()


qgemv = _qgemv
step = _step
steps = _steps
