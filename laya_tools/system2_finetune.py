"""Fine-tune System 2's model (SmolLM2-135M) on the training split of this project's code corpus.

System 2 (``engine.system2``) runs a general 135M model; choosing perfectly, keystroke by
keystroke, between its first item and the fast engine's gains only +1 to +5 points in Go, Rust
and TypeScript (``laya_tools.system2_floor``). This tunes it on the corpus's ``train`` packages
(``laya corpus``; ``tune`` and ``eval`` packages are never trained on) with a low-rank adapter
(LoRA, Hu et al. 2021, through Hugging Face ``peft``) on every linear layer of every block, the
token embedding (tied to the output layer) frozen. Training needs PyTorch, ``transformers``,
``peft``, ``tokenizers`` and ``gguf``, and a GPU for any useful amount of it; it never runs at
completion time. Three steps:

``pack`` (here, stdlib only): source files of each language's ``train`` split, sampled to a
character budget, and a few ``tune`` files per language for held-out loss, as xz-compressed JSON
lines in parts of at most ``--part-mb``; the GGUF file cut in parts too (the device tool carries
64 MiB a call)::

    python -m laya_tools.system2_finetune pack --out .dev/ft

``train`` (on the GPU machine): join the parts, tokenize with the model's own vocabulary (made
from the GGUF by ``transformers``, or a ``tokenizer.json`` among the parts), load the GGUF's weights dequantized
(``transformers``' GGUF loader), train the adapter for ``--minutes`` with AdamW and a cosine
schedule, print the ``tune`` loss per language before and after, and save the adapter as
safetensors files under 16 MiB::

    python -m laya_tools.system2_finetune train --parts .dev/ft --out $OUT --minutes 5

``merge`` (here, ``gguf`` only): add the adapter's low-rank products to the GGUF's dequantized
weights (q and k rows permuted as llama.cpp's converter lays them out) and write a GGUF of the
same architecture and vocabulary, re-quantized::

    python -m laya_tools.system2_finetune merge BASE.gguf ADAPTER_DIR OUT.gguf --type Q8_0

Each training example is what System 2 is prompted with (``engine.system2.System2``): the
``<filename>`` token, the file's path (its name, or its last three path components) and a line
break, then up to ``--seq-len`` tokens of the file.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import lzma
import math
import random
import sys
import time
from pathlib import Path

DEFAULT_CHARS = {"go": 36e6, "rust": 30e6, "typescript": 24e6, "javascript": 24e6, "python": 24e6,
                 "c": 12e6}
"""Characters of ``train`` files per language ``pack`` takes by default (150M in all, ~27 MiB
compressed; the shipped adapter took 0.85 of each: 128M characters, 23 MiB): weighted to Go, Rust and TypeScript, where SmolLM2-135M adds least to the fast engine
(``laya_tools.system2_floor`` on the tune packages, 2026-12-04)."""
TUNE_CHARS = 400_000
"""Characters of ``tune`` files per language for the held-out loss."""
FILE_TOKEN_ID = 6
"""``<filename>`` in SmolLM2's vocabulary (``engine.system2.FILE_TOKEN``)."""
HEADER_TOKENS = 48
"""Most tokens of the ``<filename>`` line, as ``engine.system2.HEADER_TOKENS`` (not imported: the
GPU machine runs this file without the engine's dependencies)."""
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The linear layers of each block the adapter is added to (Hugging Face Llama names)."""
GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
"""Hugging Face Llama module name -> llama.cpp tensor name (``blk.N.<name>.weight``)."""


# -- pack (stdlib only) ----------------------------------------------------------------------

def prompt_path(rel: str, rng: random.Random) -> str:
    """The path shown after ``<filename>``: the file's name, or its last three components."""
    parts = rel.split("/")
    return parts[-1] if rng.random() < 0.5 else "/".join(parts[-3:])


def sample_files(root: Path, split: str, language: str, chars: float, rng: random.Random) -> list[dict]:
    """Whole files of ``root/split/language`` in a shuffled order up to ``chars`` characters,
    each as ``{"lang", "path", "text"}``."""
    files = sorted(p for p in (root / split / language).rglob("*") if p.is_file())
    rng.shuffle(files)
    out, n = [], 0
    for p in files:
        if n >= chars:
            break
        try:
            text = p.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        rel = str(p.relative_to(root / split / language))
        out.append({"lang": language, "path": prompt_path(rel, rng), "text": text})
        n += len(text)
    return out


def pack(corpus: Path, out: Path, chars: dict[str, float], part_mb: float, gguf: Path | None,
         gguf_parts: int, seed: int = 0) -> None:
    """Write ``train-NN.jsonl.xz``, ``tune.jsonl.xz`` and ``model.gguf.NN`` under ``out``."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for lang, n in chars.items():
        got = sample_files(corpus, "train", lang, n, rng)
        print(f"{lang}: {len(got)} train files, {sum(len(r['text']) for r in got) / 1e6:.1f}M chars",
              file=sys.stderr)
        rows += got
    rng.shuffle(rows)
    tune = [r for lang in chars for r in sample_files(corpus, "tune", lang, TUNE_CHARS, rng)]
    with lzma.open(out / "tune.jsonl.xz", "wt", preset=6) as f:
        f.writelines(json.dumps(r) + "\n" for r in tune)
    limit, k, part, written = part_mb * 2**20, 0, None, 0.0
    for r in rows:
        if part is None or written * 0.18 > limit:  # JSON lines of code compress ~5.5x
            if part:
                part.close()
            part = lzma.open(out / f"train-{k:02d}.jsonl.xz", "wt", preset=6)
            k, written = k + 1, 0.0
        line = json.dumps(r) + "\n"
        part.write(line)
        written += len(line)
    if part:
        part.close()
    if gguf:
        data = gguf.read_bytes()
        step = math.ceil(len(data) / gguf_parts)
        for i in range(gguf_parts):
            (out / f"model.gguf.{i:02d}").write_bytes(data[i * step:(i + 1) * step])
    for p in sorted(out.iterdir()):
        print(f"{p.name}: {p.stat().st_size / 2**20:.1f} MiB", file=sys.stderr)


# -- train (PyTorch, on the GPU machine) -----------------------------------------------------

def read_rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        with lzma.open(p, "rt") as f:
            rows += [json.loads(line) for line in f]
    return rows


def examples(rows: list[dict], tokenizer, seq_len: int) -> tuple[list[list[int]], list[int], list[str]]:
    """Token rows of at most ``seq_len`` (header + a window of the file) and, per row, how many
    header tokens lead it (not trained on) and its language."""
    heads = tokenizer.encode_batch([r["path"] + "\n" for r in rows], add_special_tokens=False)
    bodies = tokenizer.encode_batch([r["text"] for r in rows], add_special_tokens=False)
    seqs, skip, langs = [], [], []
    for r, h, b in zip(rows, heads, bodies):
        head = [FILE_TOKEN_ID] + h.ids[-(HEADER_TOKENS - 1):]
        ids = b.ids
        step = seq_len - len(head)
        for i in range(0, len(ids), step):
            window = ids[i:i + step]
            if len(window) < 16:
                continue
            seqs.append(head + window)
            skip.append(len(head))
            langs.append(r["lang"])
    return seqs, skip, langs


def batches(seqs, skip, order, batch_size, seq_len, pad_id, torch, device):
    """(input_ids, labels, attention_mask) tensors, ``batch_size`` rows padded to ``seq_len``."""
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        ids = torch.full((len(idx), seq_len), pad_id, dtype=torch.long)
        labels = torch.full((len(idx), seq_len), -100, dtype=torch.long)
        mask = torch.zeros((len(idx), seq_len), dtype=torch.long)
        for j, k in enumerate(idx):
            s = torch.tensor(seqs[k])
            ids[j, :len(s)] = s
            labels[j, skip[k]:len(s)] = s[skip[k]:]
            mask[j, :len(s)] = 1
        yield ids.to(device), labels.to(device), mask.to(device)


def evaluate_loss(model, seqs, skip, langs, batch_size, seq_len, pad_id, torch, device) -> dict[str, float]:
    """Mean next-token loss (nats) per language over the rows, and over all (``"all"``)."""
    import torch.nn.functional as F

    model.eval()
    tot: dict[str, list[float]] = {}
    order = list(range(len(seqs)))
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for b0, (ids, labels, mask) in zip(range(0, len(order), batch_size),
                                          batches(seqs, skip, order, batch_size, seq_len, pad_id, torch, device)):
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
            loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none",
                                   ignore_index=-100)
            n = (labels[:, 1:] != -100).sum(1)
            for j, k in enumerate(order[b0:b0 + batch_size]):
                t = tot.setdefault(langs[k], [0.0, 0])
                t[0] += float(loss[j].sum())
                t[1] += int(n[j])
    model.train()
    out = {lang: s / max(n, 1) for lang, (s, n) in sorted(tot.items())}
    out["all"] = sum(s for s, _ in tot.values()) / max(sum(n for _, n in tot.values()), 1)
    return out


def tokenizer(parts: Path, gguf: Path):
    """The model's vocabulary as a ``tokenizers.Tokenizer``: ``tokenizer.json`` (or ``.json.xz``)
    in ``parts`` when there is one, else made from the GGUF's own by ``transformers`` (it
    tokenized 29 of 30 tune files exactly as llama.cpp does, 2026-12-04)."""
    from tokenizers import Tokenizer

    for name in ("tokenizer.json.xz", "tokenizer.json"):
        p = parts / name
        if p.is_file():
            data = p.read_bytes()
            return Tokenizer.from_str((lzma.decompress(data) if name.endswith(".xz") else data).decode())
    if not gguf.is_file():
        raise SystemExit(f"no tokenizer.json in {parts} and no {gguf} to make one from")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).backend_tokenizer


def train(parts: Path, out: Path, minutes: float, seq_len: int, batch_size: int, rank: int,
          lr: float, work: Path, dry_run: bool = False, max_steps: int | None = None,
          tune_rows_per_language: int = 96) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    log = {"args": {"minutes": minutes, "seq_len": seq_len, "batch_size": batch_size, "rank": rank,
                    "lr": lr}}

    def say(*a):
        print(f"[{time.time() - t0:6.1f}s]", *a, flush=True)

    gguf = work / "model.gguf"
    pieces = sorted(glob.glob(str(parts / "model.gguf.*")))
    if pieces:
        with open(gguf, "wb") as f:
            for p in pieces:
                f.write(Path(p).read_bytes())
    if not dry_run and not gguf.is_file():
        raise SystemExit(f"no {gguf} and no model.gguf.NN parts in {parts}")
    tok = tokenizer(parts, gguf)
    pad_id = tok.token_to_id("<|endoftext|>") or 0
    rows = read_rows(sorted(glob.glob(str(parts / "train-*.jsonl.xz"))))
    tune_rows = read_rows([parts / "tune.jsonl.xz"])
    say(f"{len(rows)} train files, {len(tune_rows)} tune files")
    seqs, skip, langs = examples(rows, tok, seq_len)
    tseqs, tskip, tlangs = examples(tune_rows, tok, seq_len)
    keep = [i for i, lang in enumerate(tlangs) if tlangs[:i].count(lang) < tune_rows_per_language]
    tseqs, tskip, tlangs = [tseqs[i] for i in keep], [tskip[i] for i in keep], [tlangs[i] for i in keep]
    n_tokens = sum(len(s) - k for s, k in zip(seqs, skip))
    say(f"{len(seqs)} train rows, {n_tokens / 1e6:.1f}M tokens; {len(tseqs)} tune rows")
    log["train_tokens"] = n_tokens

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not dry_run:
        model = LlamaForCausalLM.from_pretrained(str(work), gguf_file=gguf.name, dtype=torch.float32)
    else:  # --dry-run: SmolLM2's shape cut to 2 blocks, random weights (checks the set-up only)
        from transformers import LlamaConfig

        model = LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                             num_hidden_layers=2, num_attention_heads=9,
                                             num_key_value_heads=3, tie_word_embeddings=True))
    model.to(device)
    say("model loaded", sum(p.numel() for p in model.parameters()) / 1e6, "M parameters on", device)
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0,
                                             target_modules=list(TARGET_MODULES)))
    log["tune_loss_before"] = evaluate_loss(model, tseqs, tskip, tlangs, batch_size, seq_len, pad_id,
                                            torch, device)
    say("tune loss before", log["tune_loss_before"])

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, betas=(0.9, 0.98))
    rng = random.Random(0)
    order = []
    for _ in range(8):  # epochs enough for any budget; the clock stops it
        o = list(range(len(seqs)))
        rng.shuffle(o)
        order += o
    budget = minutes * 60
    total = None  # steps, fixed once the first steps are timed
    warmup = 20
    step, seen, t_train, clock = 0, 0, time.time(), {}
    curve = []
    for ids, labels, mask in batches(seqs, skip, order, batch_size, seq_len, pad_id, torch, device):
        if step in (5, 15):  # time steps 5-15 (the first ones set CUDA up)
            if device.type == "cuda":
                torch.cuda.synchronize()
            clock[step] = time.time()
        if step == 15:
            per_step = (clock[15] - clock[5]) / 10
            total = min(max(20, min(len(order) // batch_size, int(budget / per_step))), max_steps or 10**9)
            say(f"{per_step * 1000:.0f} ms a step; {total} steps")
        frac = step / total if total else 0.0
        scale = min(1.0, (step + 1) / warmup) * (0.5 * (1 + math.cos(math.pi * min(frac, 1.0))) * 0.9 + 0.1)
        for g in opt.param_groups:
            g["lr"] = lr * scale
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        seen += int((labels != -100).sum())
        step += 1
        if step % 25 == 0:
            curve.append((step, loss.item()))
            say(f"step {step} loss {float(loss):.4f} lr {lr * scale:.2e} tokens {seen / 1e6:.1f}M")
        if total and step >= total:
            break
        if time.time() - t_train > budget * 1.1 or (max_steps and step >= max_steps):
            break
    log.update(steps=step, tokens_trained=seen, curve=curve, train_seconds=time.time() - t_train)
    log["tune_loss_after"] = evaluate_loss(model, tseqs, tskip, tlangs, batch_size, seq_len, pad_id,
                                           torch, device)
    say("tune loss after", log["tune_loss_after"])
    save_adapter(model, out, rank)
    (out / "train_log.json").write_text(json.dumps(log, indent=1))
    say("saved to", out)


def save_adapter(model, out: Path, rank: int) -> None:
    """The adapter's A and B matrices as float16 safetensors, ``adapter-NN.safetensors`` files of
    ten blocks each (under the device tool's 16 MiB a file), keys ``blk.N.<module>.lora_a/b``."""
    import torch
    from safetensors.torch import save_file

    groups: dict[int, dict] = {}
    for name, p in model.named_parameters():
        if "lora_" not in name:
            continue
        # base_model.model.model.layers.3.self_attn.q_proj.lora_A.default.weight
        parts = name.split(".")
        layer = int(parts[parts.index("layers") + 1])
        module = next(m for m in TARGET_MODULES if m in parts)
        ab = "lora_a" if "lora_A" in parts else "lora_b"
        groups.setdefault(layer // 10, {})[f"blk.{layer}.{module}.{ab}"] = \
            p.detach().to(torch.float16).cpu().contiguous()
    for g, tensors in sorted(groups.items()):
        save_file(tensors, str(out / f"adapter-{g:02d}.safetensors"),
                  metadata={"rank": str(rank), "alpha": str(rank)})


# -- merge (gguf only) -----------------------------------------------------------------------

def llama_cpp_permute(w, n_head: int):
    """Rows of a q or k weight ``(out, in)`` in the order llama.cpp's converter stores them
    (``convert_hf_to_gguf.py``'s ``LlamaModel.permute``: each head's two rotary halves
    interleaved)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def load_adapter(folder: Path) -> tuple[dict, float]:
    """``{"blk.N.<module>.lora_a|lora_b": float32 array}`` (A: ``(rank, in)``, B: ``(out, rank)``)
    and the scale ``alpha / rank``, read with MLX (a dependency of the engine already).

    Raises:
        ValueError: no ``adapter-NN.safetensors`` in ``folder``, or a file without its rank.
    """
    import mlx.core as mx
    import numpy as np

    tensors, scale = {}, None
    files = sorted(Path(folder).glob("adapter-*.safetensors"))
    if not files:
        raise ValueError(f"no adapter-NN.safetensors in {folder}")
    for p in files:
        arrays, meta = mx.load(str(p), return_metadata=True)
        if "rank" not in meta:
            raise ValueError(f"{p} has no rank in its metadata")
        scale = float(meta.get("alpha", meta["rank"])) / float(meta["rank"])
        for k, a in arrays.items():
            tensors[k] = np.array(a.astype(mx.float32))
    return tensors, scale


def merge(base: Path, adapter: Path, out: Path, qtype: str = "Q8_0") -> None:
    """Write ``out``: ``base`` with ``W + scale * B @ A`` in each adapted layer, re-quantized to
    ``qtype`` (the other tensors and all metadata copied as they are; written to ``out.part``
    first, then renamed).

    Q8_0 keeps the adapter's change: re-quantizing to Q4_1 undid most of it (a 9-step adapter
    moved SmolLM2's logits by up to 2.0; through llama.cpp the Q8_0 file's change correlated
    0.86 with it, the Q4_1 file's 0.15).

    Raises:
        ValueError: the adapter does not fit ``base`` (a layer missing or of another shape).
    """
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as Q

    reader = gguf.GGUFReader(str(base))
    arch = reader.fields["general.architecture"].contents()
    n_head = int(reader.fields[f"{arch}.attention.head_count"].contents())
    n_kv = int(reader.fields[f"{arch}.attention.head_count_kv"].contents())
    lora, scale = load_adapter(adapter)
    part = Path(str(out) + ".part")
    writer = gguf.GGUFWriter(str(part), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if name == "general.file_type":
            value = int(getattr(gguf.LlamaFileType, "MOSTLY_" + qtype))
        writer.add_key_value(name, value, vtype, sub_type=sub)
    target = Q[qtype]
    by_gguf = {v: k for k, v in GGUF_NAMES.items()}
    used = 0
    for t in reader.tensors:
        parts = t.name.split(".")
        module = by_gguf.get(parts[2]) if len(parts) == 4 and parts[0] == "blk" else None
        if module is None:
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            continue
        key = f"blk.{parts[1]}.{module}"
        if key + ".lora_a" not in lora or key + ".lora_b" not in lora:
            raise ValueError(f"the adapter in {adapter} has no {key}: not an adapter for {base}")
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        delta = scale * (lora[key + ".lora_b"] @ lora[key + ".lora_a"])
        if delta.shape != w.shape:
            raise ValueError(f"the adapter's {key} is {delta.shape}, {base}'s {t.name} is {w.shape}")
        if module == "q_proj":
            delta = llama_cpp_permute(delta, n_head)
        elif module == "k_proj":
            delta = llama_cpp_permute(delta, n_kv)
        q = gguf.quants.quantize(w + delta, target)
        writer.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=target)
        used += 1
    if used * 2 != len(lora):
        raise ValueError(f"the adapter in {adapter} has {len(lora) // 2} layers, {base} matched {used}")
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        part.replace(out)
    except BaseException:  # a full disk, Ctrl-C: no half-written file left behind
        with contextlib.suppress(Exception):
            writer.close()
        part.unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m laya_tools.system2_finetune", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="sample the corpus and cut the GGUF into parts")
    p.add_argument("--corpus", type=Path, default=Path("corpus/build"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--scale", type=float, default=1.0, help="multiply the default character budgets")
    p.add_argument("--part-mb", type=float, default=12.0, help="largest compressed part (MiB)")
    p.add_argument("--gguf", type=Path, default=None, help="the GGUF to cut into parts (default: `laya system2 install`'s base SmolLM2)")
    p.add_argument("--gguf-parts", type=int, default=2)
    t = sub.add_parser("train", help="train the adapter (PyTorch; a GPU)")
    t.add_argument("--parts", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--work", type=Path, default=Path("/tmp/laya-ft"))
    t.add_argument("--minutes", type=float, default=5.0)
    t.add_argument("--seq-len", type=int, default=1024)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--rank", type=int, default=32)
    t.add_argument("--lr", type=float, default=5e-4)
    t.add_argument("--max-steps", type=int, default=None)
    t.add_argument("--tune-rows", type=int, default=96, help="held-out rows per language for the loss")
    t.add_argument("--dry-run", action="store_true",
                   help="a 2-block random model instead of the GGUF: checks the set-up only")
    m = sub.add_parser("merge", help="add the adapter to a GGUF and write a new one")
    m.add_argument("base", type=Path)
    m.add_argument("adapter", type=Path)
    m.add_argument("out", type=Path)
    m.add_argument("--type", default="Q8_0", choices=("Q8_0", "Q4_1", "Q4_0", "Q5_1"))
    a = ap.parse_args(argv)
    if a.cmd == "pack":
        from engine.system2 import BASE_FILE, cache_dir

        chars = {k: v * a.scale for k, v in DEFAULT_CHARS.items()}
        pack(a.corpus, a.out, chars, a.part_mb, a.gguf or cache_dir() / BASE_FILE, a.gguf_parts)
    elif a.cmd == "train":
        train(a.parts, a.out, a.minutes, a.seq_len, a.batch_size, a.rank, a.lr, a.work, a.dry_run,
              a.max_steps, a.tune_rows)
    else:
        merge(a.base, a.adapter, a.out, a.type)
    return 0


if __name__ == "__main__":
    sys.exit(main())
