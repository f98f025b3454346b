"""``laya train``: corpus -> tokenizer -> model -> 6-bit model folder.

Training is plain next-token cross-entropy with AdamW and a warm-up + cosine schedule, on random
windows of the concatenated training files (``<|endoftext|>`` between files). Validation loss is
measured on fixed windows of the *held-out* packages (the eval split), so it is an honest
out-of-package number. A checkpoint (float32 weights, optimizer state, step, schedule) is written
every ``--save-every`` steps and at the end; ``laya train`` resumes from it, so the same model can
keep training across sessions.

Across processes and machines (data parallel, MLX distributed): started by ``mlx.launch`` (e.g.
``mlx.launch -n 2 --backend ring -- laya_tools/train.py ...`` locally, or ``--hosts a,b`` on several
machines), every process draws the same global batch, runs its share of the rows (``rank::size``)
and the gradients are averaged (``mlx.nn.utils.average_gradients``, an all-reduce), so each step
equals the single-process step on the whole batch up to summation order
(``tests/test_train_distributed.py``). Process 0 alone prepares the data, evaluates, logs and
writes the checkpoint.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from engine import _blas

_blas.preload()

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
import mlx.optimizers as optim  # noqa: E402
from mlx.nn.utils import average_gradients  # noqa: E402
from mlx.utils import tree_flatten, tree_unflatten  # noqa: E402

from . import corpus  # noqa: E402

from engine import tokenizer as tok_mod
from engine.languages import BY_NAME, Language  # noqa: E402
from engine.model import Model, ModelArgs  # noqa: E402
from engine.model_io import save_model_folder  # noqa: E402

log = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    """Training hyper-parameters (recorded in the checkpoint)."""

    vocab_size: int = 4096
    seq_len: int = 256
    batch_size: int = 16
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup: int = 200
    total_steps: int = 20000
    weight_decay: float = 0.05
    seed: int = 0
    word_start_weight: float = 1.0
    """Loss weight of the targets that begin an identifier after a non-identifier token (the token
    the engine's network scores at a word start, step 3 of "How it works"); the other targets weigh
    1. 1.0 is plain next-token cross-entropy."""
    anneal_from: int | None = None
    """Step where a linear decay ("cooldown") replaces the cosine; None: cosine throughout."""
    anneal_lr: float = 0.0
    """Learning rate at ``anneal_from``; it falls linearly to ``min_lr`` at ``total_steps``
    (the decay phase of a warmup-stable-decay schedule: Hägele et al. 2024, "Scaling Laws and
    Compute-Optimal Training Beyond Fixed Training Durations")."""


def tokenize_split(tok, texts: list[str]) -> np.ndarray:
    """Token ids of ``texts`` with ``<|endoftext|>`` after each file, as one ``uint16`` array."""
    eos = tok.token_to_id(tok_mod.EOS)
    out = [np.zeros(0, np.uint16)]
    for enc in tok.encode_batch(texts):
        out.append(np.asarray(enc.ids, dtype=np.uint16))
        out.append(np.asarray([eos], dtype=np.uint16))
    return np.concatenate(out)


LANGUAGE_WEIGHTS = {"python": 0.3}
"""Share of training windows drawn from each language's tokens (the rest split evenly between the
other languages present). Python, the language the model was first trained on, keeps a large share
so it does not get worse while the others are learned."""


def language_weights(langs: list[str]) -> dict[str, float]:
    """Sampling weight per language present in the corpus (they sum to 1)."""
    fixed = {k: v for k, v in LANGUAGE_WEIGHTS.items() if k in langs}
    rest = [k for k in langs if k not in fixed]
    if not rest:
        tot = sum(fixed.values())
        return {k: v / tot for k, v in fixed.items()}
    each = (1.0 - sum(fixed.values())) / len(rest)
    return {**fixed, **{k: each for k in rest}}


def prepare(corpus_dir: Path, ckpt_dir: Path, cfg: TrainConfig):
    """Tokenizer and per-language token arrays of the train and eval splits, cached in ``ckpt_dir``.

    Returns:
        ``(tokenizer, {language: train tokens}, {language: eval tokens})``.
    """
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    tok_path = ckpt_dir / "tokenizer.json"
    train_texts = corpus.read_split_by_language(corpus_dir, "train")
    if tok_path.exists():
        tok = tok_mod.load_tokenizer(tok_path)
    else:
        rnd = random.Random(cfg.seed)
        sample = [t for texts in train_texts.values() for t in texts]
        rnd.shuffle(sample)
        tok = tok_mod.train_tokenizer(sample, cfg.vocab_size)
        tok.save(str(tok_path))
    arrays: dict[str, dict[str, np.ndarray]] = {"train": {}, "eval": {}}
    for split, by_lang in (("train", train_texts), ("eval", corpus.read_split_by_language(corpus_dir, "eval"))):
        for lang, texts in sorted(by_lang.items()):
            path = ckpt_dir / f"{split}_tokens_{lang}.npy"
            if path.exists():
                arr = np.load(path)
            else:
                if split == "train":
                    random.Random(cfg.seed).shuffle(texts)
                arr = tokenize_split(tok, texts)
                np.save(path, arr)
            if len(arr) > cfg.seq_len + 1:
                arrays[split][lang] = arr
            log.info("%s %s tokens: %d", split, lang, len(arr))
    return tok, arrays["train"], arrays["eval"]


def _barrier(group) -> None:
    """Wait until every process of ``group`` gets here (an all-reduce of one number)."""
    mx.eval(mx.distributed.all_sum(mx.array(1.0), group=group))


def lr_at(step: int, cfg: TrainConfig) -> float:
    """The learning rate of ``step``: warm-up, then cosine to ``min_lr``, or a linear cooldown
    from ``anneal_from`` on."""
    if cfg.anneal_from is not None and step >= cfg.anneal_from:
        t = (step - cfg.anneal_from) / max(1, cfg.total_steps - cfg.anneal_from)
        return cfg.anneal_lr + (cfg.min_lr - cfg.anneal_lr) * min(1.0, t)
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = min(1.0, (step - cfg.warmup) / max(1, cfg.total_steps - cfg.warmup))
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * t))


def loss_fn(model: Model, x: mx.array, y: mx.array, w: mx.array | None = None) -> mx.array:
    """Next-token cross-entropy (nats/token) of ``x``, ``(batch, seq)`` ids, against ``y``, the same
    shape; weighted by ``w`` (same shape, float) when given: ``sum(w * ce) / sum(w)``."""
    logits = model(x)
    if w is None:
        return nn.losses.cross_entropy(logits, y, reduction="mean")
    ce = nn.losses.cross_entropy(logits, y, reduction="none")
    return (ce * w).sum() / w.sum()


def word_start_tables(tok) -> tuple[np.ndarray, np.ndarray]:
    """Per token id, ``(starts, ends)``: boolean ``(vocab,)`` arrays, whether the token's text
    begins with a letter or ``_`` (it can begin an identifier) and whether it ends with a letter,
    digit or ``_`` (an identifier may go on after it)."""
    n = tok.get_vocab_size()
    starts, ends = np.zeros(n, bool), np.zeros(n, bool)
    for i in range(n):
        text = tok.decode([i], skip_special_tokens=True)
        if text:
            starts[i] = text[0].isalpha() or text[0] == "_"
            ends[i] = text[-1].isalnum() or text[-1] == "_"
    return starts, ends


def word_start_mask(tables: tuple[np.ndarray, np.ndarray], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Where target ``y`` begins an identifier: it can start one and the input token ``x`` before it
    (same position, ``(batch, seq)``) cannot be continued by it. Boolean, the shape of ``y``."""
    starts, ends = tables
    return starts[y] & ~ends[x]


def val_windows(tokens: np.ndarray, seq_len: int, n: int = 64) -> tuple[mx.array, mx.array]:
    """``n`` evenly spaced windows of ``tokens``: inputs and next-token targets, ``(n, seq_len)``."""
    n = max(1, min(n, len(tokens) - seq_len - 1))
    stride = max(1, (len(tokens) - seq_len - 1) // n)
    starts = [i * stride for i in range(n)]
    x = np.stack([tokens[s : s + seq_len] for s in starts]).astype(np.int32)
    y = np.stack([tokens[s + 1 : s + seq_len + 1] for s in starts]).astype(np.int32)
    return mx.array(x), mx.array(y)


def evaluate(model: Model, vx: mx.array, vy: mx.array, tables=None) -> tuple[float, float | None]:
    """Mean next-token cross-entropy (nats/token) over the windows (the mean of batches of 16),
    and with ``tables`` (:func:`word_start_tables`) the mean over the targets that begin an
    identifier (else None), from one forward pass per batch."""
    losses = []
    total, count = 0.0, 0
    for i in range(0, vx.shape[0], 16):
        x, y = vx[i : i + 16], vy[i : i + 16]
        ce = nn.losses.cross_entropy(model(x), y, reduction="none")
        losses.append(ce.mean().item())
        if tables is not None:
            mask = word_start_mask(tables, np.array(x), np.array(y))
            total += float((ce * mx.array(mask.astype(np.float32))).sum().item())
            count += int(mask.sum())
    return float(np.mean(losses)), (total / max(1, count) if tables is not None else None)


def evaluate_languages(model: Model, val: dict[str, tuple[mx.array, mx.array]],
                       tables=None) -> tuple[dict[str, float], dict[str, float] | None]:
    """Validation loss per language, plus ``"mean"`` over the languages; and with ``tables`` the
    same at word starts (else None)."""
    both = {lang: evaluate(model, vx, vy, tables) for lang, (vx, vy) in val.items()}
    out = {lang: v[0] for lang, v in both.items()}
    out["mean"] = float(np.mean(list(out.values())))
    if tables is None:
        return out, None
    ws = {lang: v[1] for lang, v in both.items()}
    ws["mean"] = float(np.mean(list(ws.values())))
    return out, ws


def _load_checkpoint_weights(model: Model, ckpt_dir: Path) -> bool:
    """Load the float32 weights, or else the committed bf16 copy; True when float32 were there."""
    if (ckpt_dir / "weights.safetensors").exists():
        model.load_weights(str(ckpt_dir / "weights.safetensors"))
        return True
    w = mx.load(str(ckpt_dir / "weights.bf16.safetensors"))
    model.load_weights([(k, v.astype(mx.float32)) for k, v in w.items()])
    return False


def _tokens_seen(history: list, step: int, cfg: TrainConfig) -> int:
    """Tokens seen so far: the last recorded count plus the steps since (older checkpoints recorded
    none: every step had ``batch_size * seq_len`` tokens)."""
    for h in reversed(history):
        if "tokens_seen" in h:
            return h["tokens_seen"] + (step - h["step"]) * cfg.batch_size * cfg.seq_len
    return step * cfg.batch_size * cfg.seq_len


KEEP_SNAPSHOTS = 8
"""Float32 weights of the last this-many checkpoints kept beside the checkpoint
(``weights-<step>.safetensors``, never committed), for ``laya export --average``."""


def _snapshots(ckpt_dir: Path) -> list[Path]:
    """The kept weight snapshots, oldest first."""
    return sorted(ckpt_dir.glob("weights-*.safetensors"))


def save_checkpoint(ckpt_dir: Path, model: Model, opt, step: int, cfg: TrainConfig, history: list) -> None:
    params = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(ckpt_dir / "weights.safetensors"), params)
    mx.save_safetensors(str(ckpt_dir / f"weights-{step:07d}.safetensors"), params)
    for old in _snapshots(ckpt_dir)[:-KEEP_SNAPSHOTS]:
        old.unlink(missing_ok=True)
    state = dict(tree_flatten(opt.state))
    mx.save_safetensors(str(ckpt_dir / "optimizer.safetensors"), {k: v for k, v in state.items()
                                                                  if isinstance(v, mx.array)})
    meta = {"step": step, "train_config": asdict(cfg), "model_args": asdict(model.args), "history": history}
    (ckpt_dir / "state.json").write_text(json.dumps(meta, indent=1))


def train(corpus_dir: Path, ckpt_dir: Path, out_dir: Path | None, cfg: TrainConfig,
          minutes: float | None = None, log_every: int = 20, eval_every: int = 200,
          save_every: int = 200, lr: float | None = None, shape: dict | None = None,
          min_lr: float | None = None, anneal: bool = False,
          word_start_weight: float | None = None) -> dict:
    """Train (or resume) and optionally export a 6-bit model folder.

    Args:
        corpus_dir: built by ``laya corpus``.
        ckpt_dir: checkpoint folder; resumed from when it holds ``state.json``.
        out_dir: if given, the quantized model folder written at the end.
        cfg: hyper-parameters (ignored in favour of the checkpoint's on resume, except
            ``total_steps``, which may be raised to keep training).
        lr: on resume, a new peak learning rate for the rest of the cosine (e.g. lower, to
            continue on new data without forgetting the old); None keeps the checkpoint's.
        minutes: wall-clock budget; training stops (and checkpoints) when it is spent.
        min_lr: on resume, a new floor of the cosine (e.g. near 0 to anneal the last steps);
            None keeps the checkpoint's (a new run takes ``cfg.min_lr``).
        anneal: on resume, decay linearly from the rate the checkpoint's schedule is at (``lr``
            if given) to ``min_lr`` over the steps left to ``cfg.total_steps`` (see
            ``TrainConfig.anneal_from``). Each resume with it starts the cooldown anew from where
            the rate is, so it never goes up; a resume without it returns to the cosine.
        word_start_weight: the loss weight of word-start targets (``TrainConfig.word_start_weight``)
            from now on; None keeps the checkpoint's (a new run takes ``cfg``'s).
        shape: a new run's model shape, ``ModelArgs`` field names (``hidden_size``,
            ``num_hidden_layers``, ``intermediate_size``, ``num_attention_heads``); None is the
            Laya-MLX default (4 layers, hidden 256, 4 heads). Ignored on resume.

    Returns:
        The checkpoint's ``state.json`` content (processes other than 0 of a distributed run:
        ``{"step": ..., "rank": ...}``).

    Raises:
        ValueError: ``batch_size`` is not a multiple of the number of processes; a negative
            ``lr`` or ``min_lr``; ``anneal`` without a checkpoint, with ``cfg.total_steps`` not past
            its step, or with ``min_lr`` above the cooldown's first rate.
    """
    ckpt_dir = Path(ckpt_dir)
    group = mx.distributed.init()
    rank, world = group.rank(), group.size()
    if cfg.batch_size % world:
        raise ValueError(f"batch size {cfg.batch_size} is not a multiple of the {world} processes")
    if world > 1 and rank > 0:
        _barrier(group)  # process 0 builds the tokenizer and the token caches first
    state_path = ckpt_dir / "state.json"
    history: list = []
    step = 0
    for name, value in (("lr", lr), ("min_lr", min_lr), ("word_start_weight", word_start_weight)):
        if value is not None and not value >= 0:
            raise ValueError(f"{name} must be 0 or more, not {value}")
    if state_path.exists():
        meta = json.loads(state_path.read_text())
        total = cfg.total_steps
        cfg = TrainConfig(**meta["train_config"])
        now = lr_at(meta["step"], cfg)  # the rate the checkpoint's own schedule is at
        # The schedule may be re-planned on resume (longer, or shorter to fit a time budget);
        # the learning rate follows the new cosine from the current step.
        if anneal and total <= meta["step"]:
            raise ValueError(f"--anneal needs --steps beyond the checkpoint's step {meta['step']} "
                             f"(the cooldown's end), not {total}")
        cfg.total_steps = max(total, meta["step"] + 1)
        if lr is not None:
            cfg.lr = lr
        if min_lr is not None:
            cfg.min_lr = min_lr
        if word_start_weight is not None:
            cfg.word_start_weight = word_start_weight
        cfg.anneal_from = None  # a resume without --anneal leaves a cooldown for the cosine
        if anneal:  # from the rate in use (or --lr) down to min_lr, never up
            start = lr if lr is not None else now
            if cfg.min_lr > start:
                raise ValueError(f"--min-lr {cfg.min_lr:g} is above the cooldown's first rate {start:g}")
            cfg.anneal_from, cfg.anneal_lr = meta["step"], start
        step, history = meta["step"], meta["history"]
        args = ModelArgs.from_dict(meta["model_args"])
    else:
        if word_start_weight is not None:
            cfg.word_start_weight = word_start_weight
        if anneal:
            raise ValueError(f"--anneal continues a checkpoint, and {ckpt_dir} has none (no state.json)")
        args = ModelArgs(vocab_size=cfg.vocab_size, max_position_embeddings=cfg.seq_len, **(shape or {}))
        if shape and "num_attention_heads" in shape and "num_key_value_heads" not in shape:
            args.num_key_value_heads = args.num_attention_heads
        if args.hidden_size % args.num_attention_heads:
            raise ValueError(f"hidden size {args.hidden_size} is not a multiple of {args.num_attention_heads} heads")
    tok, train_tokens, eval_tokens = prepare(corpus_dir, ckpt_dir, cfg)
    if world > 1 and rank == 0:
        _barrier(group)
    args.vocab_size = tok.get_vocab_size()
    mx.random.seed(cfg.seed + step)
    model = Model(args)
    opt = optim.AdamW(learning_rate=cfg.lr, weight_decay=cfg.weight_decay)
    rewarm_from = None
    if step:
        opt.init(model.trainable_parameters())
        if _load_checkpoint_weights(model, ckpt_dir):
            saved = mx.load(str(ckpt_dir / "optimizer.safetensors"))
            flat = dict(tree_flatten(opt.state))
            flat.update(saved)
            opt.state = tree_unflatten(list(flat.items()))
        else:
            # Fresh AdamW moments make the first updates sign-like and large: warm up again.
            rewarm_from = step
            log.info("resuming from the committed bf16 weights; AdamW moments start fresh "
                     "(learning rate warms up again over %d steps)", cfg.warmup)
        log.info("resumed at step %d", step)
    mx.eval(model.parameters())
    nparams = sum(v.size for _, v in tree_flatten(model.parameters()))
    log.info("model: %d parameters, %s", nparams, args)
    # per language: 64 windows when one language is present (as before), 24 each otherwise
    per_lang = 64 if len(eval_tokens) == 1 else 24
    val = {lang: val_windows(t, cfg.seq_len, per_lang) for lang, t in eval_tokens.items()}
    langs = sorted(train_tokens)
    weights = language_weights(langs)
    log.info("sampling weights: %s", weights)
    loss_and_grad = nn.value_and_grad(model, loss_fn)

    tables = word_start_tables(tok)
    if cfg.word_start_weight != 1.0:
        log.info("word-start targets weigh %g in the loss", cfg.word_start_weight)

    def step_fn(x, y, w):
        loss, grads = loss_and_grad(model, x, y, w)
        if world > 1:  # each process ran an equal share of the rows: the mean of the means
            grads = average_gradients(grads, group=group)
            loss = mx.distributed.all_sum(loss, group=group) / world
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(model, grads)
        return loss

    rng = np.random.default_rng(cfg.seed + step)
    tokens_seen = _tokens_seen(history, step, cfg)
    t0 = time.time()
    last = time.time()
    tokens_done = 0
    losses = []
    while step < cfg.total_steps:
        out_of_time = minutes is not None and time.time() - t0 > minutes * 60
        if world > 1:  # every process stops at the same step (a clock differs per process)
            out_of_time = mx.distributed.all_sum(mx.array(float(out_of_time)), group=group).item() > 0
        if out_of_time:
            break
        picks = rng.choice(len(langs), cfg.batch_size, p=[weights[k] for k in langs])
        rows = []
        for k in picks:
            arr = train_tokens[langs[k]]
            s0 = int(rng.integers(0, len(arr) - cfg.seq_len - 1))
            rows.append(arr[s0 : s0 + cfg.seq_len + 1])
        batch = np.stack(rows).astype(np.int32)[rank::world]  # this process's share
        x, y = mx.array(batch[:, :-1]), mx.array(batch[:, 1:])
        w = None
        if cfg.word_start_weight != 1.0:
            mask = word_start_mask(tables, batch[:, :-1], batch[:, 1:])
            w = mx.array(np.where(mask, np.float32(cfg.word_start_weight), np.float32(1.0)))
        rate = lr_at(step, cfg)
        if rewarm_from is not None and step - rewarm_from < cfg.warmup:
            rate *= (step - rewarm_from + 1) / cfg.warmup
        opt.learning_rate = rate
        loss = step_fn(x, y, w)
        mx.eval(loss, model.parameters(), opt.state)
        losses.append(loss.item())
        step += 1
        tokens_done += x.size * world
        tokens_seen += x.size * world
        if rank > 0:
            continue  # process 0 logs, evaluates and checkpoints
        if step % log_every == 0:
            now = time.time()
            tps = log_every * x.size * world / (now - last)
            last = now
            log.info("step %d loss %.4f lr %.2e %.0f tok/s", step, np.mean(losses), opt.learning_rate.item(), tps)
            history.append({"step": step, "train_loss": float(np.mean(losses))})
            losses = []
        if step % eval_every == 0:
            vl, ws = evaluate_languages(model, val, tables)
            log.info("step %d val_loss %s (held-out packages); at word starts %s", step,
                     " ".join(f"{k} {v:.4f}" for k, v in vl.items()),
                     " ".join(f"{k} {v:.4f}" for k, v in ws.items()))
            history.append({"step": step, "val_loss": vl["mean"], "val_loss_by_language": vl,
                            "val_word_start_loss_by_language": ws, "tokens_seen": tokens_seen})
        if step % save_every == 0:
            save_checkpoint(ckpt_dir, model, opt, step, cfg, history)
    if rank > 0:
        return {"step": step, "rank": rank}
    vl, _ = evaluate_languages(model, val)
    history.append({"step": step, "val_loss": vl["mean"], "val_loss_by_language": vl,
                    "tokens_seen": tokens_seen, "final": True})
    log.info("stopped at step %d, val_loss %s, %d tokens this run", step,
             " ".join(f"{k} {v:.4f}" for k, v in vl.items()), tokens_done)
    save_checkpoint(ckpt_dir, model, opt, step, cfg, history)
    meta = json.loads(state_path.read_text())
    if out_dir is not None:
        export(ckpt_dir, Path(out_dir), corpus_dir=corpus_dir)
    return meta


def export(ckpt_dir: Path, out_dir: Path, bits: int = 6, group_size: int = 64,
           corpus_dir: Path | None = None, average: int = 0) -> None:
    """Write the quantized model folder (mlx-lm format) from a checkpoint.

    With ``corpus_dir``, also count the training split into the identifier n-gram lexicon
    (``lexicon.npz``, see ``engine/lexicon.py``) that the candidate filter ships with. With
    ``average`` > 1, the weights are the mean of the last ``average`` kept snapshots (checkpoint
    averaging, as Vaswani et al. 2017 did over their last 5 or 20 checkpoints; here, late in a run
    at a still-high learning rate, the mean of the step-9,600 and 9,700 weights had a held-out loss
    of 2.506 against 2.521 for step 9,700 alone); the committed bf16 copy is then these weights.

    Raises:
        ValueError: fewer than ``average`` snapshots are kept in ``ckpt_dir``.
    """
    meta = json.loads((Path(ckpt_dir) / "state.json").read_text())
    args = ModelArgs.from_dict(meta["model_args"])
    model = Model(args)
    _load_checkpoint_weights(model, Path(ckpt_dir))
    averaged = []
    if average > 1:
        snaps = _snapshots(Path(ckpt_dir))[-average:]
        if len(snaps) < average:
            raise ValueError(f"{ckpt_dir} keeps {len(snaps)} weight snapshots, fewer than --average {average}")
        loaded = [mx.load(str(p)) for p in snaps]
        model.load_weights([(k, sum(w[k] for w in loaded) / average) for k in loaded[-1]])
        averaged = [int(p.stem.removeprefix("weights-")) for p in snaps]
    # A compact copy that git keeps, so training can resume on a new machine (laya train).
    mx.save_safetensors(str(Path(ckpt_dir) / "weights.bf16.safetensors"),
                        {k: v.astype(mx.bfloat16) for k, v in tree_flatten(model.parameters())})
    hist = meta["history"]
    vals = [h["val_loss"] for h in hist if "val_loss" in h]
    cfg = meta["train_config"]
    by_lang = [h["val_loss_by_language"] for h in hist if "val_loss_by_language" in h]
    training = {
        "steps": meta["step"],
        "tokens_seen": _tokens_seen(hist, meta["step"], TrainConfig(**cfg)),
        "val_loss": vals[-1] if vals else None,
        "val_loss_by_language": by_lang[-1] if by_lang else None,
        "train_config": cfg,
        **({"averaged_steps": averaged} if averaged else {}),
    }
    save_model_folder(model, Path(ckpt_dir) / "tokenizer.json", out_dir, bits=bits, group_size=group_size,
                      extra={"laya_training": training})
    if corpus_dir is not None:
        write_lexicon(Path(corpus_dir), Path(out_dir))


def lexicon_texts(corpus_dir: Path, language: Language) -> list[str]:
    """The training files of ``language`` that its corpus lexicon counts: every package's files in
    path order, or, with ``language.lexicon_package_chars``, of each package its files in a fixed
    random order (seed 0) until that many characters are taken (the file that crosses the limit
    included)."""
    by_package: dict[str, list[str]] = {}
    for _, package, f in corpus.iter_files(corpus_dir, "train", [language.name]):
        by_package.setdefault(package, []).append(corpus.read_text(f))
    cap = language.lexicon_package_chars
    texts: list[str] = []
    for package in sorted(by_package):
        files = by_package[package]
        if cap is not None:
            random.Random(0).shuffle(files)
            taken = 0
            for n, text in enumerate(files):
                if taken >= cap:
                    files = files[:n]
                    break
                taken += len(text)
        texts.extend(files)
    return texts


def write_lexicon(corpus_dir: Path, out_dir: Path) -> None:
    """Count each language of the training split into ``out_dir/lexicon-<language>.npz``, and what
    its Python code imports from each module into ``out_dir/imports-python.json``
    (``engine.imports.module_members``), and what its Go code uses from each imported package into
    ``out_dir/imports-go.json`` (``engine.go_imports.package_members``)."""
    from engine import go_imports
    from engine.imports import MEMBERS_FILE, module_members
    from engine.lexicon import CorpusLexicon

    tok = tok_mod.load_tokenizer(out_dir / "tokenizer.json")
    for lang in sorted({lang for lang, _, _ in corpus.iter_files(corpus_dir, "train")}):
        data = CorpusLexicon.build(lexicon_texts(corpus_dir, BY_NAME[lang]), tok)
        np.savez_compressed(out_dir / f"lexicon-{lang}.npz", **data)
        log.info("lexicon %s: %d identifiers, %d bigram and %d trigram contexts", lang, len(data["counts"]),
                 len(data["bi_offsets"]) - 1, len(data["tri_offsets"]) - 1)
        if lang == "python":
            members = module_members((pkg, corpus.read_text(f)) for language, pkg, f in
                                     corpus.iter_files(corpus_dir, "train", ["python"]))
            (out_dir / MEMBERS_FILE).write_text(json.dumps(members, separators=(",", ":"), sort_keys=True))
            log.info("%s: names of %d modules, %d module names", MEMBERS_FILE, len(members["members"]),
                     len(members["modules"]))
        elif lang == "go":
            members = go_imports.package_members((pkg, corpus.read_text(f)) for language, pkg, f in
                                                 corpus.iter_files(corpus_dir, "train", ["go"]))
            (out_dir / go_imports.MEMBERS_FILE).write_text(json.dumps(members, separators=(",", ":"), sort_keys=True))
            log.info("%s: names of %d packages", go_imports.MEMBERS_FILE, len(members["members"]))
