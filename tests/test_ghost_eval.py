"""The ghost-text measurement's parts (``laya_tools.ghost_eval``): places, verdicts, what an item
adds after the cursor, and the characters an accepting user saves; then one short real run."""

from laya_tools.ghost_eval import accept_saved, ghost_of, place, report, run, verdict


def test_place_is_the_kind_of_character_before_the_cursor():
    assert place("x = fo") == "identifier" and place("x = ") == "blank" and place("def f():\n    ") == "indentation"
    assert place("a\n") == "indentation" and place("") == "indentation" and place("os.") == "member"
    assert place("p->") == "member" and place("f(") == "open" and place("f(x)") == "close"
    assert place("a,") == "comma" and place("x =") == "operator" and place("s = '") == "quote"


def test_verdict_and_ghost_of():
    assert verdict("records = []", "records = []\n") == "right"
    assert verdict("records = {}", "records = []\n") == "partly"  # first word right
    assert verdict("result = []", "records = []\n") == "wrong"
    assert verdict(" = 1", " == 1") == "partly" and verdict("x", "") == "wrong"
    item = {"insertText": "records = []", "range": {"start": {"line": 3, "character": 13},
                                                    "end": {"line": 3, "character": 16}}}
    assert ghost_of(item, "        self.rec") == "ords = []"
    assert ghost_of({"insertText": "json"}, "x = ") == "json"


def test_accept_saved_skips_ghosts_inside_an_accepted_one():
    shown = [(10, "abcde", "right"), (12, "cde", "right"), (15, "xy", "wrong"), (16, "yz", "right")]
    assert accept_saved(shown) == 5 + 2  # the one at 12 was not seen (accepted through to 15)
    assert accept_saved([(1, "ab", "partly"), (2, "b", "right")]) == 1


def test_a_short_run_through_the_server(tmp_path):
    src = tmp_path / "eval" / "python" / "pkg" / "reader.py"
    src.parent.mkdir(parents=True)
    src.write_text("import json\n\n\nclass Reader:\n    def load(self, path):\n"
                   "        self.records = json.loads(open(path).read())\n\n    def again(self, path):\n"
                   "        self.records = json.loads(open(path).read())\n" + "# pad\n" * 400)
    result = run("eval", 1, 300, ["python"], corpus=tmp_path)
    rows = result["python"]
    assert 250 < sum(r[0] for r in rows.values()) <= 300  # one request per key (cut at a line end)
    assert rows["identifier"][2] > 0 and result["saved"]["python"] > 20  # the repeated line's rest
    assert rows["indentation"][1] == 0  # none where nothing of a word is typed
    assert "python" in report(result)
