"""An inline completion request and the completion request an editor sends with it for the same
keystroke (Neovim with the README's ghost text sends ``didChange``, ``inlineCompletion``, then
``completion``): the list is answered first, so it never waits for the ghost text's line
(``laya_lsp.inline.INLINE_YIELD_S``). Both answers still come, and the ghost text is the line.

Typed are ``self.rec`` and ``self.reco`` only: at ``self.recor`` the re-ranker puts ``record``
before the document's ``records`` once the document's counts are installed (asynchronously, so
the outcome depended on timing and CI failed on it, 2026-12-04). That is what it was fitted to
do: in the keystroke replay it learned from, a user takes the first item when it is right, so a
document word that led at ``reco`` and was typed past is mostly the wrong one. (The re-ranker
shipped later that day knows which word was typed past, ``passed_over``, and keeps ``records``
first there; the test still stops before it.)"""

from laya_tools.pipe_client import PipeClient, position

DOC = "import json\n\n\nclass Reader:\n    def load(self, path):\n        self.records = json.loads(path)\n\n    def again(self, path):\n        self.rec"


def test_the_list_is_answered_before_the_ghost_text_sent_just_before_it():
    c = PipeClient()
    try:
        c.open("file:///t/order.py", DOC)
        c.complete()  # the model loaded and warm
        for n in range(6):
            c.type_to(DOC + "ords"[:n % 2])
            p = {"textDocument": {"uri": c.uri}, "position": position(c.text, len(c.text))}
            inline_id, list_id = 1000 + 2 * n, 1001 + 2 * n
            c._send({"jsonrpc": "2.0", "id": inline_id, "method": "textDocument/inlineCompletion",
                     "params": {**p, "context": {"triggerKind": 2}}})
            c._send({"jsonrpc": "2.0", "id": list_id, "method": "textDocument/completion", "params": p})
            answers = []
            while len(answers) < 2:
                msg = c._read()
                if msg.get("id") in (inline_id, list_id):
                    answers.append(msg)
            assert [a["id"] for a in answers] == [list_id, inline_id], answers
            items = answers[0]["result"]["items"]
            assert items and items[0]["label"] == "records", items[:3]
            ghost = [i["insertText"] for i in answers[1]["result"]["items"]]
            assert ghost == ["records = json.loads(path)"], ghost
    finally:
        c.shutdown()
