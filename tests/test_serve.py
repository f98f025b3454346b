"""``laya serve`` end to end: a real server process on a free loopback port, the shipped model,
a real HTTP client (``http.client``), no mocks."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("aiohttp", reason="laya serve needs the 'serve' extra (aiohttp)")

from laya_serve.loadtest import start_server  # noqa: E402

ALLOWED = "http://localhost:5173"


@pytest.fixture(scope="module")
def server():
    proc, url = start_server(["--allow-origin", ALLOWED, "--max-body", "65536"])
    u = urlsplit(url)
    yield u.hostname, u.port
    proc.terminate()
    proc.wait(10)


def call(server, path, body=None, method="POST", headers=None, raw: bytes | None = None):
    """``(status, decoded JSON body, headers)``."""
    conn = http.client.HTTPConnection(*server, timeout=60)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    out = r.read()
    conn.close()
    return r.status, json.loads(out), dict(r.getheaders())


def test_seed_request_answers_choices_text(server):
    status, d, _ = call(server, "/complete", {"prompt": "import os\nos.pa", "max_tokens": 1})
    assert status == 200
    [choice] = d["choices"]
    assert ("pa" + choice["text"]).isidentifier() and choice["text"]
    assert choice["finish_reason"] == "length"
    assert d["usage"]["completion_tokens"] == 1
    _, d5, _ = call(server, "/complete", {"prompt": "import os\nos.pa", "max_tokens": 1, "n": 5})
    assert "th" in [c["text"] for c in d5["choices"]]  # os.path among the five


def test_openai_shape_and_n_candidates(server):
    status, d, _ = call(server, "/v1/completions", {"model": "anything", "prompt": "import os\nos.pa",
                                                     "n": 4, "max_tokens": 6, "temperature": 0})
    assert status == 200
    assert d["id"].startswith("cmpl-") and d["object"] == "text_completion"
    assert isinstance(d["created"], int) and d["model"] == "laya-code"
    assert [c["index"] for c in d["choices"]] == [0, 1, 2, 3]
    assert all(c["logprobs"] is None and c["finish_reason"] in ("stop", "length") for c in d["choices"])
    texts = [c["text"] for c in d["choices"]]
    assert len(set(texts)) == 4, texts
    u = d["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and 4 <= u["completion_tokens"] <= 24


def test_sampling_is_reproducible_with_a_seed(server):
    body = {"prompt": "def main(argv):\n    ", "n": 3, "max_tokens": 12, "temperature": 0.9, "top_p": 0.9, "seed": 7}
    a = call(server, "/v1/completions", body)[1]["choices"]
    b = call(server, "/v1/completions", body)[1]["choices"]
    assert len(a) == 3 and a == b


def test_any_64_bit_seed_is_taken(server):
    """OpenAI's seeds are signed 64-bit integers; numpy's and MLX's generators take unsigned ones:
    a negative seed is its two's complement (-1 and 2**64 - 1 sample alike)."""
    body = {"prompt": "def main(argv):\n    ", "n": 2, "max_tokens": 6, "temperature": 0.9}
    answers = [call(server, "/v1/completions", {**body, "seed": seed})[:2]
               for seed in (-1, 2**64 - 1, -(2**63), 2**63 - 1)]
    assert [status for status, _ in answers] == [200] * 4, answers
    assert answers[0][1]["choices"] == answers[1][1]["choices"]
    for seed in (2**64, -(2**63) - 1):
        status, d, _ = call(server, "/v1/completions", {**body, "seed": seed})
        assert status == 400 and "'seed' must be between" in d["error"]["message"], d


def test_lone_surrogates_in_text_fields_become_replacement_characters(server):
    """A lone surrogate is valid in a JSON string but no UTF-8 encoder takes it: the prompt, the
    stop strings and the user key get U+FFFD in its place, as in the language server."""
    raw = b'{"prompt": "x = \\"\\ud800\\"\\nos.pa", "max_tokens": 1, "stop": ["\\udfff"], "user": "\\ud800"}'
    status, d, _ = call(server, "/complete", raw=raw)
    assert status == 200, d
    replaced = call(server, "/complete", {"prompt": 'x = "\ufffd"\nos.pa', "max_tokens": 1})[1]
    assert d["choices"] == replaced["choices"]


def test_stop_sequences_cut_before_the_stop(server):
    body = {"prompt": "def f(x):\n    return", "max_tokens": 64}
    full = call(server, "/complete", body)[1]["choices"][0]["text"]
    assert "\n" in full
    d = call(server, "/complete", {**body, "stop": ["\n", "never-there"]})[1]
    cut = d["choices"][0]
    assert cut["finish_reason"] == "stop" and "\n" not in cut["text"]
    assert full.startswith(cut["text"] + "\n")


def test_max_tokens_bound(server):
    status, d, _ = call(server, "/complete", {"prompt": "x = ", "max_tokens": 257})
    assert status == 400 and "'max_tokens' must be between 0 and 256" in d["error"]["message"]
    d = call(server, "/complete", {"prompt": "import os\n", "max_tokens": 3, "n": 2})[1]
    assert all(c["finish_reason"] == "stop" or c["finish_reason"] == "length" for c in d["choices"])
    assert d["usage"]["completion_tokens"] <= 6
    d = call(server, "/complete", {"prompt": "import os\n", "max_tokens": 0})[1]
    assert d["choices"][0]["text"] == ""


def test_browser_origin_refused_unless_allowed(server):
    status, d, _ = call(server, "/complete", {"prompt": "x"}, headers={"Origin": "https://evil.example"})
    assert status == 403 and "--allow-origin" in d["error"]["message"]
    status, d, h = call(server, "/complete", {"prompt": "x", "max_tokens": 1}, headers={"Origin": ALLOWED})
    assert status == 200 and h["Access-Control-Allow-Origin"] == ALLOWED
    status, _, _ = call(server, "/health", method="GET", headers={"Host": "attacker.example"})
    assert status == 403  # DNS rebinding: a loopback service answers only loopback host names


@pytest.mark.parametrize("raw, words", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"max_tokens": 4}', "'prompt' is required"),
    (b'{"prompt": 12}', "'prompt' must be a string"),
    (b'{"prompt": "x", "n": true}', "'n' must be an integer"),
    (b'{"prompt": "x", "n": 17}', "'n' must be between 1 and 16"),
    (b'{"prompt": "x", "temperature": "hot"}', "'temperature' must be a number"),
    (b'{"prompt": "x", "top_p": 0}', "'top_p' must be above 0"),
    (b'{"prompt": "x", "stop": [1]}', "'stop' must be a string or a list of strings"),
    (b'{"prompt": "x", "stream": true}', "'stream' is not supported"),
    (b'\xff\xfe', "not UTF-8"),
    (b'{"prompt": "x", "a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", "nested too deeply"),
    (b'{"prompt": "x", "n": ' + b"1" * 5000 + b"}", "not valid JSON"),
])
def test_bad_requests_get_400_with_a_clear_message(server, raw, words):
    status, d, _ = call(server, "/v1/completions", raw=raw)
    assert status == 400
    assert words in d["error"]["message"]
    assert "Traceback" not in json.dumps(d)


def test_huge_body_413_unknown_path_404(server):
    status, d, _ = call(server, "/complete", raw=json.dumps({"prompt": "x" * 100_000}).encode())
    assert status == 413 and "65536 bytes" in d["error"]["message"]
    assert call(server, "/nowhere", {"prompt": "x"})[0] == 404
    assert call(server, "/complete", method="GET")[0] == 405
    status, d, _ = call(server, "/health", method="GET")
    assert status == 200 and d["status"] == "ok"


def test_concurrent_requests_all_answered(server):
    text = open(sys.modules["laya_serve.loadtest"].__file__, encoding="utf-8").read()
    results: list = []

    def client(i):
        for k in range(3):
            pos = 400 + i * 97 + k * 5
            results.append(call(server, "/complete", {"prompt": text[:pos], "max_tokens": 4})[:2])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 48
    assert all(s == 200 and len(d["choices"]) == 1 for s, d in results)


def test_latest_wins_per_named_client(server):
    slow = {"prompt": "import os\n", "n": 16, "max_tokens": 256, "temperature": 1.0, "seed": 1,
            "user": "editor-1"}
    first: list = []
    t = threading.Thread(target=lambda: first.append(call(server, "/complete", slow)[:2]))
    t.start()
    time.sleep(0.5)  # the first is generating (16 x 256 tokens take seconds)
    status, d, _ = call(server, "/complete", {"prompt": "import os\nos.pa", "max_tokens": 1, "user": "editor-1"})
    t.join(120)
    assert status == 200 and d["choices"]
    assert first[0][0] == 409 and first[0][1]["error"]["type"] == "superseded"


def test_bad_flags_end_in_one_line():
    r = subprocess.run([sys.executable, "-m", "laya_tools.cli", "serve", "--port", "70000"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == "laya serve: --port must be between 0 and 65535, got 70000"
    r = subprocess.run([sys.executable, "-m", "laya_tools.cli", "serve", "--read-timeout", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == "laya serve: --read-timeout must be between 0.1 and 3600, got 0.0"


def test_cjk_and_emoji_prompts_never_end_in_half_a_character(server):
    """Byte-level tokens can stop inside a multi-byte character; the answer drops the partial one
    instead of a U+FFFD."""
    for prompt in ("# 注释：计算总和\ns = '你好", "msg = '🎉🎉", "x = '日本語のテキスト"):
        for n, t in ((1, 0), (4, 0.9)):
            status, d, _ = call(server, "/complete", {"prompt": prompt, "max_tokens": 5, "n": n,
                                                      "temperature": t, "seed": 3})
            assert status == 200
            assert all("\ufffd" not in c["text"] for c in d["choices"]), d["choices"]


def test_a_word_longer_than_any_token_is_no_cache_key():
    """Token healing looks up the typed word's extensions once per word: a 200,000-character word
    (no token extends it) was kept as a key, up to 4,097 of them (gigabytes)."""
    from engine.predictor import Predictor
    from laya_serve.generate import Generator

    gen = Generator(Predictor.load())
    assert gen._goes_on("x" * 200_000, 0) is False
    assert not any(len(k) > 1000 for k in gen._prefixed)
