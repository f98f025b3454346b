"""``initializationOptions``: typed, defaulted, one docstring per option.

Modelled on jedi-language-server's ``InitializationOptions``: a keyword-only dataclass whose fields
the client sends in camelCase (``debounceMs`` for ``debounce_ms``). Each option is structured on its
own with a strict cattrs converter, so one bad option costs only that option: it falls back to its
default (in a settings change, :mod:`.settings_change`, it keeps its current value), the others
keep their values, and :func:`parse_options` returns a message naming it in camelCase (the server
shows those with ``window/showMessage``). Unknown keys are reported and ignored.

This dataclass is the one list of options: the VS Code ``package.json`` (``laya.*`` settings), the
Neovim ``init_options`` example and the README table are checked against it by
``tests/test_options_agree.py``.
"""

from __future__ import annotations

import difflib
import json
import typing
from dataclasses import dataclass, fields, replace

import cattrs


@dataclass(kw_only=True)
class InitializationOptions:
    """Options a client may send in ``initialize``'s ``initializationOptions``."""

    model_path: str | None = None
    """Model folder (mlx-lm format). Unset: the model shipped inside the package. A Laya model
    folder replaces it; any other mlx-lm model folder (another architecture, 4/6/8-bit; needs the
    ``convert`` extra) writes inline completion's ghost text while the shipped model keeps the
    completion list. A folder that cannot be loaded is reported, and the shipped model is used."""
    variant: str = "code"
    """Engine variant from ``engine/configs/`` (``code`` or ``typing``)."""
    debounce_ms: int = 0
    """Milliseconds to wait before computing a completion (0 to 2000); a newer edit or request on
    the same document in that wait makes the older request answer empty. 0: no wait (a decision
    takes a few milliseconds, and a newer request already replaces an older one)."""
    max_items: int = 20
    """Most items in one completion list (0 to 1000)."""
    enable_inline: bool = True
    """Answer ``textDocument/inlineCompletion`` with the rest-of-line continuation."""
    log_level: str = "info"
    """``debug``, ``info``, ``warning`` or ``error``. The server's log at this level goes to the
    editor's log (``window/logMessage``: the Output panel in VS Code, the file
    ``vim.lsp.log.get_filename()`` names in Neovim); over stdio, stderr carries only errors."""
    backend: str | None = None
    """Override the variant's backend: ``numpy``, ``numba``, ``mlx`` or ``auto``. Unset: the variant's."""
    workspace_index: bool = True
    """Index the workspace folders' source files (honouring ``.gitignore``; at most 20,000 files
    and 30 MB) so that their names and phrases are suggested, per language; re-indexed on save
    and on file changes."""
    watch_process_id: bool = True
    """Exit when the editor process named by ``processId`` is gone. Turn it off when the editor
    runs in another PID namespace (a container, a remote host) and reuses a number of ours."""
    line_breaks: str = "auto"
    """Where the client's lines end: ``lsp`` (at ``\\n``, ``\\r\\n`` and a lone ``\\r``, as the LSP
    specification says; VS Code counts so), ``lf`` (at ``\\n`` only, as Emacs and Neovim count: a
    carriage return is a character of its line) or ``auto`` (``lf`` for a client whose ``clientInfo``
    names it ``Neovim``, ``emacs`` (lsp-mode) or ``Eglot``; ``lsp`` for any other). Matters only
    where a line holds a carriage return (``^M`` in Emacs and Neovim): counted another way than
    the client's, every position below it names another line."""
    prose: bool = True
    """Complete words in Markdown, plain text, reStructuredText and commit messages with the typing
    variant's model (``configs/typing.toml``), loaded when the first such document is completed.
    Off (or when it cannot load): such documents get the code model and their own words."""
    system2: bool = False
    """Run System 2: a larger local model (SmolLM2-135M tuned on code, through llama.cpp; ``laya system2
    install`` puts it in place, the ``system2`` extra installs llama.cpp) that continues the line
    after each answer, on its own thread; while you type the next identifier it re-ranks the
    list's first items and its own guess for it, and inline completion shows the rest of its
    line. Costs ~220 MB and half the cores (one of two) while you type."""
    system2_path: str | None = None
    """System 2's model, a llama.cpp GGUF file (``~`` expands). Unset: the one ``laya system2
    install`` wrote."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


OPTION_NAMES = [_camel(f.name) for f in fields(InitializationOptions)]
"""The camelCase option names, in declaration order."""

_FIELDS = {_camel(f.name): f.name for f in fields(InitializationOptions)}
OPTION_NAME = {name: key for key, name in _FIELDS.items()}
"""Field name -> the option's camelCase name (``debounce_ms`` -> ``debounceMs``)."""
_TYPES = typing.get_type_hints(InitializationOptions)
_CHOICES = {
    "log_level": ("debug", "info", "warning", "error"),
    "backend": ("numpy", "numba", "mlx", "auto"),
    "line_breaks": ("auto", "lsp", "lf"),
}
_LOWER_BOUNDS = {"debounce_ms": 0, "max_items": 0}
_UPPER_BOUNDS = {"debounce_ms": 2000, "max_items": 1000}
"""A debounce past 2 s would make completion look dead; more than 1000 items is no list."""


def _json_type(value) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string",
            list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _strict_int(value, _type) -> int:
    # JSON has one number type: accept 50 and 50.0, refuse 5.5, "5" and true.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {_json_type(value)} {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"expected a whole number, got {value!r}")
    return int(value)


def _strict_bool(value, _type) -> bool:
    # cattrs' default is bool(value), which turns the string "false" into True.
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {_json_type(value)} {value!r}")
    return value


def _strict_str(value, _type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {_json_type(value)} {value!r}")
    return value


_converter = cattrs.Converter()
_converter.register_structure_hook(int, _strict_int)
_converter.register_structure_hook(bool, _strict_bool)
_converter.register_structure_hook(str, _strict_str)


def _check(name: str, value):
    """Structure and validate one option; raises ``TypeError``/``ValueError`` with the reason."""
    value = _converter.structure(value, _TYPES[name])
    if name in _CHOICES and value is not None:
        value = value.lower()
        if value not in _CHOICES[name]:
            raise ValueError(f"{value!r} is not one of {', '.join(_CHOICES[name])}")
    if name in _LOWER_BOUNDS and value < _LOWER_BOUNDS[name]:
        raise ValueError(f"must be >= {_LOWER_BOUNDS[name]}, got {value}")
    if name in _UPPER_BOUNDS and value > _UPPER_BOUNDS[name]:
        raise ValueError(f"must be <= {_UPPER_BOUNDS[name]}, got {value}")
    return value


def _unknown(key: str) -> str:
    hint = _camel(key) if _camel(key) in _FIELDS else None
    if hint is None:
        close = difflib.get_close_matches(key, OPTION_NAMES, n=1)
        hint = close[0] if close else None
    if hint:
        return f"unknown option {key!r} (did you mean {hint!r}?); ignored"
    return f"unknown option {key!r} (known: {', '.join(OPTION_NAMES)}); ignored"


def parse_options(raw, base: InitializationOptions | None = None, *,
                  source: str = "initializationOptions") -> tuple[InitializationOptions, list[str]]:
    """Structure ``initializationOptions`` (or changed settings) option by option.

    Args:
        raw: the decoded JSON value the client sent (``None`` when it sent none). A ``null`` value
            for a key means "unset" (clients often send that for settings the user left alone).
            ``{"laya": {...}}`` alone is read as its inner object (the settings section's shape).
        base: the values of options ``raw`` leaves out, is ``null`` for or gets wrong: the
            defaults (``initialize``), or the current values (a settings change).
        source: what ``raw`` is, for the message when it is not an object.

    Returns:
        ``(options, problems)``. ``options`` keeps every valid option; each invalid one has its
        value in ``base``. ``problems`` has one message per bad or unknown option, naming it in
        camelCase, e.g. ``"debounceMs: expected a number, got string 'x'; using 0"`` (its value
        in ``base``, in JSON).
    """
    defaults = InitializationOptions() if base is None else base
    if raw is None:
        return defaults, []
    if not isinstance(raw, dict):
        keeping = "using defaults" if base is None else "keeping the current values"
        return defaults, [f"{source} must be an object, got {_json_type(raw)}; {keeping}"]
    if len(raw) == 1 and isinstance(raw.get("laya"), dict):
        raw = raw["laya"]  # the settings section's shape (``{"laya": {...}}``), as settings take it
    values: dict = {}
    problems: list[str] = []
    for key, value in raw.items():
        name = _FIELDS.get(key)
        if name is None:
            problems.append(_unknown(str(key)))
            continue
        if value is None:
            continue
        try:
            values[name] = _check(name, value)
        except (TypeError, ValueError, cattrs.BaseValidationError) as e:
            reason = e.exceptions[0] if isinstance(e, cattrs.BaseValidationError) and e.exceptions else e
            problems.append(f"{key}: {reason}; using {json.dumps(getattr(defaults, name))}")
    return replace(defaults, **values), problems
