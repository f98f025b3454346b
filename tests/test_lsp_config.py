"""Unit tests of ``laya_lsp.config.parse_options``."""

from __future__ import annotations

import pytest

from laya_lsp.config import OPTION_NAMES, InitializationOptions, parse_options


def test_none_and_empty_give_defaults():
    assert parse_options(None) == (InitializationOptions(), [])
    assert parse_options({}) == (InitializationOptions(), [])


def test_valid_options_are_structured_from_camel_case():
    opts, problems = parse_options({"modelPath": "/m", "variant": "typing", "debounceMs": 30,
                                    "maxItems": 5, "enableInline": False, "logLevel": "DEBUG",
                                    "backend": "numpy"})
    assert problems == []
    assert opts == InitializationOptions(model_path="/m", variant="typing", debounce_ms=30,
                                         max_items=5, enable_inline=False, log_level="debug",
                                         backend="numpy")


def test_the_settings_section_s_shape_is_taken_too():
    """A fresh user sent ``{"laya": {...}}`` as ``initializationOptions``, the shape
    ``workspace/didChangeConfiguration`` takes, and got "unknown option 'laya'"."""
    assert parse_options({"laya": {"maxItems": 5}}) == (InitializationOptions(max_items=5), [])
    assert parse_options({"laya": {"maxItems": 5}, "maxItems": 3})[0].max_items == 3  # not alone: keys
    assert parse_options({"laya": 5})[1]  # not an object: an unknown option, as before


def test_null_means_unset():
    assert parse_options({"modelPath": None, "maxItems": None}) == (InitializationOptions(), [])


def test_whole_floats_are_ints_but_fractions_are_not():
    assert parse_options({"maxItems": 7.0})[0].max_items == 7
    opts, problems = parse_options({"maxItems": 7.5})
    assert opts.max_items == 20 and len(problems) == 1 and problems[0].startswith("maxItems:")


@pytest.mark.parametrize("key, value", [
    ("debounceMs", "soon"), ("debounceMs", True), ("debounceMs", -1), ("maxItems", [3]),
    ("enableInline", "false"), ("enableInline", 0), ("logLevel", "loud"), ("backend", "gpu"),
    ("variant", 3), ("modelPath", 42),
])
def test_one_bad_option_names_itself_and_keeps_the_others(key, value):
    raw = {"maxItems": 3, "debounceMs": 25, key: value}
    opts, problems = parse_options(raw)
    assert len(problems) == 1
    assert problems[0].startswith(f"{key}: "), problems
    assert "_" not in problems[0].split(":")[0], "messages use the camelCase name"
    default = InitializationOptions()
    field = {"debounceMs": "debounce_ms", "maxItems": "max_items", "enableInline": "enable_inline",
             "logLevel": "log_level", "backend": "backend", "variant": "variant",
             "modelPath": "model_path"}[key]
    assert getattr(opts, field) == getattr(default, field)
    if key != "maxItems":
        assert opts.max_items == 3
    if key != "debounceMs":
        assert opts.debounce_ms == 25


def test_unknown_keys_are_reported_with_a_hint_and_ignored():
    opts, problems = parse_options({"max_items": 4, "debounceMS": 10, "frobnicate": 1, "maxItems": 6})
    assert opts.max_items == 6 and opts.debounce_ms == 0
    assert len(problems) == 3
    assert "'max_items'" in problems[0] and "'maxItems'" in problems[0]
    assert "'debounceMS'" in problems[1] and "'debounceMs'" in problems[1]
    assert "'frobnicate'" in problems[2] and all(n in problems[2] for n in OPTION_NAMES)


def test_non_object_gives_defaults_and_a_problem():
    opts, problems = parse_options(["maxItems", 3])
    assert opts == InitializationOptions()
    assert problems and "must be an object" in problems[0]


def test_a_settings_change_keeps_current_values_for_missing_null_and_bad_keys():
    current = InitializationOptions(max_items=3, debounce_ms=50, variant="typing")
    opts, problems = parse_options({"maxItems": 5000, "debounceMs": None, "enableInline": False},
                                   current, source="settings")
    assert opts == InitializationOptions(max_items=3, debounce_ms=50, variant="typing", enable_inline=False)
    assert problems == ["maxItems: must be <= 1000, got 5000; using 3"]
    assert current.enable_inline is True, "the base is not modified"
    assert parse_options([1], current, source="settings") == (
        current, ["settings must be an object, got array; keeping the current values"])


def test_settings_section_of_pushed_settings():
    from laya_lsp.settings_change import section_of

    assert section_of({"laya": {"maxItems": 2}, "pylsp": {"x": 1}}) == {"maxItems": 2}
    assert section_of({"maxItems": 2, "maxItem": 1, "python": {"analysis": {}}}) == {"maxItems": 2, "maxItem": 1}
    assert section_of({"maxItems": {"nested": 1}}) == {"maxItems": {"nested": 1}}  # reported as bad
    assert section_of({"pylsp": {"plugins": {}}}) is None
    assert section_of({"laya": None}) is None
    # VS Code's laya.serverPath is the extension's own setting: no "unknown option" for it
    assert section_of({"laya": {"serverPath": "/venv/bin/laya-lsp", "maxItems": 2}}) == {"maxItems": 2}
    assert section_of({"serverPath": "/venv/bin/laya-lsp"}) is None
