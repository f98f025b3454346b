"""Shared test helper: lengths in LSP position-encoding code units, computed independently of pygls."""


def units(text: str, encoding: str) -> int:
    """Length of ``text`` in the code units of a position encoding (utf-8, utf-16 or utf-32)."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)
