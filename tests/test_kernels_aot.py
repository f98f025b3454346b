"""The numba kernels compiled ahead of time (``engine.kernels``): the same logits as the JIT, and
a process that loads the build runs without numba or LLVM in memory."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import kernels
from engine.backends import make_backend
from engine.model_io import DEFAULT_MODEL_DIR

pytestmark = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")

PROBE = """
import json, resource, sys
from engine import kernels
from engine.backends import make_backend
from engine.model_io import DEFAULT_MODEL_DIR
b = make_backend(DEFAULT_MODEL_DIR, "numba", 64)
h = b.forward([5, 6, 7])
print(json.dumps({"source": kernels.source(), "numba": "numba" in sys.modules,
                  "llvmlite": "llvmlite" in sys.modules, "logits": b.logits(h).tolist()}))
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("laya-cache")
    env = dict(os.environ, LAYA_CACHE_DIR=str(root), LAYA_AOT="1")
    folder = Path(subprocess.run([sys.executable, "-c", "from engine import kernels; print(kernels.aot_folder())"],
                                 env=env, capture_output=True, text=True, check=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "engine.kernels", "build", str(folder)], env=env, check=True,
                   capture_output=True, timeout=300)
    return env, folder


def test_build_lands_whole_and_releases_its_lock(cache):
    env, folder = cache
    assert any(p.suffix == ".so" for p in folder.iterdir())
    assert not folder.with_name(folder.name + ".lock").exists()
    assert not list(folder.parent.glob(folder.name + ".tmp*"))


def test_aot_kernels_match_the_jit_without_numba_in_the_process(cache):
    env, _ = cache
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                                    check=True, timeout=120).stdout)
    assert out["source"] == "aot"
    assert not out["numba"] and not out["llvmlite"]
    jit = json.loads(subprocess.run([sys.executable, "-c", PROBE], env=dict(env, LAYA_AOT="0"),
                                    capture_output=True, text=True, check=True, timeout=120).stdout)
    assert jit["source"] == "jit" and jit["numba"]
    a, b = np.array(out["logits"]), np.array(jit["logits"])
    assert np.abs(a - b).max() < 1e-3
    assert a.argmax() == b.argmax()


GIL_PROBE = """
import json, sys, threading, time
import numpy as np
from engine import kernels
from engine.backends import make_backend
from engine.model_io import DEFAULT_MODEL_DIR
b = make_backend(DEFAULT_MODEL_DIR, "numba", 256)
x = b.emb[np.arange(5, 29)].astype(np.float32)
hs = np.empty((len(x), b.d), np.float32)
args = (x, 0, *b._q, b.norm, b.kT, b.v, b._cos, b._sin, b.h, b.kvh, b._eps, hs)
b._k.steps(*args)  # the backend's batched call (24 new tokens), as NumbaBackend.forward makes it
sys.setswitchinterval(1.0)  # a thread waiting for the GIL would wait past the end of the loop
seen = []
def other():  # runs Python only while the kernels do not hold the GIL
    while len(seen) < 2:
        seen.append(time.perf_counter())
        time.sleep(0.001)
t = threading.Thread(target=other)
t0 = time.perf_counter()
t.start()
for _ in range(50):
    b._k.steps(*args)  # kernel calls only: no NumPy call in between that would release the GIL
t1 = time.perf_counter()
t.join()
print(json.dumps({"source": kernels.source(), "other": [x - t0 for x in seen], "kernels_s": t1 - t0}))
"""


def test_aot_kernels_release_the_gil(cache):
    """The server's other threads (the event loop reading the next request) run while a kernel
    does: pycc has no ``nogil``, so the build sets numba's ``release_gil`` itself. Held, with the
    switch interval at 1 s, the other thread would not run before the kernels end."""
    env, _ = cache
    out = json.loads(subprocess.run([sys.executable, "-c", GIL_PROBE], env=env, capture_output=True, text=True,
                                    check=True, timeout=120).stdout)
    assert out["source"] == "aot"
    assert len(out["other"]) == 2 and out["other"][1] < out["kernels_s"], out


def test_a_broken_build_falls_back_to_the_jit(tmp_path, monkeypatch):
    """A damaged module in the cache is logged and skipped, never an error for the user."""
    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernels, "_loaded", None)
    monkeypatch.setattr(kernels, "start_build", lambda folder: False)
    folder = kernels.aot_folder()
    folder.mkdir(parents=True)
    (folder / f"{kernels.MODULE}.cpython-x.so").write_bytes(b"not an ELF file")
    k = kernels.load()
    assert kernels.source() == "jit" and hasattr(k, "step")
    b = make_backend(DEFAULT_MODEL_DIR, "numba", 16)
    assert np.isfinite(b.logits(b.forward([1, 2]))).all()


def test_a_failed_build_is_not_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path))
    folder = kernels.aot_folder()
    folder.parent.mkdir(parents=True)
    folder.with_name(folder.name + ".failed").write_text("CompileError: no linker\n")
    assert kernels.start_build(folder) is False


def test_a_build_that_failed_with_no_compiler_is_tried_again_with_one(tmp_path, monkeypatch):
    """A fresh user with no working C compiler, who then installs gcc: the build runs again
    (the marker names the compiler it failed with); with the same compiler it does not."""
    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path))
    folder = kernels.aot_folder()
    folder.parent.mkdir(parents=True)
    failed = folder.with_name(folder.name + ".failed")

    def broken(tmp, module):
        raise RuntimeError("no linker")

    import engine.kernels_numba as kn

    monkeypatch.setattr(kn, "build_aot", broken)
    with pytest.raises(RuntimeError):
        kernels.build(folder)
    assert failed.read_text().splitlines() == [kernels.FAILED_COMPILER + kernels._compiler(),
                                               "RuntimeError: no linker"]
    assert kernels.build_state(folder) == "failed" and kernels.start_build(folder) is False
    failed.write_text(kernels.FAILED_COMPILER + "\nCompileError: no C compiler\n")  # none, then
    assert kernels._compiler() != ""  # (this machine has one: installed since, as it were)
    assert kernels.build_state(folder) == "none" and not failed.exists()


UPGRADE_PROBE = """
import json, sys, time
from engine.predictor import Predictor
idle = Predictor.load(defer_jit=True)  # the language server's main model: idle steps switch it
idle.advance_on_keystroke = False
keys = Predictor.load(defer_jit=True)  # a model without idle steps (prose, HTTP): a keystroke does
first = [idle.backend.name, keys.backend.name]
numba_first = "numba" in sys.modules
text = "import os\\n\\n\\ndef main(argv):\\n    path = os.path.join(argv[0], 'x')\\n    return os.pa"
before = [[c.text for c in p.predict(text, doc_id="d")][:5] for p in (idle, keys)]
t0 = time.time()
while "numpy" in (idle.backend.name, keys.backend.name) and time.time() - t0 < 240:
    time.sleep(0.2)
    idle.idle_step()
    keys.predict(text, doc_id="d")
after = [[c.text for c in p.predict(text, doc_id="d")][:5] for p in (idle, keys)]
print(json.dumps({"first": first, "numba_first": numba_first, "then": [idle.backend.name, keys.backend.name],
                  "numba_then": "numba" in sys.modules, "before": before, "after": after,
                  "upgrade_left": hasattr(idle.backend, "upgrade") or idle._upgrade is not None}))
"""

needs_numba_default = pytest.mark.skipif(
    __import__("engine.backends", fromlist=["default_backend"]).default_backend() != "numba",
    reason="the automatic backend here is not numba (Apple Silicon: MLX)")


@needs_numba_default
def test_a_first_start_serves_on_numpy_then_switches_to_the_built_kernels(tmp_path):
    """The language server's first start on a machine (``defer_jit``) does not compile the JIT
    kernels in its process: the NumPy backend serves at once, the ahead-of-time build runs in the
    background, and an idle step (or, for a model without idle steps, a keystroke) switches to it;
    the answers stay the same."""
    env = dict(os.environ, LAYA_CACHE_DIR=str(tmp_path), LAYA_AOT="1")
    env.pop("LAYA_BACKEND", None)
    out = json.loads(subprocess.run([sys.executable, "-c", UPGRADE_PROBE], env=env, capture_output=True,
                                    text=True, check=True, timeout=300).stdout)
    assert out["first"] == ["numpy", "numpy"] and not out["numba_first"]
    assert out["then"] == ["numba", "numba"] and not out["numba_then"]  # the ahead-of-time build, no LLVM
    assert out["before"][0][0] == "path" and out["after"] == out["before"]
    assert not out["upgrade_left"]


def test_the_switch_keeps_the_kv_cache_and_its_windows():
    """``use_backend`` moves the live KV cache over (the layouts are the same): the next decision
    prefills nothing and answers as the old backend would; stored windows stay usable."""
    from engine.predictor import Predictor

    text = open(__import__("textwrap").__file__, encoding="utf-8").read()[:6000]
    p, ref = Predictor.load(backend="numpy"), Predictor.load(backend="numpy")
    for q in (p, ref):
        for end in (3000, 5000):  # a jump from a full window: it is stored
            q.predict(text[:end], doc_id="d")
            while q.idle_step():
                pass
    stored = len(p.windows)
    p.use_backend(make_backend(DEFAULT_MODEL_DIR, "numba", p.backend.capacity))
    assert p.backend.name == "numba" and len(p.windows) == stored > 0
    before = p.stats["forward_tokens"]
    a, b = p.predict(text[:5001], doc_id="d"), ref.predict(text[:5001], doc_id="d")
    assert p.stats["forward_tokens"] - before <= 2  # the cache came along
    assert [c.text for c in a[:5]] == [c.text for c in b[:5]]
    assert abs(a[0].score - b[0].score) < 1e-2


def _fresh_kernels(cache, monkeypatch, aot: str) -> None:
    """This process as on a machine with an empty cache folder ``cache`` (no kernels loaded)."""
    monkeypatch.setenv("LAYA_CACHE_DIR", str(cache))
    monkeypatch.setattr(kernels, "_loaded", None)
    monkeypatch.delenv("LAYA_BACKEND", raising=False)
    monkeypatch.setenv("LAYA_AOT", aot)


@needs_numba_default
def test_without_a_build_to_wait_for_the_jit_serves_at_once(tmp_path, monkeypatch):
    """Ahead-of-time builds off (or failed before): ``defer_jit`` changes nothing."""
    from engine.predictor import Predictor

    _fresh_kernels(tmp_path, monkeypatch, aot="0")
    assert kernels.prepare() == "jit"
    assert Predictor.load(defer_jit=True).backend.name == "numba"
    monkeypatch.setenv("LAYA_AOT", "1")
    monkeypatch.setattr(kernels, "_loaded", None)
    folder = kernels.aot_folder()
    folder.parent.mkdir(parents=True)
    folder.with_name(folder.name + ".failed").write_text("CompileError: no linker\n")
    assert kernels.prepare() == "jit"


@needs_numba_default
def test_a_build_that_dies_leaves_the_numpy_backend_serving(tmp_path, monkeypatch):
    from engine.predictor import Predictor

    _fresh_kernels(tmp_path, monkeypatch, aot="1")
    started = []

    def start(folder):  # a build whose process is killed at once: its lock stays behind
        dead = subprocess.Popen(["true"])
        dead.wait()
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.with_name(folder.name + ".lock").write_text(str(dead.pid))
        started.append(folder)
        return True

    monkeypatch.setattr(kernels, "start_build", start)
    p = Predictor.load(defer_jit=True)
    assert started and p.backend.name == "numpy" and kernels.build_state(started[0]) == "none"
    p.idle_step()
    assert p.backend.name == "numpy" and p._upgrade is None and not hasattr(p.backend, "upgrade")
    assert [c.text for c in p.predict("import os\nos.pa", doc_id="d")][0] == "path"
    # the next start does not wait for that lock: it starts a build of its own
    started.clear()
    monkeypatch.setattr(kernels, "_loaded", None)
    assert kernels.prepare() == "building" and started
