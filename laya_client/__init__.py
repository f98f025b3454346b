"""Client-side tools that drive ``laya-lsp`` over stdio as an editor would (demo, eval, bench).

Kept apart from ``laya_lsp`` (the server, whose stdout is the JSON-RPC channel): these print
reports to their own stdout.
"""
