"""The lean benchmark client (``laya_tools.pipe_client``) against a real server: it completes,
edits incrementally in UTF-16 columns, reports error answers and ends the server cleanly."""

import pytest

from laya_tools.pipe_client import PipeClient, position
from laya_tools.replay import ranked


def test_position_counts_utf16_columns():
    assert position("ab\n😀x", 6) == {"line": 1, "character": 3}
    assert position("ab\ncd", 2) == {"line": 0, "character": 2}


def test_ranked_filters_by_filter_text_and_orders_by_sort_text():
    items = [{"label": "zeta", "sortText": "2"}, {"label": "x", "filterText": "pathx", "sortText": "1"},
             {"label": "path", "sortText": "3"}, {"label": "paths"}]
    assert [i["label"] for i in ranked(items, "pa")] == ["x", "path", "paths"]


def test_types_completes_and_shuts_down():
    c = PipeClient()
    try:
        assert c.server_info["name"] == "laya-lsp" and c.t_initialized > 0
        c.open("file:///t/pipe.py", "import os\n\n\ndef main(path):\n    return os.pa")
        items, dt = c.complete()
        assert "path" in [i["label"] for i in items] and 0 < dt < 30
        c.type_to(c.text[:-2] + "😀 = os.pa")  # an edit after a non-BMP character
        assert c.text.endswith("😀 = os.pa")
        items, _ = c.complete()
        assert "path" in [i["label"] for i in items]
        with pytest.raises(RuntimeError, match="-32601"):
            c.request("laya/noSuchMethod", {})
    finally:
        c.shutdown()
    assert c.proc.returncode == 0


def test_the_local_kernel_build_state(tmp_path, monkeypatch):
    """What the demo and ``--check`` read to tell a first start: no ahead-of-time kernels in the
    cache is not "built" (where numba is installed); their folder there is; no cache, no state."""
    from engine import kernels

    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path))
    has_numba = kernels._numba_version() != "none"
    assert kernels.local_build_state() == ("none" if has_numba else None)
    kernels.aot_folder().mkdir(parents=True)
    assert kernels.local_build_state() == ("built" if has_numba else None)
    monkeypatch.setenv("LAYA_CACHE_DIR", "")  # caching off: no kernels folder to build into
    assert kernels.local_build_state() is None
