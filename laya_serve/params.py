"""Request bodies of ``/complete`` and ``/v1/completions`` -> :class:`CompletionRequest`.

Every check raises :class:`BadRequest` with a message that names the field, which the app answers
as ``400`` (``{"error": {"message": ..., "type": "invalid_request_error"}}``, OpenAI's shape).
Fields this service does not use (``model``, ``user`` aside, ``logprobs``, ...) are ignored, as
OpenAI clients send them; ``stream``, ``echo`` and ``suffix`` are refused, since they would
change what the answer means. Text fields (``prompt``, ``stop``, ``user``) have each lone
surrogate (valid in a JSON string, but no UTF-8 encoder, the tokenizer's included, can take it)
replaced by U+FFFD, as the language server does with document text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.text import well_formed

MAX_TOKENS_LIMIT = 256
"""The most tokens one completion may ask for (the seed's ``--max-seq-len`` is 256 too)."""
MAX_N = 16
"""The most candidates one request may ask for."""
MAX_STOPS = 4
"""Stop sequences per request (OpenAI's limit)."""
MAX_STOP_CHARS = 64
SEED_MODULUS = 2**64
"""A seed is a signed (OpenAI's) or unsigned 64-bit integer, used as an unsigned one (two's
complement: -1 is ``2**64 - 1``), which both numpy's and MLX's generators take."""


class BadRequest(ValueError):
    """A request body the service cannot take; the message is shown to the client."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionRequest:
    """One completion request, validated."""

    prompt: str
    """The text before the cursor (only its last ``--max-seq-len`` tokens are used)."""
    max_tokens: int = 16
    """Most tokens per candidate; an identifier completion counts as one token."""
    temperature: float = 0.0
    """0: greedy; above 0: sampling from the softmax at this temperature, cut to ``top_p``."""
    top_p: float = 1.0
    """Nucleus sampling: the smallest set of tokens whose probability sums to ``top_p``."""
    n: int = 1
    """Candidates to return."""
    stop: tuple[str, ...] = ()
    """A candidate ends before the first of these strings (which is not returned)."""
    seed: int | None = None
    """Seed for sampling (reproducible candidates at ``temperature > 0``), 0 to ``2**64 - 1``:
    a negative seed of the request is taken modulo :data:`SEED_MODULUS`."""
    user: str | None = None
    """Client key for latest-wins (OpenAI's ``user`` field, or the ``X-Laya-Client`` header)."""


def parse(body: bytes, max_tokens_limit: int = MAX_TOKENS_LIMIT) -> CompletionRequest:
    """Decode and check a JSON request body.

    Args:
        body: the raw body (UTF-8 JSON object).
        max_tokens_limit: the server's bound on ``max_tokens``.

    Raises:
        BadRequest: not JSON, not an object, or a field of the wrong type or out of range.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body is not UTF-8") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRequest(f"the body is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise BadRequest("the body is not valid JSON: it is nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more digits than int() takes
        raise BadRequest(f"the body is not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise BadRequest(f"the body must be a JSON object, not {_kind(d)}")
    for name in ("stream", "echo"):
        if d.get(name):
            raise BadRequest(f"'{name}' is not supported by this service")
    if d.get("suffix"):
        raise BadRequest("'suffix' is not supported by this service")
    prompt = d.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]  # OpenAI clients may send one prompt as a one-element list
    if not isinstance(prompt, str):
        raise BadRequest("'prompt' is required and must be a string" if prompt is None
                         else f"'prompt' must be a string, not {_kind(prompt)}")
    stop = d.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        raise BadRequest("'stop' must be a string or a list of strings")
    if len(stops) > MAX_STOPS or any(not s or len(s) > MAX_STOP_CHARS for s in stops):
        raise BadRequest(f"'stop' takes at most {MAX_STOPS} non-empty strings of at most {MAX_STOP_CHARS} characters")
    user = d.get("user")
    if user is not None and not isinstance(user, str):
        raise BadRequest(f"'user' must be a string, not {_kind(user)}")
    if user is not None and len(user) > 256:
        raise BadRequest("'user' must be at most 256 characters")
    seed = _int(d, "seed", None, -(SEED_MODULUS >> 1), SEED_MODULUS - 1)
    return CompletionRequest(
        prompt=well_formed(prompt),
        max_tokens=_int(d, "max_tokens", 16, 0, max_tokens_limit),
        temperature=_num(d, "temperature", 0.0, 0.0, 2.0),
        top_p=_num(d, "top_p", 1.0, 0.0, 1.0, low_open=True),
        n=_int(d, "n", 1, 1, MAX_N),
        stop=tuple(well_formed(s) for s in stops),
        seed=None if seed is None else seed % SEED_MODULUS,
        user=None if user is None else well_formed(user),
    )


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null", int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def _int(d: dict, name: str, default, lo: int, hi: int):
    v = d.get(name)
    if v is None:
        return default
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise BadRequest(f"'{name}' must be an integer, not {_kind(v)}")
    if not lo <= v <= hi:
        raise BadRequest(f"'{name}' must be between {lo} and {hi}, got {v}")
    return v


def _num(d: dict, name: str, default: float, lo: float, hi: float, low_open: bool = False) -> float:
    v = d.get(name)
    if v is None:
        return default
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise BadRequest(f"'{name}' must be a number, not {_kind(v)}")
    v = float(v)
    if not (lo < v if low_open else lo <= v) or not v <= hi:
        raise BadRequest(f"'{name}' must be {'above' if low_open else 'at least'} {lo} and at most {hi}, got {v}")
    return v
