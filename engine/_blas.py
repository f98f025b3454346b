"""Bind an optimized system BLAS for MLX's CPU backend on Linux.

The ``mlx[cpu]`` Linux wheel calls ``cblas_sgemm`` from whatever BLAS the dynamic linker finds
first. Loading the system OpenBLAS (Debian: ``libopenblas0-pthread``) with ``RTLD_GLOBAL`` before
``import mlx`` makes MLX's matrix products use it: measured here (2-core x86_64) a 512x512 float32
GEMM went from ~14x slower to OpenBLAS speed (``laya bench --blas`` reprints the comparison).
Does nothing on macOS (MLX uses Accelerate/Metal there), when no OpenBLAS is installed, or when
``LAYA_NO_OPENBLAS=1``.
"""

from __future__ import annotations

import ctypes
import os
import sys

CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
    "/usr/lib/libopenblas.so.0",
)
loaded: str | None = None


def preload() -> str | None:
    """Load the first OpenBLAS found, globally; returns its path or None. Call before ``import mlx``."""
    global loaded
    if loaded or not sys.platform.startswith("linux") or os.environ.get("LAYA_NO_OPENBLAS") == "1":
        return loaded
    if "mlx.core" in sys.modules:
        return None  # too late to change symbol resolution
    for path in CANDIDATES:
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            loaded = path
            break
    return loaded
