"""``laya train`` across two processes (MLX distributed, ring backend over loopback, started by
``mlx.launch``) makes the same steps as one process on the whole batch."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from laya_tools.train import TrainConfig, train
from tests.test_train import make_corpus

LAUNCH = Path(sys.executable).with_name("mlx.launch")
SCRIPT = """
import json, sys
from pathlib import Path
from laya_tools.train import TrainConfig, train
cfg = TrainConfig(**json.loads(sys.argv[3]))
meta = train(Path(sys.argv[1]), Path(sys.argv[2]), None, cfg, log_every=1, eval_every=100, save_every=100)
print(json.dumps(meta.get("rank", 0)))
"""
CFG = {"vocab_size": 320, "seq_len": 32, "batch_size": 4, "total_steps": 6, "warmup": 1}


@pytest.mark.skipif(not LAUNCH.exists(), reason="mlx.launch is not installed")
def test_two_processes_match_one(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    one, two = tmp_path / "one", tmp_path / "two"
    meta = train(corpus, one, None, TrainConfig(**CFG), log_every=1, eval_every=100, save_every=100)
    two.mkdir()
    for f in one.glob("*"):  # the same tokenizer and token arrays (the data is not in question)
        if f.name == "tokenizer.json" or f.name.endswith(".npy"):
            shutil.copy(f, two / f.name)
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    p = subprocess.run([str(LAUNCH), "-n", "2", "--backend", "ring", "--", sys.executable, str(script),
                        str(corpus), str(two), json.dumps(CFG)], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parent.parent)
    assert "exited with code" not in p.stdout + p.stderr, p.stderr[-2000:]
    meta2 = json.loads((two / "state.json").read_text())
    curve1 = [h["train_loss"] for h in meta["history"] if "train_loss" in h]
    curve2 = [h["train_loss"] for h in meta2["history"] if "train_loss" in h]
    assert len(curve1) == len(curve2) == CFG["total_steps"]
    assert curve1[-1] < curve1[0]  # it learns
    # each process ran half the rows; averaged gradients make the same update (summation order aside)
    assert max(abs(a - b) for a, b in zip(curve1, curve2)) < 1e-3
    assert abs(meta["history"][-1]["val_loss"] - meta2["history"][-1]["val_loss"]) < 1e-3
    assert meta2["history"][-1]["tokens_seen"] == meta["history"][-1]["tokens_seen"]


@pytest.mark.skipif(not LAUNCH.exists(), reason="mlx.launch is not installed")
def test_a_batch_that_does_not_split_evenly_is_refused(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    p = subprocess.run([str(LAUNCH), "-n", "2", "--backend", "ring", "--", sys.executable, str(script),
                        str(tmp_path), str(tmp_path / "ckpt"), json.dumps({**CFG, "batch_size": 3})],
                       capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    out = p.stdout + p.stderr  # (mlx.launch itself exits 0 and reports each process's status)
    assert "batch size 3 is not a multiple of the 2 processes" in out
    # the first process to fail exits 1; mlx.launch then stops the other (which may be either)
    assert "exited with code 1" in out and not (tmp_path / "ckpt" / "state.json").exists()
