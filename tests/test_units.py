"""``laya_lsp.units`` agrees with pygls's position codec (which walks lines in Python)."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from laya_lsp.units import num_units, to_code_points, to_units

ALPHABET = ["a", "é", "😀", "名", "\ud800", "b", " ", "\t"]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_same_as_pygls_on_random_lines(encoding):
    codec = PositionCodec(encoding)
    rnd = random.Random(encoding)
    for _ in range(3000):
        s = "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 14))) + "\n"
        n = codec.client_num_units(s)
        assert num_units(s, encoding) == n
        u = rnd.randint(0, n - 1)  # inside a surrogate pair or a UTF-8 sequence included
        want = codec.position_from_client_units([s], types.Position(line=0, character=u)).character
        assert to_code_points(s, u, encoding) == want, (repr(s), u)
        cp = rnd.randint(0, len(s))
        want = codec.position_to_client_units([s], types.Position(line=0, character=cp)).character
        assert to_units(s, cp, encoding) == want, (repr(s), cp)
