"""Test-wide set-up: the lexicon cache goes to a temporary folder, not the user's ``~/.cache``
(servers started by tests inherit it through the environment)."""

import os
import tempfile

os.environ.setdefault("LAYA_CACHE_DIR", tempfile.mkdtemp(prefix="laya-test-cache-"))
