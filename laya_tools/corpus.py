"""Build the training, tuning and evaluation corpus from registry packages.

The corpus is real code that nobody on this project wrote, in six languages, pinned by exact
version in ``corpus/manifest.json``:

* Python: pure-Python wheels from PyPI and Debian's CPython standard library;
* JavaScript and TypeScript: npm tarballs (``npm pack``), TypeScript from packages that ship their
  ``.ts`` sources;
* Go: Debian's ``golang-1.19-src`` (the standard library) and ``golang-*-dev`` packages;
* Rust: Debian's ``rust-src`` (the standard library) and ``librust-*-dev`` crates;
* C: Debian source packages (``apt-get source``: lua, curl, libuv, redis, ...).

Every package has a ``split``: ``train``; ``tune`` (whole packages that ranking weights are tuned
on); ``eval`` (whole packages for the reported numbers, never tuned on). No package is split
across them. Vendored copies of other code (``vendor/``, ``third_party/``, ``node_modules/``,
``deps/``), test data, generated files (Go's "Code generated ... DO NOT EDIT", minified or bundled
JavaScript) and byte-identical files are dropped, so a held-out package cannot leak into training
through another's vendor folder.

The corpus itself is not committed: ``laya corpus`` rebuilds it from the manifest (needs the
network to PyPI, npm and Debian at training time only; nothing here runs at completion time).
Layout: ``<out>/<split>/<language>/<package>/<path>``.
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
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from engine.languages import BY_NAME, Language

log = logging.getLogger(__name__)

MANIFEST = Path(__file__).resolve().parent.parent / "corpus" / "manifest.json"
SPLITS = ("train", "tune", "eval")
MAX_FILE_BYTES = 400_000
"""Files larger than this are skipped: they are generated tables, not code people type."""
MAX_PACKAGE_BYTES = 24_000_000
"""A package's files are taken (in path order) up to this many bytes (the Go and Rust standard
libraries alone are larger than the rest of their language's corpus)."""
MAX_LINE_CHARS = 1000
"""A file with a longer line is minified or generated."""
_DROP_DIR = re.compile(
    r"(^|/)(_vendor|vendor|_vendored|vendored|third_party|third-party|node_modules|deps|testdata|"
    r"dist|umd|bundles?|_distutils_hack|idle_test|min|\.pc|debian)(/|$)")
"""Vendored code, test data, bundles, and Debian's patch bookkeeping (``.pc/`` holds copies of
patched files; ``debian/`` is packaging)."""
_DROP_NPM_DIR = re.compile(r"(^|/)(build|coverage|lib-cov)(/|$)")
"""In npm tarballs these hold build output (a bundled copy of the sources)."""
_GENERATED = re.compile(rb"^// Code generated .* DO NOT EDIT\.$|@generated|automatically generated",
                        re.MULTILINE)


@dataclass
class Package:
    """One manifest entry."""

    source: str  # "pypi", "npm", "debian" (a binary package's files) or "debsrc" (a source package)
    name: str
    version: str
    split: str  # "train", "tune" or "eval"
    language: str = "python"
    license: str = ""
    files: int = 0
    bytes: int = 0
    tokens: int = 0

    @property
    def folder(self) -> str:
        """The package's folder name (npm scopes flattened)."""
        return self.name.replace("/", "__").lstrip("@")


def load_manifest(path: Path = MANIFEST) -> list[Package]:
    """Read the manifest.

    Raises:
        FileNotFoundError: the manifest is missing.
        ValueError: an entry names an unknown language or split.
    """
    data = json.loads(path.read_text())
    out = [Package(**p) for p in data["packages"]]
    for p in out:
        if p.language not in BY_NAME or p.split not in SPLITS:
            raise ValueError(f"{path}: {p.name}: unknown language {p.language!r} or split {p.split!r}")
    return out


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


def _is_source(rel: str, lang: Language) -> bool:
    name = rel.lower()
    return name.endswith(lang.corpus_endings) and not name.endswith(lang.exclude_suffixes)


def _fetch_pypi(pkg: Package, lang: Language, work: Path) -> dict[str, bytes]:
    dest = work / pkg.folder
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
            elif _is_source(info.filename, lang) and ".data/" not in info.filename:
                out[info.filename] = z.read(info)
    return out


def _fetch_npm(pkg: Package, lang: Language, work: Path) -> dict[str, bytes]:
    dest = work / pkg.folder
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "pack", "-q", f"{pkg.name}@{pkg.version}"], cwd=dest, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (tgz,) = dest.glob("*.tgz")
    out: dict[str, bytes] = {}
    with tarfile.open(tgz) as t:
        for m in t.getmembers():
            if not m.isfile():
                continue
            rel = m.name.split("/", 1)[-1]  # drop the "package/" folder
            if rel == "package.json":
                meta = json.loads(t.extractfile(m).read())
                lic = meta.get("license", "")
                pkg.license = lic if isinstance(lic, str) else lic.get("type", "")
            elif _is_source(rel, lang):
                out[rel] = t.extractfile(m).read()
    return out


def _walk(root: Path, lang: Language) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for f in sorted(root.rglob("*")):
        if f.is_symlink() or not f.is_file():
            continue
        rel = f.relative_to(root).as_posix()
        if _is_source(rel, lang):
            out[rel] = f.read_bytes()
    return out


def _copyright(root: Path) -> str:
    """The licence names of a Debian ``copyright`` file (machine-readable format)."""
    f = next((p for p in root.rglob("copyright") if p.is_file()), None)
    if f is None:
        return ""
    names = []
    for line in f.read_text("utf-8", "replace").splitlines():
        if line.startswith("License:"):
            n = line.split(":", 1)[1].strip()
            if n and n not in names:
                names.append(n)
    return " / ".join(names[:4])


def _fetch_debian(pkg: Package, lang: Language, work: Path) -> dict[str, bytes]:
    dest = work / pkg.folder
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", f"{pkg.name}={pkg.version}"], cwd=dest, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (deb,) = dest.glob("*.deb")
    root = dest / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    pkg.license = _copyright(root) or ("PSF-2.0" if "python" in pkg.name else "")
    out = _walk(root, lang)
    if pkg.name.startswith("libpython"):  # the stdlib's own test suite holds deliberately odd files
        out = {k: v for k, v in out.items() if "/test/" not in k and "/tests/" not in k}
    return out


def _fetch_debsrc(pkg: Package, lang: Language, work: Path) -> dict[str, bytes]:
    """A Debian source package (needs a ``deb-src`` line in apt's sources; see :func:`ensure_deb_src`)."""
    dest = work / pkg.folder
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "source", "-qq", f"{pkg.name}={pkg.version}"], cwd=dest, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = next(p for p in dest.iterdir() if p.is_dir())
    pkg.license = _copyright(root / "debian")
    return _walk(root, lang)


DEB_SRC = Path("/etc/apt/sources.list.d/laya-deb-src.sources")


def ensure_deb_src() -> None:
    """Add Debian's ``deb-src`` index (same mirror as the binary one) so ``apt-get source`` works."""
    if not DEB_SRC.exists():
        DEB_SRC.write_text("Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
                           "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
        subprocess.run(["apt-get", "update", "-qq"], check=True)


FETCH = {"pypi": _fetch_pypi, "npm": _fetch_npm, "debian": _fetch_debian, "debsrc": _fetch_debsrc}


def keep(rel: str, data: bytes, source: str = "") -> bool:
    """Whether a file is typed code: not vendored, test data, generated, minified or empty."""
    if source == "npm" and _DROP_NPM_DIR.search(rel.lower()):
        return False
    if _DROP_DIR.search(rel.lower()) or len(data) > MAX_FILE_BYTES or not data.strip():
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if _GENERATED.search(data[:2000]):
        return False
    return max(map(len, text.splitlines()), default=0) <= MAX_LINE_CHARS


def build(out_dir: Path, manifest: Path = MANIFEST, only: set[str] | None = None) -> list[Package]:
    """Download every manifest package and write its source files under
    ``out_dir/<split>/<language>/<package>/``.

    Args:
        out_dir: corpus folder; replaced if it exists (unless ``only`` is given).
        manifest: the pinned package list.
        only: languages to (re)build; the others are left as they are.

    Returns:
        The packages with ``license``, ``files`` and ``bytes`` filled in.

    Raises:
        subprocess.CalledProcessError: a package could not be downloaded.
    """
    packages = load_manifest(manifest)
    if out_dir.exists() and only is None:
        shutil.rmtree(out_dir)
    if any(p.source == "debsrc" for p in packages):
        ensure_deb_src()
    seen: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        # Eval, then tune packages first, so a file duplicated in a train package is dropped there.
        for pkg in sorted(packages, key=lambda p: SPLITS.index(p.split), reverse=True):
            if only is not None and pkg.language not in only:
                continue
            lang = BY_NAME[pkg.language]
            target_dir = out_dir / pkg.split / pkg.language / pkg.folder
            if target_dir.exists():
                shutil.rmtree(target_dir)
            files = FETCH[pkg.source](pkg, lang, Path(tmp))
            pkg.files = pkg.bytes = 0
            for rel, data in sorted(files.items()):
                if not keep(rel, data, pkg.source) or pkg.bytes + len(data) > MAX_PACKAGE_BYTES:
                    continue
                digest = hashlib.sha1(data).hexdigest()
                if digest in seen:
                    continue
                seen.add(digest)
                target = target_dir / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                pkg.files += 1
                pkg.bytes += len(data)
            shutil.rmtree(Path(tmp) / pkg.folder, ignore_errors=True)
            log.info("%s %s %s %s: %d files, %d bytes", pkg.split, pkg.language, pkg.name, pkg.version,
                     pkg.files, pkg.bytes)
    return packages


def iter_files(corpus_dir: Path, split: str, languages=None, packages=None):
    """Yield ``(language, package, path)`` for every source file of a split, in a stable order.

    Args:
        languages: names to keep (all when None).
        packages: package folder names to keep (all when None).
    """
    base = corpus_dir / split
    if not base.is_dir():
        return
    for lang_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        lang = BY_NAME.get(lang_dir.name)
        if lang is None or (languages and lang.name not in languages):
            continue
        for pkg_dir in sorted(p for p in lang_dir.iterdir() if p.is_dir()):
            if packages and pkg_dir.name not in packages:
                continue
            for f in sorted(pkg_dir.rglob("*")):
                if f.is_file() and _is_source(f.name, lang):
                    yield lang.name, pkg_dir.name, f


def read_text(path: Path) -> str:
    """A corpus file's text, CRLF normalised to LF."""
    return path.read_text("utf-8").replace("\r\n", "\n")


def read_split(corpus_dir: Path, split: str, languages=None) -> list[str]:
    """All file texts of one split (optionally of some languages)."""
    return [read_text(f) for _, _, f in iter_files(corpus_dir, split, languages)]


def read_split_by_language(corpus_dir: Path, split: str) -> dict[str, list[str]]:
    """File texts of one split, per language."""
    out: dict[str, list[str]] = {}
    for lang, _, f in iter_files(corpus_dir, split):
        out.setdefault(lang, []).append(read_text(f))
    return out


def count_tokens(corpus_dir: Path, packages: list[Package], tokenizer) -> None:
    """Fill each package's ``tokens`` (with ``tokenizer``) from the built corpus."""
    for pkg in packages:
        base = corpus_dir / pkg.split / pkg.language / pkg.folder
        lang = BY_NAME[pkg.language]
        texts = ([read_text(f) for f in sorted(base.rglob("*")) if f.is_file() and _is_source(f.name, lang)]
                 if base.is_dir() else [])
        pkg.tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
