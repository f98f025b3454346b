"""Client position units (UTF-16 by default, UTF-8 or UTF-32 when negotiated) and code points, fast.

pygls's position codec walks a line one character at a time in Python: on a 1 MB line with any
non-ASCII character every keystroke cost 0.4-1.2 s (and stalled the server). These conversions
encode the line's head with the codec and count, in C: ~1-3 ms on such a line. They keep pygls's
rounding: a position inside a character (half of a surrogate pair, part of a UTF-8 sequence)
counts that character as passed. The callers handle ASCII lines (one unit a character) first.
"""

from __future__ import annotations


def num_units(s: str, encoding: str) -> int:
    """Length of ``s`` in the client's units (``encoding``: ``utf-8``, ``utf-16`` or ``utf-32``)."""
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    if encoding == "utf-16":
        return len(s.encode("utf-16-le", "surrogatepass")) // 2
    return len(s)


def to_code_points(s: str, units: int, encoding: str) -> int:
    """Code points of ``s`` before the position ``units`` client units in (at most ``len(s)``)."""
    head = s[: max(0, units)]  # a character is at least one unit: the position is in here
    if encoding == "utf-8":
        raw = head.encode("utf-8", "surrogatepass")
        if len(raw) <= units:
            return len(head)
        cut = max(0, units)
        while cut > 0 and (raw[cut] & 0xC0) == 0x80:  # inside a character: back to its first byte
            cut -= 1
        return len(raw[:cut].decode("utf-8", "surrogatepass")) + (cut < units)
    if encoding == "utf-16":
        return len(head.encode("utf-16-le", "surrogatepass")[: 2 * units].decode("utf-16-le", "surrogatepass"))
    return len(head)


def to_units(s: str, code_points: int, encoding: str) -> int:
    """Client units of ``s[:code_points]``."""
    return num_units(s[: max(0, code_points)], encoding)
