"""Inline completion from any mlx-lm model folder (the ``modelPath`` option).

A ``modelPath`` that is not a Laya model folder (no ``lexicon*.npz``) but an mlx-lm one (another
architecture, 4/6/8-bit: a Qwen coder converted with ``mlx_lm.convert -q`` on Apple Silicon, say)
writes the ghost text of ``textDocument/inlineCompletion``: greedy tokens after the cursor to the
end of the line, through ``laya_serve.mlx_lm_generate.MlxLmGenerator`` (mlx-lm's model, KV caches
and a cache of the 64 most recent prompts, so the next keystroke prefills only what is new). The
completion list keeps the fast identifier engine and its shipped model.

The generator runs on the engine thread, like every model, as a job that does not count as urgent:
a keystroke (latest wins) or a completion request queued meanwhile stops it before its next token,
so a completion request waits for at most one token of the larger model; the line so far is shown
(a stale one is not). Needs mlx-lm (the ``convert`` extra); without it, or with a
folder mlx-lm cannot open, the reason is shown once and inline completion keeps the fast engine.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from lsprotocol import types

from .scheduling import await_job

if TYPE_CHECKING:
    from .server import LayaServer

log = logging.getLogger(__name__)

MAX_TOKENS = 24
"""Most tokens of one ghost-text line."""
MAX_SEQ_LEN = 256
"""Context tokens (the seed's ``--max-seq-len``)."""
CACHE_MB = 128
"""Memory for recent prompts' KV caches."""


def is_other_mlx_lm_folder(path: str | None) -> bool:
    """True when ``path`` is a model folder (its ``config.json`` names a ``model_type``) that is
    not a Laya one. A folder whose ``config.json`` cannot be read is not: loading it as the main
    model reports the file at fault."""
    if not path:
        return False
    try:
        folder = Path(path).expanduser()  # RuntimeError: ``~user`` names no user
        config = json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError, RuntimeError):
        return False
    if not isinstance(config, dict) or "model_type" not in config:
        return False
    from laya_serve.mlx_lm_generate import is_laya_folder

    return not is_laya_folder(folder)


def _load_job(path: str):
    from laya_serve.mlx_lm_generate import MlxLmGenerator

    gen = MlxLmGenerator(Path(path).expanduser(), MAX_SEQ_LEN, CACHE_MB)
    gen.warmup()
    return gen


def _line_job(gen, prefix: str, is_current: Callable[[], bool], urgent_waiting: Callable[[], bool]) -> str | None:
    if not is_current():
        return None
    text = gen.line(prefix, MAX_TOKENS, lambda: urgent_waiting() or not is_current())
    return text if is_current() else None


class InlineModel:
    """The optional mlx-lm model behind inline completion, loaded on the engine thread."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.generator: Any | None = None
        self.error: str | None = None
        self.task: asyncio.Task | None = None

    def start(self, ls: LayaServer, path: str) -> None:
        """Queue the load of ``path`` (event loop, once)."""
        self.path = path
        self.task = asyncio.get_running_loop().create_task(self._load(ls, path))

    async def _load(self, ls: LayaServer, path: str) -> None:
        try:
            self.generator = await await_job(ls.bridge.submit(_load_job, path))
            log.info("inline completion: mlx-lm model %s", path)
        except ImportError as e:
            self._failed(ls, f"{path} is not a Laya model folder, and other mlx-lm models need "
                             f"mlx-lm: pip install 'laya[convert]' ({e})")
        except Exception as e:  # noqa: BLE001 - the fast engine goes on; the user is told why
            self._failed(ls, f"{path}: mlx-lm could not open it: {e}")

    def _failed(self, ls: LayaServer, reason: str) -> None:
        self.error = reason
        log.error("inline completion keeps the fast engine: %s", reason)
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning,
            message=f"Laya: modelPath: {reason}; inline completion keeps the shipped model"))

    async def ready(self) -> bool:
        """True once the model is loaded (waits for a load in progress)."""
        if self.task is None:
            return False
        await asyncio.shield(self.task)
        return self.generator is not None

    async def line(self, ls: LayaServer, prefix: str, is_current: Callable[[], bool]) -> str | None:
        """The model's text after ``prefix`` to the end of the line (partial when a completion
        request came meanwhile: that one runs next); None when the request went stale."""
        job = ls.bridge.engine.submit(_line_job, self.generator, prefix, is_current, ls.bridge.busy)
        return await await_job(job)
