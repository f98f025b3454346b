"""``laya export --gguf``: the file re-read with the ``gguf`` package has llama.cpp's tensors, shapes
and metadata, and llama.cpp's ``llama`` graph on it (re-implemented in NumPy, ``gguf_reference``)
gives Laya's logits. The same check through llama.cpp itself is ``test_gguf_parity.py`` (opt-in).
"""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf package is not installed (pip install -e '.[test]')")

from laya_tools.cli import main as laya  # noqa: E402
from laya_tools.export_gguf import permute_rope_rows  # noqa: E402
from tests.gguf_reference import held_out_ids, laya_logits, read_gguf, reference_logits  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "laya.gguf"
    assert laya(["export", "--gguf", str(out), "--gguf-type", "f32,q8_0"]) == 0
    return {k: out.with_suffix(f".{k}.gguf") for k in ("f32", "q8_0")}


@pytest.fixture(scope="module")
def held_out():
    ids = held_out_ids(256)
    return ids, laya_logits(ids)


def test_tensors_shapes_and_metadata(exported):
    r = gguf.GGUFReader(str(exported["q8_0"]))
    meta = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    assert meta["general.architecture"] == "llama"
    assert (meta["llama.block_count"], meta["llama.embedding_length"], meta["llama.feed_forward_length"]) == (4, 256, 512)
    assert (meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]) == (4, 4)
    assert meta["llama.rope.dimension_count"] == 64 and meta["llama.rope.freq_base"] == 10000.0
    assert meta["llama.context_length"] == 512 and meta["llama.vocab_size"] == 4096
    assert meta["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.add_bos_token"] is False
    tokens = meta["tokenizer.ggml.tokens"]
    assert len(tokens) == 4096 and tokens[0] == "<|endoftext|>" and len(set(tokens)) == 4096
    assert meta["tokenizer.ggml.token_type"][0] == gguf.TokenType.CONTROL
    assert len(meta["tokenizer.ggml.merges"]) > 3000 and all(m.count(" ") == 1 for m in meta["tokenizer.ggml.merges"])

    shapes = {t.name: ([int(x) for x in t.shape], t.tensor_type.name) for t in r.tensors}
    assert "output.weight" not in shapes  # tied: llama.cpp reads token_embd as the LM head
    assert shapes["token_embd.weight"] == ([256, 4096], "Q8_0")  # ggml order: (in, out)
    assert shapes["output_norm.weight"] == ([256], "F32")
    for i in range(4):
        p = f"blk.{i}."
        for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
            assert shapes[p + n + ".weight"] == ([256, 256], "Q8_0")
        assert shapes[p + "ffn_gate.weight"] == shapes[p + "ffn_up.weight"] == ([256, 512], "Q8_0")
        assert shapes[p + "ffn_down.weight"] == ([512, 256], "Q8_0")
        assert shapes[p + "attn_norm.weight"] == shapes[p + "ffn_norm.weight"] == ([256], "F32")
    assert len(shapes) == 2 + 4 * 9
    f32 = gguf.GGUFReader(str(exported["f32"]))
    assert {t.tensor_type.name for t in f32.tensors} == {"F32"}


def test_permutation_is_halves_to_pairs():
    w = np.arange(2 * 8, dtype=np.float32).reshape(2 * 8, 1)  # 2 heads of head_dim 8
    assert permute_rope_rows(w, 2)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]


@pytest.mark.parametrize("kind, max_diff, min_top1", [("f32", 2e-3, 1.0), ("q8_0", 0.25, 0.97)])
def test_llama_graph_on_the_file_matches_laya(exported, held_out, kind, max_diff, min_top1):
    ids, ref = held_out
    meta, tensors = read_gguf(exported[kind])
    got = reference_logits(meta, tensors, ids)
    diff = float(np.abs(got - ref).max())
    top1 = float(np.mean(got.argmax(-1) == ref.argmax(-1)))
    print(f"{kind}: max |logit difference| {diff:.2e}, top-1 agreement {top1:.1%} over {len(ids)} tokens")
    assert diff < max_diff and top1 >= min_top1


def test_without_the_permutation_agreement_collapses(exported, held_out):
    """The check above would catch a missing q/k permutation (the reason it exists)."""
    ids, ref = held_out
    meta, t = read_gguf(exported["f32"])
    h = meta["llama.attention.head_count"]
    for i in range(meta["llama.block_count"]):
        for n in ("attn_q", "attn_k"):
            w = t[f"blk.{i}.{n}.weight"]  # undo: pairs back to halves
            t[f"blk.{i}.{n}.weight"] = w.reshape(h, -1, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
    got = reference_logits(meta, t, ids)
    assert np.mean(got.argmax(-1) == ref.argmax(-1)) < 0.9
