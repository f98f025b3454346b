"""A missing, corrupt or mismatched model folder fails fast with an error naming the file."""

import json
import shutil

import pytest

from engine.model_io import DEFAULT_MODEL_DIR, ModelLoadError
from engine.predictor import Predictor


@pytest.fixture
def copy(tmp_path):
    dst = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, dst)
    return dst


def test_missing_folder(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        Predictor.load(tmp_path / "nope")


def test_a_file_given_as_the_model_folder(tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelLoadError, match="model.gguf is not a folder"):
        Predictor.load(tmp_path / "model.gguf")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_file_is_named(copy, name):
    (copy / name).unlink()
    with pytest.raises(ModelLoadError, match=name.replace(".", r"\.")):
        Predictor.load(copy)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json", "lexicon-python.npz",
                                  "rerank.json"])
def test_corrupt_file_is_named(copy, name):
    data = (copy / name).read_bytes()
    (copy / name).write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelLoadError, match=name.replace(".", r"\.")):
        Predictor.load(copy)


def test_mismatched_config_is_named(copy):
    cfg = json.loads((copy / "config.json").read_text())
    cfg["vocab_size"] = 8192
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="vocab_size"):
        Predictor.load(copy)


def test_wrong_layer_count_is_named(copy):
    cfg = json.loads((copy / "config.json").read_text())
    cfg["num_hidden_layers"] = 6
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="model.safetensors"):
        Predictor.load(copy)


def test_variant_without_model_says_so(tmp_path):
    variant = tmp_path / "bare.toml"
    variant.write_text('model = ""\nbits = 8\n')
    with pytest.raises(ModelLoadError, match="'bare' ships no trained model"):
        Predictor.load(variant=str(variant))
