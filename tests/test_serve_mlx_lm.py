"""``laya serve`` on a model folder of another architecture, opened with mlx-lm: a tiny randomly
initialised Qwen2 saved by mlx-lm itself (the point is the plumbing, not the text), served by a
real server process and called with a real HTTP client."""

from __future__ import annotations

import http.client
import json
import shutil
from urllib.parse import urlsplit

import pytest

pytest.importorskip("aiohttp", reason="laya serve needs the 'serve' extra (aiohttp)")
pytest.importorskip("mlx_lm", reason="serving other mlx-lm models needs the 'convert' extra")

from engine.model_io import DEFAULT_MODEL_DIR  # noqa: E402
from laya_serve.loadtest import start_server  # noqa: E402


def _tiny_qwen2(folder):
    import mlx.core as mx
    from mlx_lm.models import qwen2
    from mlx_lm.utils import save_config, save_model

    args = {"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
            "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": 4096,
            "max_position_embeddings": 1024, "tie_word_embeddings": True}
    mx.random.seed(0)
    model = qwen2.Model(qwen2.ModelArgs(**args))
    mx.eval(model.parameters())
    folder.mkdir()
    save_model(folder, model)
    save_config(args, folder / "config.json")
    shutil.copy(DEFAULT_MODEL_DIR / "tokenizer.json", folder / "tokenizer.json")  # a real BPE
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "tiny-qwen2"
    _tiny_qwen2(folder)
    proc, url = start_server(["--model", str(folder)])
    u = urlsplit(url)
    yield u.hostname, u.port
    proc.terminate()
    proc.wait(10)


def call(server, path, body):
    conn = http.client.HTTPConnection(*server, timeout=60)
    conn.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    r = conn.getresponse()
    out = json.loads(r.read())
    conn.close()
    return r.status, out


def test_seed_request_and_openai_shape(server):
    status, d = call(server, "/complete", {"prompt": "def main():\n    return", "max_tokens": 3})
    assert status == 200
    [choice] = d["choices"]
    assert choice["finish_reason"] in ("length", "stop")
    assert d["usage"]["completion_tokens"] <= 3
    status, d = call(server, "/v1/completions", {"prompt": "import os\nos.", "n": 3, "max_tokens": 4,
                                                 "temperature": 0.8, "top_p": 0.9, "seed": 1})
    assert status == 200 and d["model"] == "tiny-qwen2"
    assert [c["index"] for c in d["choices"]] == [0, 1, 2]


def test_greedy_is_deterministic_and_the_prompt_cache_reuses_prefixes(server):
    body = {"prompt": "class A:\n    def f(self):\n        return self.", "max_tokens": 5, "temperature": 0}
    _, a = call(server, "/complete", body)
    _, b = call(server, "/complete", body)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    # the same prompt again prefills only its last token (for its logits; the rest is cached),
    # and a longer prompt that starts with it only what it adds
    assert a["prefilled_tokens"] == a["usage"]["prompt_tokens"] > 5
    assert b["prefilled_tokens"] == 1
    _, c = call(server, "/complete", {**body, "prompt": body["prompt"] + "x + 1\n"})
    assert 1 <= c["prefilled_tokens"] <= c["usage"]["prompt_tokens"] - a["usage"]["prompt_tokens"] + 1


def test_stop_sequences_cut_the_text(server):
    _, d = call(server, "/complete", {"prompt": "x = 1\n", "max_tokens": 16, "temperature": 0})
    text = d["choices"][0]["text"]
    if len(text) > 1:
        stop = text[1:3] or text[1]
        _, d2 = call(server, "/complete", {"prompt": "x = 1\n", "max_tokens": 16, "temperature": 0, "stop": [stop]})
        assert d2["choices"][0]["text"] == text[: text.index(stop)]
        assert d2["choices"][0]["finish_reason"] == "stop"
