"""``laya train`` end to end on a tiny real corpus: tokenizer, steps, checkpoint, 6-bit export, resume."""

import json
import textwrap
import shutil
import string
from pathlib import Path

import pytest

from engine.predictor import Predictor
from laya_tools.train import TrainConfig, export, train


def make_corpus(root: Path) -> Path:
    for split, module in (("train", textwrap), ("train", string), ("eval", shutil)):
        dst = root / split / "python" / module.__name__ / f"{module.__name__}.py"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(Path(module.__file__).read_text())
    return root


def test_train_export_resume(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    ckpt, out = tmp_path / "ckpt", tmp_path / "model"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=2, warmup=1)
    meta = train(corpus, ckpt, out, cfg, eval_every=1, save_every=1)
    assert meta["step"] == 2
    assert any("val_loss" in h for h in meta["history"])
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"] == {"group_size": 64, "bits": 6}
    assert config["laya_training"]["steps"] == 2
    assert (out / "lexicon-python.npz").exists() and (ckpt / "weights.bf16.safetensors").exists()
    p = Predictor.load(out)
    assert p.predict("import textwrap\ntextwrap.de") is not None
    # a new machine has only what git keeps: the bf16 weights, state.json and tokenizer.json
    (ckpt / "weights.safetensors").unlink()
    (ckpt / "optimizer.safetensors").unlink()
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=3), eval_every=1, save_every=1)
    assert meta["step"] == 3
    export(ckpt, out)
    assert json.loads((out / "config.json").read_text())["laya_training"]["steps"] == 3


def test_a_new_run_takes_its_shape_and_resume_keeps_it(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    ckpt, out = tmp_path / "ckpt", tmp_path / "model"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=1, warmup=1)
    shape = {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2}
    train(corpus, ckpt, out, cfg, eval_every=1, save_every=1, shape=shape)
    config = json.loads((out / "config.json").read_text())
    assert {k: config[k] for k in shape} == shape and config["num_key_value_heads"] == 2
    assert Predictor.load(out).predict("import textwrap\ntextwrap.de") is not None
    # on resume the checkpoint's shape wins over a different one asked for
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=2), eval_every=1, save_every=1,
                 shape={"num_hidden_layers": 4})
    assert meta["model_args"]["num_hidden_layers"] == 2 and meta["step"] == 2


def test_export_averages_the_last_snapshots(tmp_path):
    import mlx.core as mx
    import numpy as np

    corpus = make_corpus(tmp_path / "corpus")
    ckpt, out = tmp_path / "ckpt", tmp_path / "model"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=4, warmup=1)
    train(corpus, ckpt, None, cfg, eval_every=2, save_every=1)
    snaps = sorted(ckpt.glob("weights-*.safetensors"))
    assert [p.name for p in snaps] == [f"weights-{s:07d}.safetensors" for s in (1, 2, 3, 4)]
    export(ckpt, out, average=3)
    config = json.loads((out / "config.json").read_text())
    assert config["laya_training"]["averaged_steps"] == [2, 3, 4]
    bf16 = mx.load(str(ckpt / "weights.bf16.safetensors"))
    ws = [mx.load(str(p)) for p in snaps[1:]]
    k = "model.norm.weight"
    mean = (ws[0][k] + ws[1][k] + ws[2][k]) / 3
    assert np.allclose(np.array(bf16[k].astype(mx.float32)), np.array(mean), atol=1e-2)
    assert not np.allclose(np.array(mean), np.array(ws[2][k]))
    assert Predictor.load(out).predict("import textwrap\ntextwrap.de") is not None
    with pytest.raises(ValueError, match="fewer than"):
        export(ckpt, out, average=9)


def test_resume_with_anneal_decays_linearly_to_the_new_floor(tmp_path):
    from laya_tools.train import lr_at

    corpus = make_corpus(tmp_path / "corpus")
    ckpt = tmp_path / "ckpt"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=2, warmup=1)
    train(corpus, ckpt, None, cfg, eval_every=1, save_every=1)
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=6), eval_every=1, save_every=1,
                 lr=1e-3, min_lr=1e-5, anneal=True)
    saved = TrainConfig(**meta["train_config"])
    assert (saved.anneal_from, saved.anneal_lr, saved.min_lr) == (2, 1e-3, 1e-5)
    rates = [lr_at(s, saved) for s in range(2, 7)]
    assert rates[0] == pytest.approx(1e-3) and rates[-1] == pytest.approx(1e-5)
    steps = [b - a for a, b in zip(rates, rates[1:])]
    assert all(d == pytest.approx(steps[0]) for d in steps)  # linear, not the cosine


def test_anneal_starts_where_the_rate_is_and_never_raises_it(tmp_path):
    from laya_tools.train import lr_at

    corpus = make_corpus(tmp_path / "corpus")
    ckpt = tmp_path / "ckpt"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=3, warmup=1, lr=1e-3, min_lr=1e-4)
    train(corpus, ckpt, None, cfg, eval_every=1, save_every=1)
    # as if a 40-step cosine had stopped at step 3 (a time budget); then cool down: from that
    # cosine's rate at step 3, not from the rate of a cosine re-planned to the cooldown's end
    state = json.loads((ckpt / "state.json").read_text())
    state["train_config"]["total_steps"] = 40
    (ckpt / "state.json").write_text(json.dumps(state))
    planned = TrainConfig(**state["train_config"])
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=5), eval_every=1, save_every=1,
                 min_lr=1e-5, anneal=True)
    first = TrainConfig(**meta["train_config"])
    assert first.anneal_from == 3 and first.anneal_lr == pytest.approx(lr_at(3, planned))
    # stopped at step 4 of that cooldown (state.json says so), a second, longer one starts
    # from where the first one is: the rate never goes up
    state = json.loads((ckpt / "state.json").read_text())
    state["step"] = 4
    (ckpt / "state.json").write_text(json.dumps(state))
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=6), eval_every=1, save_every=1, anneal=True)
    second = TrainConfig(**meta["train_config"])
    assert second.anneal_from == 4 and second.anneal_lr == pytest.approx(lr_at(4, first))
    assert lr_at(4, second) <= lr_at(3, first)
    # without --anneal a resume returns to the cosine (and takes --lr)
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=7), eval_every=1, save_every=1, lr=5e-4)
    assert TrainConfig(**meta["train_config"]).anneal_from is None


def test_anneal_refuses_what_it_cannot_do(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    ckpt = tmp_path / "ckpt"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=2, warmup=1)
    with pytest.raises(ValueError, match="continues a checkpoint"):
        train(corpus, ckpt, None, cfg, eval_every=1, save_every=1, anneal=True)
    train(corpus, ckpt, None, cfg, eval_every=1, save_every=1)
    with pytest.raises(ValueError, match="beyond the checkpoint's step 2"):
        train(corpus, ckpt, None, TrainConfig(total_steps=2), anneal=True, min_lr=0.0)
    with pytest.raises(ValueError, match="above the cooldown's first rate"):
        train(corpus, ckpt, None, TrainConfig(total_steps=4), anneal=True, lr=1e-4, min_lr=1e-3)
    with pytest.raises(ValueError, match="min_lr must be 0 or more"):
        train(corpus, ckpt, None, TrainConfig(total_steps=4), anneal=True, min_lr=-1e-3)


def test_word_start_mask_marks_the_first_token_of_each_identifier():
    from laya_tools.train import word_start_mask, word_start_tables
    import numpy as np

    tok = Predictor.load().tok
    ids = np.array(tok.encode("x = foo.bar_baz(self, qux)\n    return quxQuux + 12").ids)
    mask = word_start_mask(word_start_tables(tok), ids[None, :-1], ids[None, 1:])[0]
    starts = [tok.decode([int(t)]) for t, m in zip(ids[1:], mask) if m]
    assert starts == ["foo", "bar", "self", "qu", "return", "qu"]  # never `_b`, `x`, `Qu`, `12`


def test_word_start_weight_changes_the_loss_and_resumes(tmp_path):
    import mlx.core as mx
    from laya_tools.train import loss_fn
    from engine.model import Model, ModelArgs

    model = Model(ModelArgs(vocab_size=50, hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                            num_attention_heads=2, num_key_value_heads=2))
    x, y = mx.array([[1, 2, 3, 4]]), mx.array([[2, 3, 4, 5]])
    plain = loss_fn(model, x, y).item()
    assert loss_fn(model, x, y, mx.ones((1, 4))).item() == pytest.approx(plain, rel=1e-5)
    assert loss_fn(model, x, y, mx.array([[5.0, 1, 1, 1]])).item() != pytest.approx(plain, rel=1e-3)

    corpus = make_corpus(tmp_path / "corpus")
    ckpt = tmp_path / "ckpt"
    cfg = TrainConfig(vocab_size=320, seq_len=32, batch_size=2, total_steps=1, warmup=1)
    meta = train(corpus, ckpt, None, cfg, eval_every=1, save_every=1, word_start_weight=3.0)
    assert meta["train_config"]["word_start_weight"] == 3.0
    assert "python" in next(h for h in meta["history"] if "val_word_start_loss_by_language" in h)[
        "val_word_start_loss_by_language"]
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=2), eval_every=1, save_every=1)
    assert meta["train_config"]["word_start_weight"] == 3.0  # the checkpoint's, unless given
    meta = train(corpus, ckpt, None, TrainConfig(total_steps=3), eval_every=1, save_every=1,
                 word_start_weight=1.0)
    assert meta["train_config"]["word_start_weight"] == 1.0
    with pytest.raises(ValueError, match="word_start_weight must be 0 or more"):
        train(corpus, ckpt, None, TrainConfig(total_steps=4), word_start_weight=-1.0)
