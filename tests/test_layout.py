"""Run-time code imports no offline tooling, and the evaluation does not import the client."""

import json
import subprocess
import sys

PROBE = """
import json, sys
{imports}
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('laya_tools', 'numba', 'llvmlite'))))
"""


def _loaded(imports: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports)], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return json.loads(out)


def test_the_server_and_the_engine_import_no_offline_tooling():
    loaded = _loaded("import laya_lsp.server, laya_lsp.cli, laya_lsp.stdio, laya_serve.app\n"
                     "from engine.predictor import Predictor\nfrom engine import backends, worker")
    assert not [m for m in loaded if m.startswith("laya_tools")], loaded
    assert "numba" not in loaded  # the numba backend imports it only when the JIT is needed (engine.kernels)


def test_the_evaluation_does_not_import_the_client():
    loaded = _loaded("import laya_tools.evaluate, laya_tools.tune")
    assert "laya_tools.replay" not in loaded
