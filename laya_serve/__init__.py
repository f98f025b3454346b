"""Laya's local completion service (``laya serve``): the seed's ``POST /complete`` and an
OpenAI-style ``POST /v1/completions`` over HTTP on loopback, in front of the same engine thread
(``engine.worker.EngineThread``, through ``laya_lsp.scheduling.EngineBridge``) as the LSP server.

- ``params``: request bodies -> a typed :class:`~laya_serve.params.CompletionRequest` (400 on bad input).
- ``generate``: the engine-thread side (identifier candidates, sampling, stop sequences; KV
  reuse through the Predictor's cache and its store of recent windows).
- ``app``: the aiohttp application (routes, security checks, latest-wins per client).
- ``cli``: ``laya serve``; ``loadtest``: p50/p99 under 1, 4 and 16 concurrent clients.
"""
