"""Optional dependency groups (extras): whether one is installed, and the error when it is not.

``gemini`` (google-genai) serves ``--provider gemini``; ``openai`` (the official openai
client) serves ``--provider openai``; ``plots`` (matplotlib) draws the report
figures. Without them the verifier, the benchmark, the offline studies and every report file
but the figures still work.
"""

from __future__ import annotations

import importlib.util

from harness.errors import MissingExtraError

__all__ = ["extra_installed", "require_extra"]


def extra_installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


def require_extra(module: str, extra: str, what: str) -> None:
    """Raise MissingExtraError naming ``extra`` when ``module`` is not installed."""
    if not extra_installed(module):
        raise MissingExtraError(extra, what)
