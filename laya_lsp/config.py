"""``initializationOptions``: typed, defaulted, one docstring per option.

Modelled on jedi-language-server's ``InitializationOptions``: a keyword-only dataclass, structured
with a cattrs converter that maps the client's camelCase keys to snake_case fields. A bad option
yields a message naming it (the server shows it with ``window/showMessage``) and the defaults.

This dataclass is the one list of options: the VS Code ``package.json`` (``laya.*`` settings), the
Neovim ``init_options`` example and the README table are checked against it by
``tests/test_options_agree.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

import cattrs
from cattrs.gen import make_dict_structure_fn, override


@dataclass(kw_only=True)
class InitializationOptions:
    """Options a client may send in ``initialize``'s ``initializationOptions``."""

    model_path: str | None = None
    """Model folder (mlx-lm format). None: the model shipped inside the package."""
    variant: str = "code"
    """Engine variant from ``configs/`` (``code`` or ``typing``)."""
    debounce_ms: int = 0
    """Wait this long before computing a completion; a newer edit or request on the same document
    in that window makes the older request answer empty. 0: no wait (one decision takes ~1 ms, so
    latest-wins alone keeps answers fresh)."""
    max_items: int = 20
    """Most items in one completion list."""
    enable_inline: bool = True
    """Answer ``textDocument/inlineCompletion`` with the rest-of-line continuation."""
    log_level: str = "info"
    """``debug``, ``info``, ``warning`` or ``error`` (stderr and ``window/logMessage``)."""
    backend: str | None = None
    """Override the variant's backend: ``numpy``, ``mlx`` or ``auto``."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


OPTION_NAMES = [_camel(f.name) for f in fields(InitializationOptions)]
"""The camelCase option names, in declaration order."""

_converter = cattrs.Converter(forbid_extra_keys=True)
_converter.register_structure_hook(
    InitializationOptions,
    make_dict_structure_fn(
        InitializationOptions, _converter, _cattrs_forbid_extra_keys=True,
        **{f.name: override(rename=_camel(f.name)) for f in fields(InitializationOptions)},
    ),
)
_CHOICES = {
    "log_level": {"debug", "info", "warning", "error"},
    "backend": {None, "numpy", "mlx", "auto"},
}


def parse_options(raw) -> tuple[InitializationOptions, list[str]]:
    """Structure ``initializationOptions``.

    Returns:
        ``(options, problems)``: on any problem, ``options`` is all defaults and ``problems`` names
        each bad option (e.g. ``"debounceMs: expected int, got 'x'"``).
    """
    if raw is None:
        return InitializationOptions(), []
    if not isinstance(raw, dict):
        return InitializationOptions(), [f"initializationOptions must be an object, got {type(raw).__name__}"]
    # Clients often send "null" for unset settings: treat as absent.
    raw = {k: v for k, v in raw.items() if v is not None}
    try:
        opts = _converter.structure(raw, InitializationOptions)
    except cattrs.BaseValidationError as e:
        return InitializationOptions(), cattrs.transform_error(e, path="initializationOptions")
    problems = []
    for name, allowed in _CHOICES.items():
        v = getattr(opts, name)
        if v not in allowed:
            problems.append(f"{_camel(name)}: {v!r} is not one of {sorted(a for a in allowed if a)}")
    for name in ("debounce_ms", "max_items"):
        if getattr(opts, name) < 0:
            problems.append(f"{_camel(name)}: must be >= 0")
    if problems:
        return InitializationOptions(), problems
    return opts, []
