"""Write a model folder as a llama.cpp GGUF file (``laya export --gguf PATH``).

The shipped 6-bit weights are dequantized (``mx.dequantize``, the numbers Laya itself runs) and
written as float32 (``--gguf-type f32``) or as ``Q8_0`` (``q8_0``: 8-bit codes, one float16 scale
per 32 weights, quantized by the ``gguf`` package's port of llama.cpp's reference quantizer), under
llama.cpp's ``llama`` architecture names. Two details matter for parity:

* RoPE: Laya (``mlx.nn.RoPE``, ``traditional=False``, as Hugging Face Llama) rotates the two halves
  of each head's features; llama.cpp's ``llama`` rotates adjacent pairs. The rows of ``W_q`` and
  ``W_k`` are permuted per head from halves to pairs, exactly as llama.cpp's
  ``convert_hf_to_gguf.py`` does (``LlamaModel.permute``); without it top-1 agreement is ~51%.
* Tied embeddings: no ``output.weight`` is written, so llama.cpp uses ``token_embd.weight`` as the
  LM head, as Laya does.

The tokenizer's byte-level BPE vocabulary and merges go in as a ``gpt2`` tokenizer (pre-tokenizer
``gpt-2``): llama.cpp then tokenizes text close to, but not exactly as, Laya (whose pre-tokenizer
splits code differently); fed Laya's token ids, the logits agree (``tests/test_gguf_parity.py``).
Requires the ``gguf`` package (``pip install -e '.[peers]'``; it is also in ``test``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

GGUF_TYPES = ("f32", "q8_0")
"""Weight types :func:`export_gguf` writes."""


def permute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Reorder the output rows of ``W_q``/``W_k`` ``(n_head * head_dim, in)`` from RoPE halves to pairs.

    Within each head, row ``j < head_dim/2`` goes to ``2j`` and row ``head_dim/2 + j`` to ``2j + 1``
    (``convert_hf_to_gguf.py``'s ``LlamaModel.permute``).
    """
    out, rest = w.shape[0], w.shape[1:]
    return w.reshape(n_head, 2, out // n_head // 2, *rest).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(args, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Map float32 weights under mlx-lm / Llama names to llama.cpp's GGUF names (q/k permuted).

    Args:
        args: the model's :class:`~engine.model.ModelArgs`.
        weights: ``{name: float32 array}`` as ``engine.backends.dequantized_numpy_weights`` returns.

    Returns:
        ``{gguf name: float32 array}`` in PyTorch layout (``(out, in)``; the writer reverses shapes).
    """
    t = {"token_embd.weight": weights["model.embed_tokens.weight"],
         "output_norm.weight": weights["model.norm.weight"]}
    if not args.tie_word_embeddings:
        t["output.weight"] = weights["lm_head.weight"]
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(args.num_hidden_layers):
        for src, dst in names.items():
            w = weights[f"model.layers.{i}.{src}.weight"]
            if dst == "attn_q":
                w = permute_rope_rows(w, args.num_attention_heads)
            elif dst == "attn_k":
                w = permute_rope_rows(w, args.num_key_value_heads)
            t[f"blk.{i}.{dst}.weight"] = w
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in t.items()}


def _add_tokenizer(writer, tokenizer_path: Path, vocab_size: int) -> None:
    tok = json.loads(Path(tokenizer_path).read_text("utf-8"))
    model = tok["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"{tokenizer_path}: a {model.get('type')} tokenizer cannot be written as gpt2 BPE")
    vocab = model["vocab"]
    tokens = [""] * vocab_size
    for piece, i in vocab.items():
        if i < vocab_size:
            tokens[i] = piece
    special = {a["id"] for a in tok.get("added_tokens", []) if a.get("special")}
    for a in tok.get("added_tokens", []):
        if a["id"] < vocab_size:
            tokens[a["id"]] = a["content"]
    missing = [i for i, s in enumerate(tokens) if not s]
    if missing:
        raise ValueError(f"{tokenizer_path}: no token for ids {missing[:5]} (vocab_size {vocab_size})")
    import gguf

    types = [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(vocab_size)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    eos = vocab.get("<|endoftext|>", 0)
    writer.add_bos_token_id(eos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)  # Laya starts windows without BOS


def export_gguf(folder: Path | None, out: Path, gguf_type: str = "f32") -> Path:
    """Write the model folder ``folder`` (default: the shipped model) as a GGUF file ``out``.

    Args:
        folder: mlx-lm model folder (``config.json``, ``model.safetensors``, ``tokenizer.json``).
        out: the ``.gguf`` file to write (parent folders are created).
        gguf_type: ``f32`` (exactly the dequantized 6-bit numbers) or ``q8_0`` (2-D weights
            re-quantized to llama.cpp's Q8_0; norms stay float32, as llama.cpp's quantizer keeps them).

    Returns:
        ``out``.

    Raises:
        ValueError: unknown ``gguf_type`` or a tokenizer that is not byte-level BPE.
        ModelLoadError: the folder cannot be loaded (names the file).
        ImportError: the ``gguf`` package is not installed (says how to install it).
    """
    if gguf_type not in GGUF_TYPES:
        raise ValueError(f"GGUF type {gguf_type!r}: expected one of {', '.join(GGUF_TYPES)}")
    try:
        import gguf
    except ImportError as e:
        raise ImportError("laya export --gguf needs the gguf package: pip install -e '.[peers]' "
                          "(or pip install gguf)") from e
    from engine.backends import dequantized_numpy_weights
    from engine.model_io import DEFAULT_MODEL_DIR

    folder = Path(folder) if folder else DEFAULT_MODEL_DIR
    args, config, weights = dequantized_numpy_weights(folder)
    tensors = gguf_tensors(args, weights)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(folder.name)
    w.add_description("Laya code-completion model, exported by `laya export --gguf` from the 6-bit mlx-lm folder")
    w.add_context_length(args.max_position_embeddings)
    w.add_embedding_length(args.hidden_size)
    w.add_block_count(args.num_hidden_layers)
    w.add_feed_forward_length(args.intermediate_size)
    w.add_head_count(args.num_attention_heads)
    w.add_head_count_kv(args.num_key_value_heads)
    w.add_rope_dimension_count(args.head_dim)
    w.add_rope_freq_base(float(args.rope_theta))
    w.add_layer_norm_rms_eps(float(args.rms_norm_eps))
    w.add_vocab_size(args.vocab_size)
    q8 = gguf_type == "q8_0"
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)
    if q8:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _add_tokenizer(w, folder / "tokenizer.json", args.vocab_size)
    for name, t in tensors.items():
        if q8 and t.ndim == 2:
            qt = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(t, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
