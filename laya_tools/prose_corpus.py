"""The prose corpus of the typing variant: package READMEs from PyPI and npm, pinned by version.

Real English prose that nobody on this project wrote: the long description (README) each PyPI
release carries (``https://pypi.org/pypi/<name>/<version>/json``, ``info.description``) and the
``README.md`` inside each npm tarball. Only permissive licences (MIT, BSD, Apache, ISC, PSF, MPL,
Unlicense, zlib, CC0) are kept; READMEs under :data:`MIN_CHARS`, mostly not English, or identical to
another are dropped. Each package has a ``split`` (whole packages: ``train``, ``tune``, ``eval``),
chosen from a hash of its name, so a held-out README never leaks into training.

``laya corpus --prose`` rebuilds the corpus from ``corpus/prose-manifest.json``; ``--discover``
writes a new manifest (PyPI: a breadth-first walk of ``requires_dist`` from well-known packages;
npm: the same walk over ``dependencies`` from well-known packages). Network at build time only.
Layout: ``<out>/<split>/prose/<source>-<package>/README.<md|rst|txt>``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import tarfile
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .corpus import Package

log = logging.getLogger(__name__)

MANIFEST = Path(__file__).resolve().parent.parent / "corpus" / "prose-manifest.json"
MIN_CHARS = 1500
"""Shorter READMEs are mostly badges and an install line."""
MAX_CHARS = 60_000
"""A README is cut here (at a line end): a few packages ship their whole manual as the README."""
MAX_TARBALL_BYTES = 4_000_000
PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|ISC|PSF|Python Software Foundation|MPL|Mozilla Public|"
                        r"Unlicense|zlib|CC0|0BSD|BlueOak)\b", re.IGNORECASE)
PYPI_SEEDS = (
    "requests django flask fastapi numpy pandas scipy matplotlib pytest click rich typer httpx "
    "aiohttp sqlalchemy pydantic attrs jinja2 black isort mypy ruff sphinx celery redis boto3 "
    "pillow scikit-learn tqdm pyyaml toml tomli packaging setuptools wheel pip virtualenv tox nox "
    "poetry-core hatchling docutils pygments markdown mkdocs networkx sympy arrow pendulum "
    "python-dateutil cryptography paramiko fabric invoke structlog loguru tenacity cachetools "
    "more-itertools toolz boltons marshmallow cattrs msgpack orjson ujson starlette uvicorn "
    "gunicorn werkzeug itsdangerous websockets trio anyio pluggy coverage hypothesis faker "
    "selenium beautifulsoup4 lxml html5lib scrapy tornado twisted psutil watchdog schedule "
    "apscheduler alembic peewee pymongo elasticsearch kombu dask xarray polars pyarrow numba "
    "jsonschema openapi-spec-validator pyjwt oauthlib authlib passlib bcrypt humanize tabulate "
    "prettytable colorama termcolor blessed prompt-toolkit textual ipython jupyter-core nbformat "
    "pre-commit flake8 pylint bandit pyflakes pycodestyle autopep8 yapf sqlparse pyparsing lark "
    "parso jedi rope pytest-cov pytest-mock responses vcrpy freezegun factory-boy").split()
NPM_SEEDS = (
    "react react-dom vue svelte express koa fastify hapi next nuxt vite webpack rollup esbuild "
    "parcel babel-core typescript eslint prettier jest mocha chai vitest ava tap sinon lodash "
    "underscore ramda immutable rxjs axios node-fetch got superagent request chalk commander "
    "yargs minimist inquirer ora boxen debug winston pino morgan dotenv cross-env rimraf glob "
    "fast-glob chokidar nodemon pm2 concurrently uuid nanoid moment dayjs date-fns luxon "
    "classnames clsx styled-components emotion tailwindcss postcss autoprefixer sass less "
    "marked markdown-it remark unified cheerio jsdom puppeteer playwright socket.io ws "
    "mongoose sequelize knex pg mysql2 redis ioredis graphql apollo-server zod yup joi ajv "
    "jsonwebtoken bcryptjs passport helmet cors body-parser multer sharp jimp semver "
    "async bluebird p-limit p-queue execa shelljs fs-extra mkdirp del tmp which "
    "handlebars ejs pug mustache nunjucks d3 three chart.js leaflet redux mobx zustand "
    "immer formik react-router react-query swr i18next validator qs query-string").split()


def _get(url: str, limit: int = 20_000_000) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "laya-corpus/1 (+prose)"})
    with urllib.request.urlopen(req, timeout=60) as r:
        data = r.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{url}: larger than {limit} bytes")
    return data


def split_of(name: str) -> str:
    """The package's split from a hash of its name: ~10% eval, ~5% tune, the rest train."""
    h = int(hashlib.sha1(name.encode()).hexdigest(), 16) % 20
    return "eval" if h < 2 else "tune" if h == 2 else "train"


def is_english(text: str) -> bool:
    """Mostly ASCII letters among the non-blank characters, and common English words present."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return False
    ascii_letters = sum(c.isascii() and c.isalpha() for c in chars) / len(chars)
    words = re.findall(r"[a-z]+", text.lower())
    common = sum(w in ("the", "and", "to", "of", "is", "a", "for", "you", "this", "with") for w in words)
    return ascii_letters > 0.6 and common > 0.03 * max(1, len(words))


def clean(text: str) -> str:
    """LF line ends, no trailing blanks, cut to :data:`MAX_CHARS` at a line end."""
    text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    if len(text) > MAX_CHARS:
        text = text[: text.rfind("\n", 0, MAX_CHARS) + 1]
    return text.strip("\n") + "\n"


# --------------------------------------------------------------------------------- PyPI

def _pypi_license(info: dict) -> str:
    for key in ("license_expression", "license"):
        v = (info.get(key) or "").strip()
        if v and len(v) < 80 and v.upper() not in ("UNKNOWN", "NONE"):
            return v
    return " / ".join(c.split("::")[-1].strip() for c in info.get("classifiers") or []
                      if c.startswith("License"))


def _pypi_readme(name: str, version: str | None = None) -> tuple[Package, str, str] | None:
    url = f"https://pypi.org/pypi/{urllib.parse.quote(name)}/" + (f"{version}/json" if version else "json")
    info = json.loads(_get(url))["info"]
    ext = {"text/markdown": "md", "text/x-rst": "rst"}.get(
        (info.get("description_content_type") or "text/x-rst").split(";")[0].strip(), "txt")
    pkg = Package("pypi", info["name"], info["version"], split_of("pypi:" + info["name"].lower()),
                  "prose", _pypi_license(info))
    return pkg, info.get("description") or "", ext


def _pypi_requires(name: str) -> list[str]:
    info = json.loads(_get(f"https://pypi.org/pypi/{urllib.parse.quote(name)}/json"))["info"]
    out = []
    for req in info.get("requires_dist") or []:
        if "extra ==" in req:
            continue
        m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
        if m:
            out.append(m.group().lower())
    return out


def discover_pypi(limit: int) -> list[str]:
    """Up to ``limit`` PyPI names: the seeds, then their dependencies, breadth first."""
    seen, order, frontier = set(), [], list(PYPI_SEEDS)
    while frontier and len(order) < limit:
        batch, frontier = frontier[:32], frontier[32:]
        batch = [n for n in batch if n not in seen]
        seen.update(batch)
        order.extend(batch)
        with ThreadPoolExecutor(8) as ex:
            for deps in ex.map(lambda n: _safe(_pypi_requires, n) or [], batch):
                frontier.extend(d for d in deps if d not in seen)
    return order[:limit]


# --------------------------------------------------------------------------------- npm

def _npm_latest(name: str) -> tuple[str, list[str]]:
    meta = json.loads(_get(f"https://registry.npmjs.org/{name}/latest"))
    return meta["version"], sorted(meta.get("dependencies") or {})


def discover_npm(limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` ``(name, latest version)``: the seeds, then their dependencies, breadth first."""
    seen, order, frontier = set(), [], list(NPM_SEEDS)
    while frontier and len(order) < limit:
        batch, frontier = frontier[:32], frontier[32:]
        batch = [n for n in batch if n not in seen]
        seen.update(batch)
        with ThreadPoolExecutor(8) as ex:
            for name, got in zip(batch, ex.map(lambda n: _safe(_npm_latest, n), batch)):
                if got is not None:
                    order.append((name, got[0]))
                    frontier.extend(d for d in got[1] if d not in seen)
    return order[:limit]


def _npm_readme(name: str, version: str) -> tuple[Package, str, str] | None:
    base = name.split("/")[-1]
    data = _get(f"https://registry.npmjs.org/{name}/-/{base}-{version}.tgz", MAX_TARBALL_BYTES)
    readme, license_ = "", ""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if not m.isfile() or len(parts) != 2:
                continue
            if parts[1].lower() == "readme.md" and not readme:
                readme = tar.extractfile(m).read().decode("utf-8", "replace")
            elif parts[1] == "package.json":
                try:
                    lic = json.loads(tar.extractfile(m).read()).get("license", "")
                except ValueError:
                    lic = ""
                license_ = lic if isinstance(lic, str) else (lic or {}).get("type", "")
    pkg = Package("npm", name, version, split_of("npm:" + name), "prose", license_)
    return pkg, readme, "md"


# --------------------------------------------------------------------------------- build

def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - one package failing must not stop the build
        log.warning("%s%r: %s", fn.__name__, args, e)
        return None


def _keep(got, out: Path, hashes: set) -> Package | None:
    if got is None:
        return None
    pkg, text, ext = got
    text = clean(text)
    if not PERMISSIVE.search(pkg.license or "") or len(text) < MIN_CHARS or not is_english(text):
        return None
    digest = hashlib.sha1(text.encode()).hexdigest()
    if digest in hashes:
        return None
    hashes.add(digest)
    dest = out / pkg.split / "prose" / f"{pkg.source}-{pkg.folder}"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"README.{ext}").write_text(text, "utf-8")
    pkg.files, pkg.bytes = 1, len(text.encode())
    return pkg


def build(out: Path, packages: list[Package]) -> list[Package]:
    """Fetch the pinned READMEs of ``packages`` into ``out``; returns those kept."""
    hashes: set = set()

    def fetch(p: Package):
        return _safe(_pypi_readme, p.name, p.version) if p.source == "pypi" else _safe(_npm_readme, p.name, p.version)

    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(fetch, packages))
    return [k for g in got if (k := _keep(g, out, hashes)) is not None]


def discover(out: Path, pypi: int = 700, npm: int = 900) -> list[Package]:
    """Find packages (see the module docstring), fetch their latest READMEs into ``out``."""
    names = discover_pypi(pypi)
    log.info("pypi: %d names", len(names))
    pairs = discover_npm(npm)
    log.info("npm: %d names", len(pairs))
    hashes: set = set()
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda n: _safe(_pypi_readme, n), names))
        got += list(ex.map(lambda nv: _safe(_npm_readme, *nv), pairs))
    kept = [k for g in got if (k := _keep(g, out, hashes)) is not None]
    log.info("kept %d of %d READMEs", len(kept), len(got))
    return kept


def save_manifest(packages: list[Package], path: Path = MANIFEST, extra: dict | None = None) -> None:
    data = {"packages": [p.__dict__ for p in sorted(packages, key=lambda p: (p.source, p.name))]}
    data.update(extra or {})
    path.write_text(json.dumps(data, indent=1) + "\n")


def load_manifest(path: Path = MANIFEST) -> list[Package]:
    return [Package(**p) for p in json.loads(path.read_text())["packages"]]
