"""The Laya-MLX decoder in the mlx-lm model-file shape.

A Llama-architecture transformer (RMSNorm, RoPE, SwiGLU MLP, tied embeddings, no biases), written
the way ``mlx_lm/models/llama.py`` is: a ``ModelArgs`` dataclass that mirrors ``config.json`` and
``Model.__call__(inputs, cache=None) -> logits``. The weight names are Llama's, and the folder's
``config.json`` says ``"model_type": "llama"``, so ``mlx_lm.load(folder)`` opens the same folder
with mlx-lm's own implementation (``tests/test_backends.py`` checks the logits agree).

This module does not import ``mlx_lm`` (importing it pulls in ``transformers``: seconds of
start-up and tens of MB), so the server's run-time path stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import mlx.core as mx
import mlx.nn as nn

from .kv_cache import KVCache


@dataclass
class ModelArgs:
    """Hyper-parameters; field names are mlx-lm's / Hugging Face's Llama ``config.json`` keys."""

    model_type: str = "llama"
    hidden_size: int = 256
    num_hidden_layers: int = 4
    intermediate_size: int = 512
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    vocab_size: int = 4096
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 512
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    mlp_bias: bool = False

    @classmethod
    def from_dict(cls, params: dict) -> "ModelArgs":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        d, h, kvh, hd = args.hidden_size, args.num_attention_heads, args.num_key_value_heads, args.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = h, kvh, hd
        self.scale = hd**-0.5
        self.q_proj = nn.Linear(d, h * hd, bias=False)
        self.k_proj = nn.Linear(d, kvh * hd, bias=False)
        self.v_proj = nn.Linear(d, kvh * hd, bias=False)
        self.o_proj = nn.Linear(h * hd, d, bias=False)
        self.rope = nn.RoPE(hd, traditional=False, base=args.rope_theta)

    def __call__(self, x: mx.array, mask=None, cache: KVCache | None = None) -> mx.array:
        B, L, _ = x.shape
        q = self.q_proj(x).reshape(B, L, self.n_heads, -1).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        if cache is not None:
            q = self.rope(q, offset=cache.offset)
            k = self.rope(k, offset=cache.offset)
            k, v = cache.update_and_fetch(k, v)
        else:
            q, k = self.rope(q), self.rope(k)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale, mask=mask)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))


class MLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.gate_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.up_proj = nn.Linear(args.hidden_size, args.intermediate_size, bias=False)
        self.down_proj = nn.Linear(args.intermediate_size, args.hidden_size, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, x, mask=None, cache=None):
        h = x + self.self_attn(self.input_layernorm(x), mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [TransformerBlock(args) for _ in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, inputs: mx.array, cache=None) -> mx.array:
        h = self.embed_tokens(inputs)
        if cache is None:
            cache = [None] * len(self.layers)
        L = h.shape[1]
        mask = None
        if L > 1:
            offset = cache[0].offset if cache[0] is not None else 0
            mask = _causal_mask(L, offset)
        for layer, c in zip(self.layers, cache):
            h = layer(h, mask, c)
        return self.norm(h)


def _causal_mask(L: int, offset: int) -> mx.array:
    """Boolean mask ``(L, offset + L)``: query i sees keys ``<= offset + i``."""
    q = mx.arange(offset, offset + L)[:, None]
    k = mx.arange(offset + L)[None, :]
    return q >= k


class Model(nn.Module):
    """Causal LM.

    ``Model(args)(inputs, cache)`` takes token ids ``(batch, seq_len)`` (int32) and returns logits
    ``(batch, seq_len, vocab_size)`` (float32). ``cache`` is a list with one
    :class:`~engine.kv_cache.KVCache` per layer (see :meth:`make_cache`); the new tokens are placed
    after ``cache[0].offset`` cached ones.
    """

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model_type = args.model_type
        self.model = LlamaModel(args)

    def __call__(self, inputs: mx.array, cache=None) -> mx.array:
        out = self.model(inputs, cache)
        return self.model.embed_tokens.as_linear(out)

    def hidden(self, inputs: mx.array, cache=None) -> mx.array:
        """Final normed hidden states ``(batch, seq_len, hidden_size)``, before the LM head."""
        return self.model(inputs, cache)

    def make_cache(self) -> list[KVCache]:
        return [KVCache() for _ in self.model.layers]

    @property
    def layers(self):
        return self.model.layers

    def sanitize(self, weights: dict) -> dict:
        # Tied embeddings: a stray lm_head (from other exporters) is dropped, as mlx-lm's llama does.
        return {k: v for k, v in weights.items() if not k.startswith("lm_head.")}
