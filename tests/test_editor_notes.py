"""The editor notes that no test can run here (Helix) are at least well-formed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from laya_lsp.config import InitializationOptions, parse_options

README = Path(__file__).resolve().parents[1] / "editors" / "README.md"


def test_helix_snippet_parses_and_its_options_are_valid():
    section = re.search(r"^## Helix\s*$(.*?)(?=^## )", README.read_text(encoding="utf-8"), re.M | re.S)
    assert section, "editors/README.md has no '## Helix' section"
    (block,) = re.findall(r"^```toml\n(.*?)^```", section.group(1), re.M | re.S)
    config = tomllib.loads(block)
    server = config["language-server"]["laya"]
    assert server["command"] == "laya-lsp"
    options, problems = parse_options(server.get("config", {}))
    assert problems == [], problems
    assert options == InitializationOptions(**{"max_items": server["config"]["maxItems"]})
    assert any("laya" in lang["language-servers"] for lang in config["language"])
