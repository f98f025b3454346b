"""A hostile client: 10,000 random, malformed and out-of-order messages to ``python -m laya_lsp``.

Bad JSON, wrong types, unknown methods, huge and odd ids, requests on closed documents,
notifications before ``initialize``, cancels of anything. The server must answer every request
exactly once, never send a traceback or a path, keep its memory flat, and exit when told.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import laya_lsp
from tests.lsp_raw import RawServer

MESSAGES = 10_000
SEED = 20261130
METHODS = ["textDocument/completion", "textDocument/inlineCompletion", "shutdown-not", "no/such",
           "$/unknown", "workspace/symbol", "textDocument/hover", "initialize"]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind < 6:
        return [None, True, -1, 2**70, 1.5, "\ud800x\u2028"][kind]
    inner = random_value(rng, depth + 1)
    return [[inner], {"uri": inner}, {"line": inner, "character": 3}][kind - 6]


def hostile_message(rng: random.Random, uris: list[str], ids) -> tuple[object, object | None]:
    """One message and the id the server must answer (None: no answer owed)."""
    uri = rng.choice(uris)
    pos = {"line": rng.choice([0, 1, 3, 10**6]), "character": rng.choice([0, 2, 5, 400])}
    good = {"textDocument": {"uri": uri}, "position": pos, "context": {"triggerKind": 1}}
    roll = rng.random()
    if roll < 0.05:
        return rng.choice([b"{", b"[1,", b"\xff\xfe", b"nul", b'{"jsonrpc": "2.0", "id": 1'])[:rng.randrange(1, 30)] or b"{", None
    if roll < 0.10:
        return rng.choice([[], 5, "x", None, {"id": next(ids)}]), None
    if roll < 0.35:  # edits, opens and closes, some of them on closed documents
        version = rng.randrange(10**6)
        if rng.random() < 0.5:
            start = rng.choice([{"line": 0, "character": 0}, {"line": 1, "character": 2}, pos])
            change = {"range": {"start": start, "end": start}, "text": rng.choice(["x", "\f\n", "\ud800", "os.", "😀"])}
            return {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}}, None
        method = rng.choice(["textDocument/didOpen", "textDocument/didClose"])
        return {"jsonrpc": "2.0", "method": method, "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": version, "text": "import os\nos.pa\n"}}}, None
    if roll < 0.40:
        return {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rng.randrange(MESSAGES)}}, None
    if roll < 0.45:
        return {"jsonrpc": "2.0", "method": rng.choice(["unknown/notification", "textDocument/didSave"]),
                "params": random_value(rng)}, None
    msg_id = next(ids)
    if rng.random() < 0.2:
        msg_id = rng.choice([f"s{msg_id}", msg_id + 2**62])
    params = good if rng.random() < 0.6 else rng.choice([
        {**good, "position": random_value(rng)}, {"textDocument": random_value(rng), "position": pos},
        random_value(rng), {}])
    message = {"jsonrpc": "2.0", "id": msg_id, "method": rng.choice(METHODS[:2] * 3 + METHODS), "params": params}
    if rng.random() < 0.05:
        message["jsonrpc"] = "1.0"
    return message, msg_id


def test_hostile_client():
    rng = random.Random(SEED)
    ids = iter(range(1000, 10**9))
    uris = [f"file:///laya-hostile/{i}.py" for i in range(4)]
    owed: list = []
    with RawServer() as s:
        for _ in range(50):  # before initialize: requests get -32002, notifications nothing
            message, msg_id = hostile_message(rng, uris, ids)
            s.send(message if isinstance(message, bytes) else json.dumps(message).encode())
            owed += [msg_id] if msg_id is not None else []
        s.initialize({"maxItems": 5})
        for uri in uris[:2]:
            s.open(uri, "import os\nos.pa\n")
        # the memory check below is about the run, not the start: wait until the model is loaded
        # and warmed (a completion waits for it), so its loading is not counted as growth
        assert s.complete(uris[0], 1, 5, timeout=60).get("result") is not None
        rss = []
        for n in range(MESSAGES):
            message, msg_id = hostile_message(rng, uris, ids)
            s.send(message if isinstance(message, bytes) else json.dumps(message).encode())
            owed += [msg_id] if msg_id is not None else []
            if n % 500 == 499:  # let it catch up, then look at its memory
                s.wait_for(s.request("laya/sync"), timeout=60)
                rss.append(rss_kb(s.proc.pid))
        s.wait_for(s.request("laya/sync"), timeout=60)
        assert s.proc.poll() is None, "the server died"
        deadline = time.monotonic() + 30
        while any(not s.answers(i) for i in owed[-20:]) and time.monotonic() < deadline:
            time.sleep(0.1)
        counts = {}
        for m in s.messages:
            if "method" not in m:
                counts[json.dumps(m.get("id"))] = counts.get(json.dumps(m.get("id")), 0) + 1
        unanswered = [i for i in owed if counts.get(json.dumps(i), 0) == 0]
        twice = [i for i in owed if counts.get(json.dumps(i), 0) > 1]
        assert not unanswered, f"{len(unanswered)} requests never answered, e.g. {unanswered[:5]}"
        assert not twice, f"answered more than once: {twice[:5]}"
        wire = json.dumps(s.messages)
        assert "Traceback" not in wire and str(Path(laya_lsp.__file__).parent) not in wire
        # bounded memory: the second half of the run grows by less than 40 MB (measured: ~+22 MB
        # while the engine's caches fill on documents that keep growing; over 40,000 messages
        # it levels off at ~266 MB)
        half = len(rss) // 2
        assert rss[-1] - rss[half] < 40_000, f"RSS (kB) every 500 messages: {rss}"
        assert s.exit() == 0


NOTIFICATIONS = [  # LSP notifications, each with params of its type
    ("textDocument/didOpen", {"textDocument": {"uri": "file:///laya-hostile/req.py", "languageId": "python",
                                               "version": 1, "text": "import os\nos.pa\n"}}),
    ("textDocument/didChange", {"textDocument": {"uri": "file:///laya-hostile/0.py", "version": 9},
                                "contentChanges": [{"text": "x"}]}),
    ("$/cancelRequest", {"id": 12345}),
    ("$/setTrace", {"value": "off"}),
    ("window/workDoneProgress/cancel", {"token": "t"}),
    ("workspace/didChangeConfiguration", {"settings": {}}),
    ("initialized", {}),
]


def items(answer: dict) -> list:
    result = answer["result"]
    return result if isinstance(result, list) else result["items"]


def test_notification_sent_as_request_is_answered_once_and_not_acted_on():
    """A notification's method with an id is a request no server has: each gets exactly one
    -32601 answer with its id; the notification is not acted on (the document is not opened or
    changed) and the server goes on completing. ``exit`` with an id is answered, then exits."""
    uri = "file:///laya-hostile/0.py"
    with RawServer() as s:
        early = s.request("textDocument/didOpen", NOTIFICATIONS[0][1], msg_id="early")
        s.initialize({"maxItems": 5})
        assert s.wait_for(early)["error"]["code"] == -32002  # any request before initialize
        s.open(uri, "import os\nos.pa\n")
        ids = [s.request(method, params, msg_id=f"n{k}") for k, (method, params) in enumerate(NOTIFICATIONS)]
        s.wait_for(s.request("laya/sync"), timeout=60)
        for msg_id, (method, _) in zip(ids, NOTIFICATIONS):
            answer = s.wait_for(msg_id, timeout=10)
            assert answer["error"]["code"] == -32601 and method in answer["error"]["message"], answer
            assert "result" not in answer
        # not acted on: the document opened by a request is not open, the changed one unchanged
        assert items(s.complete("file:///laya-hostile/req.py", 1, 5)) == []
        assert items(s.complete(uri, 1, 5, timeout=60))  # "os.pa", not the "x" of the didChange
        time.sleep(0.5)  # an answer sent twice would arrive by now
        for msg_id in [early, *ids]:
            assert len(s.answers(msg_id)) == 1, s.answers(msg_id)
        s.call("shutdown")
        bye = s.request("exit", msg_id="bye")
        assert s.proc.wait(timeout=20) == 0
        assert s.wait_for(bye, timeout=5)["error"]["code"] == -32601
