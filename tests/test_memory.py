"""Freed heap memory goes back to the OS (``engine.memory``), and the predictor does it after loads."""

from __future__ import annotations

import re
import sys

import pytest

from engine.memory import release_free_heap


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux only")
def test_freed_heap_in_the_middle_of_the_heap_is_given_back():
    release_free_heap()
    # 60 MB of 4 KB blocks (malloc's heap, not mmap), every 16th kept: the freed ones lie between
    # live blocks, so free() alone cannot shrink the heap
    blocks = [bytearray(4096) for _ in range(15_000)]
    kept = blocks[::16]
    del blocks
    before = _rss_mb()
    assert release_free_heap()
    after = _rss_mb()
    assert before - after > 30, (before, after)
    assert len(kept) == 938


def test_the_predictor_trims_after_a_new_language_in_a_pause():
    from engine.predictor import Predictor

    p = Predictor.load()
    p.warmup()
    assert not p._trim_heap  # warmup gave the load's temporaries back
    p.observe_document("file:///a.go", "package main\n\nfunc main() {\n\tfmt.Println(x)\n}\n", "go")
    p.predict("package main\n\nfunc main() {\n\tfmt.Pr", doc_id="file:///a.go")
    assert p._trim_heap  # the Go pool was built
    while p.idle_step():
        pass
    assert not p._trim_heap


def test_loaded_objects_are_frozen_out_of_the_collectors_walks():
    """After the warm-up and after a language's lexicon comes in (in a pause), the objects alive
    are in the collector's permanent generation, so no full collection walks them during a
    keystroke (``engine.memory.freeze_loaded_objects``)."""
    import gc

    from engine.predictor import Predictor

    gc.unfreeze()
    try:
        p = Predictor.load()
        assert gc.get_freeze_count() == 0
        p.warmup()
        after_load = gc.get_freeze_count()
        assert after_load > 10_000  # the model's, the tokenizer's and the test process's objects
        gc.unfreeze()
        p.observe_document("file:///a.rs", "fn main() {\n    let v = Vec::new();\n}\n", "rust")
        p.predict("fn main() {\n    let v = Vec::ne", doc_id="file:///a.rs")
        assert gc.get_freeze_count() == 0
        while p.idle_step():
            pass
        assert gc.get_freeze_count() > 10_000  # the Rust lexicon came in: frozen in the pause
    finally:
        gc.unfreeze()
