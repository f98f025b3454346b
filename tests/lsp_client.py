"""Helpers for tests that drive the server with pytest-lsp's ``LanguageClient``."""

from __future__ import annotations

import asyncio
import itertools
import time

from lsprotocol import types
from pytest_lsp import LanguageClient

_ids = itertools.count()


async def eventually(predicate, timeout: float = 30.0):
    """Wait until ``predicate()`` is truthy and return its value.

    Raises:
        AssertionError: not within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def open_doc(client: LanguageClient, text: str, folder: str = "laya-tests") -> str:
    """Open a new Python document (a URI no other test uses) with ``text``; returns its URI."""
    uri = f"file:///{folder}/{next(_ids)}/doc.py"
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=text)))
    return uri
