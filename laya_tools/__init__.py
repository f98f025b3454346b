"""Offline tooling, apart from what the server runs: the ``laya`` command (``laya_tools.cli``),
the corpus, training, evaluation, tuning, benchmarks, GGUF export, and the stdio client that
drives ``laya-lsp`` as an editor would (demo, replayed evaluation, round-trip benchmarks).

Run-time code lives in ``engine`` (the model and the decision), ``laya_lsp`` (the language
server) and ``laya_serve`` (the HTTP service); none of them imports this package.
"""
