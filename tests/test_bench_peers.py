"""``laya bench --peers``: Laya's side of the workload (append, logits, roll back) keeps the cache
invariant and returns fresh-prefill logits; without llama-cpp-python the command says how to get it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from laya_tools.bench_peers import CACHED, LayaRunner
from engine.model_io import DEFAULT_MODEL_DIR
from tests.gguf_reference import held_out_ids


@pytest.mark.parametrize("kind", ["numpy", "numba"])
def test_laya_runner_rolls_back(kind):
    if kind == "numba" and importlib.util.find_spec("numba") is None:
        pytest.skip("numba is not installed")
    ids = held_out_ids(CACHED + 3)
    r = LayaRunner(DEFAULT_MODEL_DIR, kind)
    r.prefill(ids[:CACHED])
    first = r.decide(ids[CACHED : CACHED + 3])
    assert r.b.offset == CACHED
    again = r.decide(ids[CACHED : CACHED + 3])
    np.testing.assert_allclose(again, first, atol=1e-5)
    fresh = LayaRunner(DEFAULT_MODEL_DIR, "numpy")
    fresh.prefill(ids[: CACHED + 3])
    np.testing.assert_allclose(first, fresh.b.logits(fresh.b.hid[CACHED + 2]), atol=2e-3)


def test_peers_without_llama_cpp_says_how(tmp_path, capsys):
    if importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("llama-cpp-python is installed")
    from laya_tools.cli import main

    with pytest.raises(SystemExit, match=r"pip install -e '\.\[peers\]'"):
        main(["bench", "--peers", "--out", str(tmp_path)])
