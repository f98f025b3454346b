"""``python -m laya_lsp``: the same as the ``laya-lsp`` console script."""

import sys

from .cli import main

sys.exit(main())
