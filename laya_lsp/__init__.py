"""Laya's language server: pygls handlers in front of the engine thread (``engine/``)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("laya")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
