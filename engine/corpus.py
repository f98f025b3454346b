"""Build the training and evaluation corpus from registry packages.

The corpus is real Python code that nobody on this project wrote: pure-Python wheels from PyPI and
the Debian package of the CPython standard library, pinned by exact version in
``corpus/manifest.json``. Whole packages are held out for evaluation (``"split": "eval"``); no
package is split across train and eval. Vendored copies of other packages (``_vendor/`` and the
like) are dropped, so a held-out package cannot leak into training through another one's vendor
folder, and byte-identical files are kept once.

The corpus itself is not committed: ``laya corpus`` rebuilds it from the manifest (needs the
network to PyPI / Debian at training time only; nothing here runs at completion time).
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MANIFEST = Path(__file__).resolve().parent.parent / "corpus" / "manifest.json"
MAX_FILE_BYTES = 400_000
"""Files larger than this are skipped: they are generated tables, not code people type."""
_VENDOR = re.compile(r"(^|/)(_vendor|vendor|_vendored|vendored|_distutils_hack)(/|$)")


@dataclass
class Package:
    """One manifest entry."""

    source: str  # "pypi" or "debian"
    name: str
    version: str
    split: str  # "train" or "eval"
    license: str = ""
    files: int = 0
    bytes: int = 0
    tokens: int = 0


def load_manifest(path: Path = MANIFEST) -> list[Package]:
    """Read the manifest.

    Raises:
        FileNotFoundError: the manifest is missing.
    """
    data = json.loads(path.read_text())
    return [Package(**p) for p in data["packages"]]


def save_manifest(packages: list[Package], path: Path = MANIFEST, extra: dict | None = None) -> None:
    data = {"packages": [p.__dict__ for p in packages]}
    if extra:
        data.update(extra)
    path.write_text(json.dumps(data, indent=1) + "\n")


def _license_from_metadata(text: str) -> str:
    msg = email.parser.Parser().parsestr(text, headersonly=True)
    for key in ("License-Expression", "License"):
        v = msg.get(key)
        if v and len(v) < 80:
            return v.strip()
    classifiers = [c.split("::")[-1].strip() for c in msg.get_all("Classifier") or [] if c.startswith("License")]
    return " / ".join(classifiers)


def _fetch_pypi(pkg: Package, work: Path) -> dict[str, bytes]:
    dest = work / f"{pkg.name}-{pkg.version}"
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "--platform", "any", "--python-version", "3.11", "-d", str(dest), f"{pkg.name}=={pkg.version}"],
        check=True, stdout=subprocess.DEVNULL,
    )
    (wheel,) = dest.glob("*.whl")
    out: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.filename.endswith(".dist-info/METADATA"):
                pkg.license = _license_from_metadata(z.read(info).decode("utf-8", "replace"))
            elif info.filename.endswith(".py"):
                out[info.filename] = z.read(info)
    return out


def _fetch_debian(pkg: Package, work: Path) -> dict[str, bytes]:
    dest = work / f"{pkg.name}-{pkg.version}"
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", f"{pkg.name}={pkg.version}"], cwd=dest, check=True,
                   stdout=subprocess.DEVNULL)
    (deb,) = dest.glob("*.deb")
    root = dest / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    out: dict[str, bytes] = {}
    for f in root.rglob("*.py"):
        if f.is_symlink() or not f.is_file():
            continue
        rel = f.relative_to(root).as_posix()
        # The stdlib's own test suite holds deliberately broken and odd files; keep the library.
        if "/test/" in rel or "/tests/" in rel or "/idlelib/idle_test/" in rel:
            continue
        out[rel] = f.read_bytes()
    copyright = next(root.rglob("copyright"), None)
    pkg.license = "PSF-2.0" if copyright else pkg.license
    return out


def build(out_dir: Path, manifest: Path = MANIFEST) -> list[Package]:
    """Download every manifest package and write its ``.py`` files under ``out_dir/<split>/<name>/``.

    Args:
        out_dir: corpus folder; replaced if it exists.
        manifest: the pinned package list.

    Returns:
        The packages with ``license``, ``files`` and ``bytes`` filled in.

    Raises:
        subprocess.CalledProcessError: a package could not be downloaded.
    """
    packages = load_manifest(manifest)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    seen: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        # Eval packages first, so a file duplicated in a train package is dropped from train.
        for pkg in sorted(packages, key=lambda p: p.split != "eval"):
            fetch = _fetch_pypi if pkg.source == "pypi" else _fetch_debian
            files = fetch(pkg, Path(tmp))
            pkg.files = pkg.bytes = 0
            for rel, data in sorted(files.items()):
                if _VENDOR.search(rel) or len(data) > MAX_FILE_BYTES or not data.strip():
                    continue
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                digest = hashlib.sha1(data).hexdigest()
                if digest in seen:
                    continue
                seen.add(digest)
                target = out_dir / pkg.split / pkg.name / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                pkg.files += 1
                pkg.bytes += len(data)
            log.info("%s %s %s: %d files, %d bytes", pkg.split, pkg.name, pkg.version, pkg.files, pkg.bytes)
    return packages


def iter_files(corpus_dir: Path, split: str, packages: list[str] | None = None):
    """Yield ``(package, path)`` for every ``.py`` file of a split, in a stable order."""
    base = corpus_dir / split
    for pkg_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        if packages and pkg_dir.name not in packages:
            continue
        for f in sorted(pkg_dir.rglob("*.py")):
            yield pkg_dir.name, f


def read_split(corpus_dir: Path, split: str) -> list[str]:
    """All file texts of one split, CRLF normalised to LF."""
    return [f.read_text("utf-8").replace("\r\n", "\n") for _, f in iter_files(corpus_dir, split)]


def count_tokens(corpus_dir: Path, packages: list[Package], tokenizer) -> None:
    """Fill each package's ``tokens`` (with ``tokenizer``) from the built corpus."""
    for pkg in packages:
        base = corpus_dir / pkg.split / pkg.name
        texts = [f.read_text("utf-8").replace("\r\n", "\n") for f in sorted(base.rglob("*.py"))] if base.is_dir() else []
        pkg.tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
