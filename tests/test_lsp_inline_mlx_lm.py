"""``modelPath`` naming another mlx-lm model: it writes inline completion, the fast engine the list."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("mlx_lm", reason="other mlx-lm models need the 'convert' extra")

from lsp_raw import RawServer  # noqa: E402
from test_serve_mlx_lm import _tiny_qwen2  # noqa: E402

URI = "file:///tmp/laya-inline/main.py"


def _inline(s: RawServer, line: int, character: int) -> list[dict]:
    answer = s.call("textDocument/inlineCompletion", {
        "textDocument": {"uri": URI}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 2}}, timeout=120)
    assert "result" in answer, answer
    return answer["result"]["items"] if isinstance(answer["result"], dict) else answer["result"]


def test_inline_text_comes_from_the_mlx_lm_model(tmp_path):
    from laya_serve.mlx_lm_generate import MlxLmGenerator

    folder = tmp_path / "tiny-qwen2"
    _tiny_qwen2(folder)
    prompts = ["import os\nos.pa", "def main():\n    ret", "x = 1\n"]
    gen = MlxLmGenerator(folder)
    want = {p: gen.line(p, 24, lambda: False) for p in prompts}  # greedy: deterministic
    assert any(w.strip() for w in want.values()), want  # the random model writes something
    with RawServer() as s:
        s.initialize({"modelPath": str(folder)})
        for p in prompts:
            s.notify("textDocument/didOpen", {"textDocument": {
                "uri": URI, "languageId": "python", "version": 1, "text": p}})
            lines = p.split("\n")
            items = _inline(s, len(lines) - 1, len(lines[-1]))
            word = lines[-1][len(lines[-1].rstrip("abcdefghijklmnopqrstuvwxyz_")):]
            if want[p].strip():
                assert [i["insertText"] for i in items] == [(word + want[p]).rstrip()], (p, items)
            else:
                assert items == [], (p, items)
            s.notify("textDocument/didClose", {"textDocument": {"uri": URI}})
        # the completion list keeps the fast engine and the shipped model
        s.notify("textDocument/didOpen", {"textDocument": {
            "uri": URI, "languageId": "python", "version": 1, "text": "import os\nos.pa"}})
        assert "path" in [i["label"] for i in s.complete(URI, 1, 5)["result"]["items"]]
        assert not [m for m in s.messages if m.get("method") == "window/showMessage"]
        assert s.exit() == 0


def test_folder_mlx_lm_cannot_open_is_shown(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "nosuch"}')
    with RawServer() as s:
        s.initialize({"modelPath": str(folder)})
        s.notify("textDocument/didOpen", {"textDocument": {
            "uri": URI, "languageId": "python", "version": 1, "text": "import os\nos.pa"}})
        _inline(s, 1, 5)  # answered (from the fast engine)
        deadline = time.monotonic() + 60
        shown = []
        while not shown and time.monotonic() < deadline:
            shown = [m for m in s.messages if m.get("method") == "window/showMessage"]
            time.sleep(0.1)
        assert shown and str(folder) in shown[0]["params"]["message"], shown
        assert "path" in [i["label"] for i in s.complete(URI, 1, 5)["result"]["items"]]
        assert s.exit() == 0
