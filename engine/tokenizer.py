"""Code tokenizer: byte-level BPE (HF ``tokenizers``) with a code-aware pre-tokenizer.

The pre-tokenizer splits text into identifiers, numbers, runs of punctuation, runs of spaces/tabs,
and newline-plus-indentation, and BPE merges never cross those pieces. Two properties follow that
the engine relies on:

* The text before an identifier always ends on a token boundary that training also saw, so the
  model can be asked "which identifier comes next" at the start of a word without token healing.
* Every ``"\\n"`` starts a new piece, so a document tokenizes line by line: the tokens of a text are
  the concatenation of the tokens of its lines (each line after the first starting with its
  ``"\\n"``). The engine caches tokens per line and never re-tokenizes a whole file per keystroke.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

IDENT = r"[\p{L}_][\p{L}\p{N}_]*"
"""An identifier: a letter or underscore, then letters, digits, underscores (Unicode aware)."""
PATTERN = r"\n[ \t]*|[ \t]+|" + IDENT + r"|\p{N}+|[^\s\p{L}\p{N}_]+|\s"
"""Pre-tokenizer pieces: newline + indentation, blanks, identifiers, digit runs, punctuation runs,
any other single whitespace character."""

SPECIAL_TOKENS = ["<|endoftext|>"]
EOS = "<|endoftext|>"


def pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def train_tokenizer(texts, vocab_size: int) -> Tokenizer:
    """Train the BPE on an iterable of source texts.

    Args:
        texts: iterable of str (whole files).
        vocab_size: total vocabulary including the 256 byte tokens and special tokens.

    Returns:
        A ``tokenizers.Tokenizer``.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_tokenizer(path: Path) -> Tokenizer:
    """Load ``tokenizer.json``.

    Raises:
        FileNotFoundError: naming the file, when it is missing.
        ValueError: naming the file, when it cannot be parsed.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file {path} does not exist")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception on bad JSON
        raise ValueError(f"tokenizer file {path} is corrupt: {e}") from e
