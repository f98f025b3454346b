"""The editor clients and the README agree with ``laya_lsp.config.InitializationOptions``.

The dataclass is the one list of options (names, defaults, docstrings, choices). This checks the
three copies of it that people read: the VS Code ``package.json`` ``laya.*`` settings, the Neovim
``editors/nvim/lsp/laya.lua`` ``init_options`` and the ``## Options`` table in ``README.md``.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest

from laya_lsp import config
from laya_lsp.config import OPTION_NAMES, InitializationOptions

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_JSON = ROOT / "editors" / "vscode" / "package.json"
NVIM_LUA = ROOT / "editors" / "nvim" / "lsp" / "laya.lua"
README = ROOT / "README.md"
CLIENT_ONLY = {"laya.serverPath"}  # VS Code settings that are not sent to the server

FIELDS = {config._camel(f.name): f for f in dataclasses.fields(InitializationOptions)}
DEFAULTS = {name: f.default for name, f in FIELDS.items()}


def _docstrings() -> dict[str, str]:
    """camelCase option name -> its attribute docstring in ``config.py`` (read with ``ast``)."""
    tree = ast.parse(Path(config.__file__).read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "InitializationOptions")
    docs = {}
    for stmt, nxt in zip(cls.body, cls.body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[config._camel(stmt.target.id)] = nxt.value.value
    return docs


def _as_markdown(docstring: str) -> str:
    """A reST attribute docstring as one line of Markdown: ``x`` -> `x`, whitespace collapsed."""
    return " ".join(docstring.replace("``", "`").split())


def _json_types(annotation) -> list[str]:
    """JSON-schema types for a field annotation: ``int`` -> ["integer"], ``str | None`` -> ["string", "null"]."""
    names = {str: "string", int: "integer", bool: "boolean", float: "number", type(None): "null"}
    args = typing.get_args(annotation) or (annotation,)
    return [names[a] for a in args]


def _null_first(value):
    return (value is not None, value or "")


def _choices() -> dict[str, list]:
    """camelCase option name -> its allowed values, where the server restricts them."""
    hints = typing.get_type_hints(InitializationOptions)
    out = {}
    for field_name, values in config._CHOICES.items():
        allowed = set(values)
        if type(None) in typing.get_args(hints[field_name]):
            allowed.add(None)  # an optional setting: null (unset) is a choice too
        out[config._camel(field_name)] = sorted(allowed, key=_null_first)
    # variant: one per engine config file (engine/configs/*.toml)
    out["variant"] = sorted(p.stem for p in (ROOT / "engine" / "configs").glob("*.toml"))
    return out


# --- VS Code ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vscode_settings() -> dict[str, dict]:
    return json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))["contributes"]["configuration"]["properties"]


def test_vscode_settings_are_the_options(vscode_settings):
    server_side = set(vscode_settings) - CLIENT_ONLY
    assert server_side == {f"laya.{n}" for n in OPTION_NAMES}
    assert CLIENT_ONLY <= set(vscode_settings)


def test_vscode_defaults(vscode_settings):
    got = {k.removeprefix("laya."): v.get("default", "<no default>") for k, v in vscode_settings.items()
           if k not in CLIENT_ONLY}
    assert got == DEFAULTS
    assert vscode_settings["laya.serverPath"]["default"] == "laya-lsp"


def test_vscode_types_and_choices(vscode_settings):
    hints = typing.get_type_hints(InitializationOptions)
    choices = _choices()
    for name, field in FIELDS.items():
        setting = vscode_settings[f"laya.{name}"]
        types = setting["type"] if isinstance(setting["type"], list) else [setting["type"]]
        assert sorted(types) == sorted(_json_types(hints[field.name])), name
        if name in choices:
            assert sorted(setting.get("enum", []), key=_null_first) == choices[name], name
        else:
            assert "enum" not in setting, name


def test_vscode_bounds_are_the_servers(vscode_settings):
    # the settings UI refuses what the server would refuse (laya_lsp/config.py's bounds)
    for field_name in set(config._LOWER_BOUNDS) | set(config._UPPER_BOUNDS):
        setting = vscode_settings[f"laya.{config._camel(field_name)}"]
        assert setting.get("minimum") == config._LOWER_BOUNDS.get(field_name), field_name
        assert setting.get("maximum") == config._UPPER_BOUNDS.get(field_name), field_name
    for name, setting in vscode_settings.items():
        assert setting.get("scope") in ("window", "machine-overridable"), name


def test_vscode_descriptions_are_the_docstrings(vscode_settings):
    docs = _docstrings()
    assert set(docs) == set(OPTION_NAMES), "every option needs a docstring in laya_lsp/config.py"
    for name in OPTION_NAMES:
        setting = vscode_settings[f"laya.{name}"]
        got = setting.get("markdownDescription", setting.get("description"))
        assert got == _as_markdown(docs[name]), f"laya.{name}: copy the docstring from laya_lsp/config.py"


def test_vscode_defaults_parse_cleanly(vscode_settings):
    # what extension.js sends when the user changed nothing (unset settings go as null)
    sent = {k.removeprefix("laya."): v["default"] for k, v in vscode_settings.items() if k not in CLIENT_ONLY}
    assert config.parse_options(sent) == (InitializationOptions(), [])


def test_vscode_extension_sends_declared_settings():
    # extension.js builds initializationOptions from package.json's settings, so the list above is
    # the list sent; make sure it still does (no hard-coded option names there).
    src = (ROOT / "editors" / "vscode" / "extension.js").read_text(encoding="utf-8")
    assert "contributes.configuration.properties" in src
    for name in OPTION_NAMES:
        assert name not in src, f"extension.js hard-codes option {name!r}"


# --- Neovim -------------------------------------------------------------------------------------

_LUA_VALUE = {"nil": None, "vim.NIL": None, "true": True, "false": False}


def _lua_init_options(text: str) -> dict[str, object]:
    """Parse the flat ``init_options = { name = value, ... }`` table of ``lsp/laya.lua``."""
    text = re.sub(r"--[^\n]*", "", text)  # comments (no '--' inside the strings we use)
    m = re.search(r"\binit_options\s*=\s*\{([^{}]*)\}", text)
    assert m, f"{NVIM_LUA} has no flat init_options = {{ ... }} table"
    out = {}
    for entry in filter(None, (e.strip() for e in m.group(1).split(","))):
        em = re.fullmatch(r"([A-Za-z_]\w*)\s*=\s*(.+)", entry, re.S)
        assert em, f"can't parse init_options entry {entry!r}"
        key, raw = em.group(1), em.group(2).strip()
        assert key not in out, f"init_options.{key} twice"
        if raw in _LUA_VALUE:
            out[key] = _LUA_VALUE[raw]
        elif re.fullmatch(r"-?\d+", raw):
            out[key] = int(raw)
        elif re.fullmatch(r"-?\d*\.\d+", raw):
            out[key] = float(raw)
        elif re.fullmatch(r"'[^']*'|\"[^\"]*\"", raw):
            out[key] = raw[1:-1]
        else:
            raise AssertionError(f"init_options.{key}: unsupported Lua value {raw!r}")
    return out


def test_nvim_init_options():
    text = NVIM_LUA.read_text(encoding="utf-8")
    opts = _lua_init_options(text)
    assert list(opts) == OPTION_NAMES, "same names, in config.py's order"
    assert opts == DEFAULTS
    sent = {k: v for k, v in opts.items() if v is not None}  # nil entries are not in the Lua table
    assert config.parse_options(sent) == (InitializationOptions(), [])
    assert re.search(r"\bcmd\s*=\s*\{\s*'laya-lsp'\s*\}", text)
    assert re.search(r"\broot_markers\s*=\s*\{\s*'\.git'\s*\}", text)


def test_lua_parser_sees_nil_entries():
    # a nil entry vanishes from the Lua table at run time; the text must still name it
    assert _lua_init_options("init_options = { a = nil, -- x\n b = 'y', c = 3, d = false }") == {
        "a": None, "b": "y", "c": 3, "d": False}


# --- README -------------------------------------------------------------------------------------

def _readme_option_names(text: str) -> list[str] | None:
    """First-column `` `name` `` cells of the table under ``## Options``; None without that heading."""
    m = re.search(r"^## Options[ \t]*$(.*?)(?=^#{1,2} |\Z)", text, re.M | re.S)
    if not m:
        return None
    names = []
    for line in m.group(1).splitlines():
        cells = line.strip().strip("|").split("|") if line.lstrip().startswith("|") else None
        if cells:
            cm = re.fullmatch(r"\s*`([^`]+)`\s*", cells[0])
            if cm:
                names.append(cm.group(1))
    return names


def test_readme_options_table():
    text = README.read_text(encoding="utf-8") if README.exists() else ""
    names = _readme_option_names(text)
    if names is None:
        pytest.skip("README.md has no '## Options' heading yet (the lead writes it): nothing to check")
    assert names, "README.md '## Options' has no table rows whose first column is `name`"
    assert sorted(names) == sorted(OPTION_NAMES)
    assert len(names) == len(set(names)), "an option is listed twice"


def test_readme_parser():
    text = "# T\n## Options\n\nSome text.\n\n| Option | Default |\n|---|---|\n| `a` | 1 |\n| `b` | x |\n\n## Next\n| `c` | |\n"
    assert _readme_option_names(text) == ["a", "b"]
    assert _readme_option_names("# T\n## Usage\n") is None
