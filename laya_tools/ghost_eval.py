"""How often the ghost text shown while typing is right: held-out files typed key by key through
the server, an ``textDocument/inlineCompletion`` request after every key, as Neovim's ghost text
(``editors/nvim/lua/laya/inline.lua``) and VS Code ask.

``python -m laya_tools.ghost_eval [--split eval] [--files 3] [--max-chars 4000]`` prints, per
language and per kind of place (the character before the cursor), the requests, the ghost texts
shown and how many were right (the file goes on exactly as the ghost text says), partly right (it
goes on with the ghost text's first word or sign) or wrong, and the characters a user who accepts
every right one as soon as it shows would not type. Files: ``laya_tools.evaluate.pick_files``,
the same as ``laya eval`` (``laya corpus`` first). The workspace index and the prose model are off.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict
from pathlib import Path

from .cli import DEFAULT_CORPUS
from .evaluate import pick_files
from .pipe_client import PipeClient, position

OPERATORS = set("=+-*/<>!&|%^~?:")
PLACES = ("identifier", "indentation", "blank", "member", "open", "close", "comma", "operator", "quote", "other")
EXTENSIONS = {"python": "py", "javascript": "js", "typescript": "ts", "go": "go", "rust": "rs", "c": "c"}


def place(prefix: str) -> str:
    """The kind of place the cursor is at, from the character before it (:data:`PLACES`)."""
    c = prefix[-1:]
    line = prefix[prefix.rfind("\n") + 1:]
    if not c or c == "\n" or not line.strip():
        return "indentation"
    if c.isalnum() or c == "_":
        return "identifier"
    if c == "." or prefix.endswith(("->", "::")):
        return "member"
    for name, signs in (("open", "([{"), ("close", ")]}"), ("blank", " \t"), ("comma", ",;"), ("quote", "'\"`")):
        if c in signs:
            return name
    return "operator" if c in OPERATORS else "other"


def verdict(ghost: str, after: str) -> str:
    """``right`` when the text ``after`` the cursor starts with ``ghost``, ``partly`` when it starts
    with its first word or sign (blanks before it included), else ``wrong``."""
    if after.startswith(ghost):
        return "right"
    m = re.match(r"\s*(\w+|\S)", ghost)
    return "partly" if m and after.startswith(ghost[: m.end()]) else "wrong"


def ghost_of(item: dict, prefix: str) -> str:
    """What an inline item adds after the cursor: its ``insertText`` past the part its range covers
    (the word typed so far; the range is on the cursor's line and ends at the cursor)."""
    r = item.get("range")
    covered = r["end"]["character"] - r["start"]["character"] if r else 0
    word = prefix[len(prefix) - covered:] if covered else ""
    text = item["insertText"]
    return text[len(word):] if text.startswith(word) else text


def accept_saved(shown: list[tuple[int, str, str]]) -> int:
    """Characters not typed by a user who accepts each right ghost text as soon as it shows:
    ``shown`` holds ``(offset, ghost, verdict)`` in typing order; after an accepted one, the
    ghost texts shown before its end are not seen."""
    saved, until = 0, 0
    for offset, ghost, v in shown:
        if offset >= until and v == "right":
            saved += len(ghost)
            until = offset + len(ghost)
    return saved


def run(split: str, files: int, max_chars: int, languages: list[str] | None,
        corpus: Path = DEFAULT_CORPUS) -> dict:
    """Type the files; returns ``{language: {place: [requests, shown, right, partly, wrong]},
    "saved": {language: characters}}``."""
    picked = pick_files(corpus, files, max_chars, split=split, languages=languages)
    if not picked:
        raise SystemExit(f"no {split} files under {corpus}: run `laya corpus` first")
    counts: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0, 0]))
    saved: dict = defaultdict(int)
    client = PipeClient(init_options={"workspaceIndex": False, "prose": False})
    try:
        for n, f in enumerate(picked):
            uri = f"file:///laya-ghost-eval/doc{n}.{EXTENSIONS.get(f.language, 'txt')}"
            client.open(uri, "", f.language)
            shown = []
            t0 = time.perf_counter()
            for i in range(1, len(f.text) + 1):
                prefix = f.text[:i]
                client.type_to(prefix)
                res = client.request("textDocument/inlineCompletion", {
                    "textDocument": {"uri": uri}, "position": position(prefix, i), "context": {"triggerKind": 2}})
                items = (res or {}).get("items", []) if isinstance(res, dict) else (res or [])
                row = counts[f.language][place(prefix)]
                row[0] += 1
                if items:
                    ghost = ghost_of(items[0], prefix)
                    v = verdict(ghost, f.text[i:])
                    row[1] += 1
                    row[{"right": 2, "partly": 3, "wrong": 4}[v]] += 1
                    shown.append((i, ghost, v))
            saved[f.language] += accept_saved(shown)
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            print(f"  {f.language} {f.name}: {len(f.text)} characters, {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        client.shutdown()
    return {**counts, "saved": dict(saved)}


def report(result: dict) -> str:
    """The tables :func:`run`'s result makes."""
    saved = result["saved"]
    langs = sorted(k for k in result if k != "saved")
    total = defaultdict(lambda: [0, 0, 0, 0, 0])
    lines = [f"{'language':12}{'requests':>9}{'shown':>7}{'right':>7}{'partly':>7}{'wrong':>7}{'right %':>8}{'saved':>7}"]
    for lang in langs:
        row = [sum(r[k] for r in result[lang].values()) for k in range(5)]
        for p, r in result[lang].items():
            total[p] = [a + b for a, b in zip(total[p], r)]
        pct = 100 * row[2] / row[1] if row[1] else 0.0
        lines.append(f"{lang:12}{row[0]:9}{row[1]:7}{row[2]:7}{row[3]:7}{row[4]:7}{pct:8.1f}{saved.get(lang, 0):7}")
    lines.append(f"\n{'place':12}{'requests':>9}{'shown':>7}{'right':>7}{'partly':>7}{'wrong':>7}{'right %':>8}")
    for p in PLACES:
        r = total.get(p)
        if r:
            pct = 100 * r[2] / r[1] if r[1] else 0.0
            lines.append(f"{p:12}{r[0]:9}{r[1]:7}{r[2]:7}{r[3]:7}{r[4]:7}{pct:8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m laya_tools.ghost_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("eval", "tune"), default="eval")
    ap.add_argument("--files", type=int, default=3, help="files per language")
    ap.add_argument("--max-chars", type=int, default=4000, help="characters typed per file")
    ap.add_argument("--languages", default=None, help="comma-separated (default: all in the corpus)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = run(a.split, a.files, a.max_chars, a.languages.split(",") if a.languages else None, a.corpus)
    print(f"\nghost text typing the {a.split} packages key by key ({a.files} files x {a.max_chars} "
          f"characters per language), {time.perf_counter() - t0:.0f} s\n" + report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
