"""Load and save model folders in the mlx-lm format.

A model folder holds ``config.json`` (``ModelArgs`` keys, plus ``"quantization": {"group_size",
"bits"}`` when quantized, exactly as mlx-lm writes it), ``model.safetensors`` and
``tokenizer.json``. Every failure names the file at fault.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import _blas

_blas.preload()

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402

from .model import Model, ModelArgs  # noqa: E402

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "models" / "laya-code"
"""The model shipped inside the package."""


class ModelLoadError(RuntimeError):
    """The model folder is missing, incomplete, corrupt or does not match its config."""


def read_config(folder: Path) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        if folder.exists():
            raise ModelLoadError(f"model folder {folder} is not a folder (give the folder that holds "
                                 "config.json and the weights)")
        raise ModelLoadError(f"model folder {folder} does not exist")
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"model folder {folder} has no config.json")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{path} is not valid JSON: {e}") from e
    if config.get("model_type") != "llama":
        raise ModelLoadError(f"{path}: model_type {config.get('model_type')!r} is not supported (expected 'llama')")
    return config


def load_weights(folder: Path) -> tuple[ModelArgs, dict, dict[str, mx.array]]:
    """Read config and raw (possibly quantized) weights without building a module.

    Returns:
        ``(args, config, weights)``; ``weights`` maps mlx-lm parameter names to arrays.

    Raises:
        ModelLoadError: naming the file, when anything is missing or corrupt.
    """
    folder = Path(folder)
    config = read_config(folder)
    args = ModelArgs.from_dict(config)
    path = folder / "model.safetensors"
    if not path.is_file():
        raise ModelLoadError(f"model folder {folder} has no model.safetensors")
    try:
        weights = mx.load(str(path))
    except Exception as e:  # mlx raises ValueError/RuntimeError on truncated files
        raise ModelLoadError(f"{path} is corrupt or not a safetensors file: {e}") from e
    emb = weights.get("model.embed_tokens.weight")
    if emb is None:
        raise ModelLoadError(f"{path} has no model.embed_tokens.weight")
    if emb.shape[0] != args.vocab_size:
        raise ModelLoadError(f"{path}: embedding has {emb.shape[0]} rows but config.json says "
                             f"vocab_size={args.vocab_size}")
    return args, config, weights


def load_model(folder: Path) -> tuple[Model, dict]:
    """Build the MLX :class:`Model` from a folder, honouring ``quantization`` as mlx-lm does.

    Raises:
        ModelLoadError: naming the file at fault.
    """
    args, config, weights = load_weights(folder)
    model = Model(args)
    q = config.get("quantization")
    if q:
        nn.quantize(model, group_size=q["group_size"], bits=q["bits"],
                    class_predicate=lambda p, m: f"{p}.scales" in weights)
    try:
        model.load_weights(list(model.sanitize(weights).items()), strict=True)
    except ValueError as e:
        raise ModelLoadError(f"{Path(folder) / 'model.safetensors'} does not match config.json: {e}") from e
    mx.eval(model.parameters())
    return model, config


def save_model_folder(model: Model, tokenizer_path: Path, out_dir: Path, bits: int | None = 6,
                      group_size: int = 64, extra: dict | None = None) -> None:
    """Write ``config.json``, ``model.safetensors`` and ``tokenizer.json`` to ``out_dir``.

    Args:
        model: float model (quantized in place when ``bits`` is set).
        bits: 6 for the shipped model (affine, per ``group_size`` weights), None for float.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in vars(model.args).items()}
    if bits:
        nn.quantize(model, group_size=group_size, bits=bits)
        config["quantization"] = {"group_size": group_size, "bits": bits}
    if extra:
        config.update(extra)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out_dir / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    if Path(tokenizer_path).resolve() != (out_dir / "tokenizer.json").resolve():
        shutil.copy(tokenizer_path, out_dir / "tokenizer.json")
