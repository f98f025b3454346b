"""A stand-in for the predictor's document API that records what the server installs."""

from __future__ import annotations


class DocRecorder:
    """``build_document`` returns the text it was given (the text the server chose to count);
    ``set_document`` / ``forget_document`` keep ``docs`` (URI -> that text) as the engine would."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {}

    def build_document(self, text, *args):
        return text

    def set_document(self, uri, doc, *args):
        self.docs[uri] = doc

    def forget_document(self, uri):
        self.docs.pop(uri, None)


def server_with_recorder():
    """A server whose model is a :class:`DocRecorder` (no event loop, no client): ``(ls, recorder)``."""
    from laya_lsp import server as srv
    from laya_lsp.protocol import LspWorkspace

    ls = srv.create_server()
    ls.protocol._workspace = LspWorkspace(None)
    ls.model.predictor = recorder = DocRecorder()
    return ls, recorder
