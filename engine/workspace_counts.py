"""A workspace's files counted per language: the part of indexing a workspace that touches neither
the model nor the shipped lexicons, so it can run in another process.

Why another process: counting 30 MB of source (the workspace index's bound) takes ~10-30 s of
Python on this 2-core machine, and much of it in single C calls that hold the GIL for 5-240 ms
(``Counter`` updates, sorts, ``ast.parse``, the tokenizer's batch encode). On a thread of the
server that delayed completions while the index ran: typing into a server indexing 2,598 Python
files (``corpus/build/train/python``) measured 5.23 / 13.43 / 136.75 ms median / p90 / p99 round
trip against 2.03 / 4.15 / 7.33 ms for a server beside it with no workspace (2026-12-02). The
server (``laya_lsp.workspace_index``) runs :func:`count_workspace` in a niced child process and
only merges its result (:meth:`engine.predictor.Predictor.merge_workspace`) on a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .continuation import LineIndex
from .imports import IMPORTING, ImportIndex
from .lexicon import CorpusLexicon
from .pieces import LONG_MIN, PieceIndex


@dataclass
class LanguageCounts:
    """One language's workspace counts."""

    arrays: dict
    """``CorpusLexicon.build``'s arrays (identifiers, counts, first tokens, n-gram tables)."""
    matches: PieceIndex | None
    """The files' pieces for long-context matches (None: no piece), match index built."""
    lines: LineIndex
    """The files' distinct lines (ghost text from the workspace)."""


@dataclass
class WorkspaceCounts:
    """What :func:`count_workspace` returns (picklable)."""

    languages: dict[str, LanguageCounts] = field(default_factory=dict)
    """Language name -> its counts (languages with at least one file)."""
    imports: ImportIndex | None = None
    """The imports of the Python, JavaScript and TypeScript files (None without paths)."""


def count_workspace(texts: dict[str, list[str]], tokenizer, paths: dict[str, list[str]] | None = None
                    ) -> WorkspaceCounts:
    """Count a workspace's files.

    Args:
        texts: language name -> texts of the workspace's files of that language.
        tokenizer: the model's ``tokenizers.Tokenizer`` (each identifier's first token).
        paths: language name -> the files' paths, in the order of ``texts`` (see
            ``Predictor.build_workspace``); None: no import index.
    """
    out = WorkspaceCounts()
    if paths:
        out.imports = ImportIndex.from_files(
            (p, t) for name in IMPORTING for p, t in zip(paths.get(name, ()), texts.get(name, ())))
    for name, docs in texts.items():
        if docs:
            matches = PieceIndex.from_texts(docs)
            matches.followers(["\n"] * LONG_MIN)  # builds its match index here
            out.languages[name] = LanguageCounts(
                CorpusLexicon.build(docs, tokenizer, min_context_count=1), matches, LineIndex.from_texts(docs))
    return out
