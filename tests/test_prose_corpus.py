"""The typing variant's prose corpus: filters, splits and the manifest (offline)."""

from __future__ import annotations

import json

from engine import languages
from laya_tools import prose_corpus as pc
from laya_tools.corpus import Package
from laya_tools.evaluate import targets

ENGLISH = ("This library parses the configuration file and returns a dictionary of values. "
           "You can pass a path or a stream, and the parser will read it for you.\n") * 30


def test_split_is_stable_and_mostly_train():
    splits = [pc.split_of(f"pypi:pkg{i}") for i in range(2000)]
    assert splits == [pc.split_of(f"pypi:pkg{i}") for i in range(2000)]
    share = {s: splits.count(s) / len(splits) for s in ("train", "tune", "eval")}
    assert 0.8 < share["train"] < 0.9 and 0.07 < share["eval"] < 0.13 and 0.02 < share["tune"] < 0.08


def test_is_english():
    assert pc.is_english(ENGLISH)
    assert not pc.is_english("这是一个用于解析配置文件的库。" * 100)
    assert not pc.is_english("[![badge](https://x)](https://y) " * 50)
    assert not pc.is_english("")


def test_clean_cuts_at_a_line_end():
    text = pc.clean("a  \r\nb\r" + "word " * 20000)
    assert text.startswith("a\nb\n") and len(text) <= pc.MAX_CHARS + 1 and text.endswith("\n")


def test_keep_filters_licence_length_and_duplicates(tmp_path):
    def pkg(name, lic):
        return Package("pypi", name, "1.0", pc.split_of("pypi:" + name), "prose", lic)

    hashes: set = set()
    kept = pc._keep((pkg("good", "MIT"), ENGLISH, "md"), tmp_path, hashes)
    assert kept is not None and kept.bytes == len(pc.clean(ENGLISH).encode())
    assert (tmp_path / kept.split / "prose" / "pypi-good" / "README.md").read_text() == pc.clean(ENGLISH)
    assert pc._keep((pkg("copy", "MIT"), ENGLISH, "md"), tmp_path, hashes) is None  # same text
    assert pc._keep((pkg("gpl", "GPL-3.0"), ENGLISH + "x", "md"), tmp_path, hashes) is None
    assert pc._keep((pkg("short", "MIT"), "A tiny readme.\n", "md"), tmp_path, hashes) is None


def test_shipped_manifest_is_pinned_and_permissive():
    data = json.loads(pc.MANIFEST.read_text())["packages"]
    assert len(data) > 500
    for p in data:
        assert p["language"] == "prose" and p["version"] and pc.PERMISSIVE.search(p["license"]), p
        name = p["name"].lower() if p["source"] == "pypi" else p["name"]  # PyPI names: any case
        assert p["split"] == pc.split_of(f"{p['source']}:{name}"), p
    names = [(p["source"], p["name"]) for p in data]
    assert len(names) == len(set(names))
    assert {p["split"] for p in data} == {"train", "tune", "eval"}


def test_prose_documents_and_words():
    assert languages.for_document("markdown") is languages.PROSE
    # Neovim's filetypes (gitcommit, rst) and VS Code's commit message box (scminput)
    for language_id in ("gitcommit", "git-commit", "rst", "scminput"):
        assert languages.for_document(language_id, "file:///repo/.git/COMMIT_EDITMSG") is languages.PROSE
    assert languages.for_document(None, "file:///x/notes.txt") is languages.PROSE
    assert languages.PROSE not in languages.CODE_LANGUAGES
    assert [w for _, w in targets("It's a fine day, isn't it? Go 2 go.", "prose")] == \
        ["It", "fine", "day", "isn", "it", "Go", "go"]
