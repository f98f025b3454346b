"""Edge cases of the README's Neovim set-up, typed into a headless Neovim 0.11 one key at a time.

The ``init.lua`` is the README's block (``tests/test_nvim_typing.py``'s :func:`readme_setup`);
``laya-lsp`` runs behind ``tee``, so that what Neovim sent can be replayed afterwards through the
server's own document code (:class:`laya_lsp.text_document.LspTextDocument`) and compared with the
buffers Neovim holds at the end: the server's copy of every open document must be Neovim's text.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from lsprotocol import converters, types
from pygls.workspace.position_codec import PositionCodec

from laya_lsp.text_document import LspTextDocument, line_breaks_for
from test_nvim_client import NVIM
from test_nvim_typing import LAYA_LSP, MENU_SNAP, OPEN_AND_WARM, README, readme_setup
from test_nvim_typing import pytestmark as needs_nvim  # skipped, saying why, without Neovim

PY = '''import json


class Reader:
    def __init__(self, scale):
        self.scale = scale

'''

GO = '''package main

import "fmt"

func main() {
\tfmt.Println("hi")
}
'''

HARNESS = r"""
local P = vim.json.decode(table.concat(vim.fn.readfile(vim.env.LAYA_NVIM_EDGE), '\n'))
local out = { snaps = {}, values = {} }
local function finish(err)
  out.error = err
  out.bufs = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) then
      out.bufs[vim.api.nvim_buf_get_name(b)] = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    end
  end
  out.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  out.messages = vim.api.nvim_exec2('messages', { output = true }).output
  vim.fn.writefile({ vim.json.encode(out) }, P.out)
  vim.cmd('qa!')
end
""" + MENU_SNAP + OPEN_AND_WARM + r"""local i = 0
local function step()
  i = i + 1
  local key = P.keys[i]
  if not key then
    vim.defer_fn(function() finish(nil) end, 300)
    return
  end
  if key.lua then
    table.insert(out.values, assert(loadstring('return ' .. key.lua))() or vim.NIL)
  else
    vim.api.nvim_input(key.input)
  end
  vim.defer_fn(function()
    table.insert(out.snaps, menu_snap(key.input or key.lua))
    step()
  end, key.gap_ms or 150)
end
vim.defer_fn(step, 300)
"""

INSERT_CHAR_PRE = "#vim.api.nvim_get_autocmds({ event = 'InsertCharPre', buffer = 0 })"


def typed(text: str, gap_ms: int = 130) -> list[dict]:
    return [{"input": {"\n": "<CR>", "<": "<LT>"}.get(c, c), "gap_ms": gap_ms} for c in text]


def frames(path: Path) -> list[dict]:
    data, out, i = path.read_bytes(), [], 0
    while (j := data.find(b"\r\n\r\n", i)) >= 0:
        header = dict(line.split(b":", 1) for line in data[i:j].split(b"\r\n"))
        n = int(header[b"Content-Length"])
        out.append(json.loads(data[j + 4:j + 4 + n]))
        i = j + 4 + n
    return out


def server_documents(sent: list[dict], received: list[dict]) -> dict[str, str]:
    """The open documents as the server holds them after ``sent`` (replayed through its code, with
    the line breaks it chose for the client: ``laya_lsp.text_document.line_breaks_for``)."""
    encoding = next((m["result"]["capabilities"].get("positionEncoding", "utf-16") for m in received
                     if isinstance(m.get("result"), dict) and "capabilities" in m["result"]), "utf-16")
    init = next(m["params"] for m in sent if m.get("method") == "initialize")
    line_breaks = line_breaks_for((init.get("clientInfo") or {}).get("name"),
                                  (init.get("initializationOptions") or {}).get("lineBreaks") or "auto")
    conv = converters.get_converter()
    docs: dict[str, LspTextDocument] = {}
    for m in sent:
        params = m.get("params") or {}
        if m.get("method") == "textDocument/didOpen":
            td = params["textDocument"]
            docs[td["uri"]] = LspTextDocument(td["uri"], td["text"], position_codec=PositionCodec(
                types.PositionEncodingKind(encoding)), line_breaks=line_breaks)
        elif m.get("method") == "textDocument/didChange":
            doc = docs[params["textDocument"]["uri"]]
            for change in params["contentChanges"]:
                kind = (types.TextDocumentContentChangePartial if "range" in change
                        else types.TextDocumentContentChangeWholeDocument)
                doc.apply_change(conv.structure(change, kind))
        elif m.get("method") == "textDocument/didClose":
            docs.pop(params["textDocument"]["uri"], None)
    return {uri: doc.source for uri, doc in docs.items()}


def run_session(tmp_path: Path, files: dict[str, str | bytes], keys: list[dict]) -> dict:
    """Open the first of ``files`` in Neovim with the README's block and play ``keys``."""
    assert LAYA_LSP.is_file(), f"{LAYA_LSP} is missing: pip install -e . puts it there"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    for name, text in files.items():
        (project / name).write_bytes(text.encode() if isinstance(text, str) else text)
    sent, received = tmp_path / "sent.jsonrpc", tmp_path / "received.jsonrpc"
    server = f"tee {shlex.quote(str(sent))} | {shlex.quote(str(LAYA_LSP))} | tee {shlex.quote(str(received))}"
    init = tmp_path / "init.lua"
    init.write_text(readme_setup(README.read_text(encoding="utf-8"))
                    + f"\nvim.lsp.config('laya', {{ cmd = {{ 'sh', '-c', {json.dumps(server)} }} }})\n",
                    encoding="utf-8")
    harness = tmp_path / "harness.lua"
    harness.write_text(HARNESS, encoding="utf-8")
    out, params = tmp_path / "out.json", tmp_path / "params.json"
    params.write_text(json.dumps({"file": str(project / next(iter(files))), "out": str(out), "keys": keys,
                                  "attach_ms": 120_000}))
    xdg = {f"XDG_{k}_HOME": str(tmp_path / "xdg" / k.lower()) for k in ("CONFIG", "DATA", "STATE", "CACHE")}
    env = {**os.environ, **xdg, "LAYA_NVIM_EDGE": str(params), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([NVIM, "--headless", "--clean", "-u", str(init), "-S", str(harness)], cwd=project,
                          env=env, capture_output=True, text=True,
                          timeout=240 + sum(k.get("gap_ms", 150) for k in keys) / 1000)
    log = tmp_path / "xdg" / "state" / "nvim" / "lsp.log"
    lsp_log = log.read_text(errors="replace") if log.exists() else ""
    assert out.exists(), f"nvim wrote no result (rc {proc.returncode}):\n{proc.stderr[-3000:]}\n{lsp_log[-3000:]}"
    got = json.loads(out.read_text())
    assert got.get("error") is None, got["error"] + lsp_log[-3000:]
    got["sent"], got["received"] = frames(sent), frames(received)
    got["lsp_log"] = lsp_log
    got["context"] = ("\n".join(f"{s['input']!r:12} pum={int(s['pum'])} {s['line']!r} {s['words'][:4]}"
                                for s in got["snaps"]) + f"\n--- messages ---\n{got['messages']}"
                      + f"\n--- lsp.log ---\n{lsp_log[-2000:]}")
    return got


def assert_server_has_the_buffers(got: dict) -> None:
    docs = server_documents(got["sent"], got["received"])
    assert docs, got["context"]
    for uri, text in docs.items():
        name = uri.removeprefix("file://")
        assert name in got["bufs"], f"{uri} is open in the server, not in Neovim" + got["context"]
        ending = "\r\n" if "\r\n" in text else "\n"
        assert text == ending.join(got["bufs"][name]) + ending, (
            f"the server's copy of {uri} differs from Neovim's buffer:\n{text!r}\n"
            f"{got['bufs'][name]!r}" + got["context"])


@needs_nvim
def test_the_server_keeps_neovims_text(tmp_path):
    """Multibyte text before the cursor, accepting an item, undo then typing on, ``:e!``, a CRLF
    buffer and a Go buffer with tabs switched back and forth, a visual-block insert: at the end
    the server holds exactly the text of each buffer, and accepted items replaced the prefix."""
    crlf = PY.replace("\n", "\r\n")
    keys = [{"input": "A"}, *typed("        s = 'é中😀' + self.sc"), {"input": "<C-n>", "gap_ms": 300},
            {"input": "<C-y>", "gap_ms": 300}, {"input": "<Esc>"},
            {"input": "o"}, *typed("        x = json.lo"), {"input": "<Esc>"},
            {"input": "u", "gap_ms": 300},  # the whole line goes in one change
            {"input": "o"}, *typed("        x = json.du"), {"input": "<Esc>"},
            {"input": ":e main.go<CR>", "gap_ms": 1500}, {"input": "Go"}, *typed("fmt.Pri"),
            {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300}, {"input": "<Esc>"},
            {"input": ":b reader.py<CR>", "gap_ms": 500}, {"input": "Go"}, *typed("        z = json.lo"),
            {"input": "<Esc>"}, {"input": ":b main.go<CR>", "gap_ms": 500},
            {"input": "gg0<C-v>2jI", "gap_ms": 300}, *typed("// "), {"input": "<Esc>", "gap_ms": 500},
            {"input": ":w<CR>:e!<CR>", "gap_ms": 1000}, {"input": "Go"}, *typed("fmt.Spr"), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": crlf, "main.go": GO}, keys)
    project = tmp_path / "project"
    reader = got["bufs"][str(project / "reader.py")]
    assert reader[-3].startswith("        s = 'é中😀' + self.sc") and reader[-3] != "        s = 'é中😀' + self.sc", (
        got["context"])
    assert reader[-2:] == ["        x = json.du", "        z = json.lo"], got["context"]
    main = [line.lstrip("\t") for line in got["bufs"][str(project / "main.go")]]  # Go's indent rules
    assert main[:3] == ["// package main", "// ", '// import "fmt"'], got["context"]
    assert main[-2].startswith("fmt.Pri") and main[-2] != "fmt.Pri" and main[-1] == "fmt.Spr", got["context"]
    assert_server_has_the_buffers(got)
    assert "[ERROR]" not in got["lsp_log"] and "E5108" not in got["messages"], got["context"]


@needs_nvim
def test_attaching_again_asks_once_per_key(tmp_path):
    """The client attaches to a buffer again after ``:bdelete``/``:edit`` or a server restart, and
    ``LspAttach`` runs the README's callback again: its ``InsertCharPre`` autocommand must not pile
    up (three of them asked three times per key)."""
    keys = [{"lua": INSERT_CHAR_PRE}, {"input": ":w<CR>:bdelete!<CR>", "gap_ms": 500},
            {"input": ":e reader.py<CR>", "gap_ms": 3000},
            {"lua": "vim.lsp.get_clients({ name = 'laya' })[1]:stop()", "gap_ms": 2000},
            {"input": ":e<CR>", "gap_ms": 6000}, {"lua": INSERT_CHAR_PRE, "gap_ms": 10},
            {"input": "Go"}, *typed("        x = json.lo", 200), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    fresh, _, again = got["values"]  # Neovim's own autotrigger autocommand and the README's
    assert fresh == again == 2, f"InsertCharPre autocommands: {fresh} at first, {again} after" + got["context"]
    asked = collections.Counter(m["params"]["position"]["character"] for m in got["sent"]
                                if m.get("method") == "textDocument/completion"
                                and m["params"]["position"]["line"] == len(PY.splitlines()))
    assert asked and max(asked.values()) <= 2, f"completion requests per cursor column: {asked}" + got["context"]


def accepted(got: dict, line: str) -> str:
    """The first item Neovim offered on ``line`` (the snapshot after the key that made it)."""
    before = next((s for s in reversed(got["snaps"]) if s["line"] == line[-200:]), None)
    assert before is not None and before["words"], f"no menu on {line!r}" + got["context"]
    return before["words"][0]


@needs_nvim
def test_accepting_inside_an_identifier_replaces_its_rest(tmp_path):
    """``self.c|le`` + ``class``: the server's edit covers ``cle``; Neovim 0.11 inserts an item up
    to the cursor only, and the README's ``CompleteDone`` autocommand deletes the rest (``le``)."""
    keys = [{"input": "A"}, *typed("        y = self.sle"), {"input": "<Left><Left><BS>", "gap_ms": 400},
            {"input": "c", "gap_ms": 800}, {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300},
            {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    before = next(s for s in reversed(got["snaps"]) if s["input"] == "c")
    assert before["line"] == "        y = self.cle" and before["words"], got["context"]
    assert got["lines"][-1] == "        y = self." + before["words"][0], got["context"]
    assert_server_has_the_buffers(got)


def accept_at(line: str, back: int) -> list[dict]:
    """Type ``line``, go ``back`` characters left, type ``c`` there (the menu opens) and accept
    the first item; the identifier ``line`` holds is ``...sle...``, so ``s|le`` becomes ``sc|le``."""
    return [{"input": "o"}, *typed(line), {"input": "<Left>" * back, "gap_ms": 400},
            {"input": "c", "gap_ms": 800}, {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300},
            {"input": "<Esc>"}]


@needs_nvim
def test_accepting_keeps_the_text_around_the_identifier(tmp_path):
    """Accepting an item in the middle of a word with more text after it on the line, at a word's
    end followed by ``(``, and inside a word after CJK and an emoji (UTF-16 units to the server,
    bytes to Neovim): each line is exactly its text with the identifier replaced by the item, and
    the server's copy is Neovim's text."""
    cases = [  # (typed, characters back, the line before <C-n>, its text around the identifier)
        ("        y = self.sle + 1", 6, "        y = self.scle + 1", ("        y = self.", " + 1")),
        ("        z = self.s(1)", 3, "        z = self.sc(1)", ("        z = self.", "(1)")),
        ("        s = 'é中😀' + self.sle", 2, "        s = 'é中😀' + self.scle",
         ("        s = 'é中😀' + self.", "")),
    ]
    keys = [{"input": "G"}] + [k for line, back, _, _ in cases for k in accept_at(line, back)]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    end = len(PY.splitlines())
    for n, (_, _, shown, (head, tail)) in enumerate(cases):
        assert got["lines"][end + n] == head + accepted(got, shown) + tail, got["context"]
    assert len(got["lines"]) == end + len(cases), got["context"]
    assert_server_has_the_buffers(got)
    assert "E5108" not in got["messages"], got["context"]


@needs_nvim
def test_undo_after_accepting_restores_the_text(tmp_path):
    """``self.s|le + 1`` in a saved file, ``c`` then an item accepted: ``u`` gives back the line as
    it was, in one step (the deleted rest is part of the same change), and so does the server."""
    text = PY + "        y = self.sle + 1\n"
    keys = [{"input": "G$", "gap_ms": 300}, {"input": "5hi", "gap_ms": 300},  # on "l": insert before it
            {"input": "c", "gap_ms": 800}, {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300},
            {"input": "<Esc>", "gap_ms": 300}, {"input": "u", "gap_ms": 500}]
    got = run_session(tmp_path, {"reader.py": text}, keys)
    done = next(s for s in got["snaps"] if s["input"] == "<Esc>")
    assert done["line"] == "        y = self." + accepted(got, "        y = self.scle + 1") + " + 1", got["context"]
    assert got["lines"] == text.splitlines(), got["context"]
    assert_server_has_the_buffers(got)


@needs_nvim
def test_a_carriage_return_in_a_line_above_does_not_move_completions(tmp_path):
    """``SEP = "^M"`` (a literal CR in a string) two lines up: Neovim counts lines at ``\\n`` only,
    and so does the server for it (``clientInfo.name`` ``Neovim``, ``lineBreaks`` ``auto``). Counted
    LSP's way, every position below the CR named the line above, and the item accepted at the end
    of ``x = json.lo`` went in there. The buffer is exactly the typed line with the item, below
    the file as it was, and the server's copy is Neovim's."""
    text = PY.replace("import json\n", 'import json\nSEP = "\r"\n')
    keys = [{"input": "G"}, {"input": "o"}, *typed("        x = json.lo"), {"input": "<C-n>", "gap_ms": 300},
            {"input": "<C-y>", "gap_ms": 300}, {"input": "<Esc>", "gap_ms": 300}]
    got = run_session(tmp_path, {"reader.py": text}, keys)
    assert any("\r" in m["params"]["textDocument"]["text"] for m in got["sent"]
               if m.get("method") == "textDocument/didOpen"), "Neovim sent no CR" + got["context"]
    item = accepted(got, "        x = json.lo")
    assert item.startswith("lo") and item != "lo", got["context"]
    assert got["lines"] == text.split("\n")[:-1] + ["        x = json." + item], got["context"]
    assert_server_has_the_buffers(got)
    assert "E5108" not in got["messages"], got["context"]


def _lua_filetypes(text: str) -> list[str]:
    block = re.search(r"filetypes = \{(.*?)\}", text, re.S)
    assert block, "no filetypes = { ... }"
    return re.findall(r"'([^']+)'", block.group(1))


def test_the_lspconfig_snippet_serves_the_same_filetypes():
    """The nvim-lspconfig snippet (older set-ups) lists the file types ``lsp/laya.lua`` does: it
    lacked Markdown, text and commit messages (prose), JSX/TSX and the others."""
    section = re.search(r"^## Older Neovim.*?```lua\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)
    assert section, "no ```lua block in the README's 'Older Neovim' section"
    config = (Path(__file__).resolve().parents[1] / "editors" / "nvim" / "lsp" / "laya.lua").read_text(encoding="utf-8")
    assert _lua_filetypes(section.group(1)) == _lua_filetypes(config)
