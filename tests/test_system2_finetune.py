"""System 2's code adapter (``laya_tools.system2_finetune``): packing the corpus, merging an
adapter into a GGUF, and the adapter this repository ships.

Training itself needs PyTorch and a GPU and is not run here; its loop was run on an H200 and its
numbers are in ``engine/models/system2-code/manifest.json``.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from laya_tools import system2_finetune as ft  # noqa: E402

HIDDEN, HEADS, KV_HEADS, FFN = 64, 2, 1, 128
SHAPES = {"attn_q": (HIDDEN, HIDDEN), "attn_k": (HIDDEN // HEADS * KV_HEADS, HIDDEN),
          "attn_v": (HIDDEN // HEADS * KV_HEADS, HIDDEN), "attn_output": (HIDDEN, HIDDEN),
          "ffn_gate": (FFN, HIDDEN), "ffn_up": (FFN, HIDDEN), "ffn_down": (HIDDEN, FFN)}
"""The tiny block's linear weights, (out, in), by llama.cpp tensor name."""


def tiny_gguf(path, rng) -> dict[str, np.ndarray]:
    """A one-block llama GGUF (Q8_0 linear layers) and its dequantized weights by tensor name."""
    from gguf import GGMLQuantizationType as Q

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_embedding_length(HIDDEN)
    w.add_name("tiny")
    out = {}
    emb = rng.standard_normal((100, HIDDEN)).astype(np.float32)
    w.add_tensor("token_embd.weight", emb)
    out["token_embd.weight"] = emb
    for name, shape in SHAPES.items():
        q = gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32) * 0.1, Q.Q8_0)
        w.add_tensor(f"blk.0.{name}.weight", q, raw_shape=q.shape, raw_dtype=Q.Q8_0)
        out[f"blk.0.{name}.weight"] = gguf.quants.dequantize(q, Q.Q8_0)
    norm = np.ones(HIDDEN, np.float32)
    w.add_tensor("blk.0.attn_norm.weight", norm)
    out["blk.0.attn_norm.weight"] = norm
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def tiny_adapter(folder, rng, rank=4, alpha=8, drop=None) -> dict[str, np.ndarray]:
    """An adapter for :func:`tiny_gguf`'s block in the shipped layout (float16 safetensors)."""
    arrays = {}
    for m, name in ft.GGUF_NAMES.items():
        if m == drop:
            continue
        o, i = SHAPES[name]
        arrays[f"blk.0.{m}.lora_a"] = (rng.standard_normal((rank, i)) * 0.1).astype(np.float16)
        arrays[f"blk.0.{m}.lora_b"] = (rng.standard_normal((o, rank)) * 0.1).astype(np.float16)
    folder.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(folder / "adapter-00.safetensors"), {k: mx.array(v) for k, v in arrays.items()},
                        metadata={"rank": str(rank), "alpha": str(alpha)})
    return arrays


def test_the_permutation_interleaves_each_heads_rotary_halves():
    # Hugging Face keeps a head's rows as [first half | second half] (rotate_half); llama.cpp
    # interleaves them: rows 0, 2, 1, 3 for one head of four.
    w = np.arange(8, dtype=np.float32).reshape(8, 1)
    got = ft.llama_cpp_permute(w, n_head=2).ravel().tolist()
    assert got == [0, 2, 1, 3, 4, 6, 5, 7]


def test_merge_adds_the_low_rank_product_to_each_adapted_weight(tmp_path):
    rng = np.random.default_rng(0)
    base = tmp_path / "base.gguf"
    weights = tiny_gguf(base, rng)
    lora = tiny_adapter(tmp_path / "adapter", rng)
    out = tmp_path / "merged.gguf"
    ft.merge(base, tmp_path / "adapter", out, "Q8_0")

    r = gguf.GGUFReader(str(out))
    assert r.fields["general.name"].contents() == "tiny"
    assert r.fields["llama.attention.head_count_kv"].contents() == KV_HEADS
    got = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in r.tensors}
    assert set(got) == set(weights)
    np.testing.assert_array_equal(got["token_embd.weight"], weights["token_embd.weight"])
    np.testing.assert_array_equal(got["blk.0.attn_norm.weight"], weights["blk.0.attn_norm.weight"])
    for hf, name in ft.GGUF_NAMES.items():
        delta = 2.0 * (lora[f"blk.0.{hf}.lora_b"].astype(np.float32) @ lora[f"blk.0.{hf}.lora_a"].astype(np.float32))
        if hf == "q_proj":
            delta = ft.llama_cpp_permute(delta, HEADS)
        elif hf == "k_proj":
            delta = ft.llama_cpp_permute(delta, KV_HEADS)
        want = weights[f"blk.0.{name}.weight"] + delta
        step = np.abs(want).max() / 127  # Q8_0's step at most
        assert np.abs(got[f"blk.0.{name}.weight"] - want).max() <= step, name
        assert np.abs(got[f"blk.0.{name}.weight"] - weights[f"blk.0.{name}.weight"]).max() > 4 * step, name
    assert not (tmp_path / "merged.gguf.part").exists()


def test_an_adapter_for_another_model_is_a_clear_error(tmp_path):
    rng = np.random.default_rng(1)
    base = tmp_path / "base.gguf"
    tiny_gguf(base, rng)
    tiny_adapter(tmp_path / "short", rng, drop="v_proj")
    with pytest.raises(ValueError, match="no blk.0.v_proj"):
        ft.merge(base, tmp_path / "short", tmp_path / "m.gguf")
    with pytest.raises(ValueError, match="no adapter-NN.safetensors"):
        ft.merge(base, tmp_path, tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()


def test_pack_samples_whole_train_files_and_cuts_the_gguf(tmp_path):
    corpus = tmp_path / "corpus"
    src = open(ft.__file__, encoding="utf-8").read()
    for split in ("train", "tune"):
        for i in range(3):
            p = corpus / split / "python" / f"pkg{i}" / "mod" / f"m{i}.py"
            p.parent.mkdir(parents=True)
            p.write_text(src[i * 500:(i + 1) * 500], "utf-8")
    model = tmp_path / "m.gguf"
    model.write_bytes(bytes(range(256)) * 41)
    out = tmp_path / "pack"
    ft.pack(corpus, out, {"python": 1000}, part_mb=8, gguf=model, gguf_parts=3)

    rows = [json.loads(line) for line in lzma.open(out / "train-00.jsonl.xz", "rt")]
    assert len(rows) == 2  # whole files until 1,000 characters are reached
    assert all(r["lang"] == "python" and r["text"] in src for r in rows)
    assert all(r["path"].endswith(".py") and r["path"].count("/") <= 2 for r in rows)
    tune = [json.loads(line) for line in lzma.open(out / "tune.jsonl.xz", "rt")]
    assert len(tune) == 3
    parts = sorted(out.glob("model.gguf.*"))
    assert len(parts) == 3 and b"".join(p.read_bytes() for p in parts) == model.read_bytes()


def test_the_shipped_adapter_covers_every_block_of_smollm2():
    from engine.system2 import ADAPTER_DIR

    folder = ADAPTER_DIR
    manifest = json.loads((folder / "manifest.json").read_text())
    lora, scale = ft.load_adapter(folder)
    rank = manifest["training"]["rank"]
    assert scale == manifest["training"]["alpha"] / rank
    assert len(lora) == 2 * 30 * len(ft.TARGET_MODULES)
    assert lora["blk.0.q_proj.lora_a"].shape == (rank, 576)
    assert lora["blk.29.down_proj.lora_b"].shape == (576, rank)
    assert all(np.isfinite(a).all() for a in lora.values())
    # trained: B starts at zero in LoRA, so a trained adapter has moved every B
    assert all(np.abs(a).max() > 0 for k, a in lora.items() if k.endswith("lora_b"))
    after, before = manifest["tune_loss_after"], manifest["tune_loss_before"]
    assert after["all"] < before["all"]


def test_install_refuses_a_base_model_the_adapter_was_not_trained_on(tmp_path):
    from engine.system2 import BASE_FILE
    from laya_tools.system2_install import install

    tiny_gguf(tmp_path / BASE_FILE, np.random.default_rng(2))  # a GGUF, but not SmolLM2's
    with pytest.raises(ValueError, match="is not the model the adapter"):
        install(tmp_path / "code.gguf")
    assert not (tmp_path / "code.gguf").exists()


def test_a_merge_that_fails_half_way_leaves_no_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    base = tmp_path / "base.gguf"
    tiny_gguf(base, rng)
    tiny_adapter(tmp_path / "adapter", rng)

    def full_disk(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", full_disk)
    with pytest.raises(OSError, match="No space"):
        ft.merge(base, tmp_path / "adapter", tmp_path / "m.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter", "base.gguf"]


def test_install_says_what_is_wrong_with_where_it_was_told_to_write(tmp_path, monkeypatch):
    from engine.system2 import BASE_FILE
    from laya_tools.system2_install import install

    (tmp_path / "folder").mkdir()
    with pytest.raises(RuntimeError, match="is a folder"):
        install(tmp_path / "folder")
    with pytest.raises(RuntimeError, match="is where the base model goes"):
        install(tmp_path / BASE_FILE)
    monkeypatch.setenv("HOME", str(tmp_path))
    tiny_gguf(tmp_path / BASE_FILE, np.random.default_rng(4))
    with pytest.raises(ValueError, match=f"{tmp_path}/{BASE_FILE}"):  # ~ expanded
        install(Path("~/code.gguf"))
