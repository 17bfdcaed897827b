"""The project's exception hierarchy: broken I/O or misuse, never a verdict.

A rejected certificate is a ``Decision``, not an exception. Every error a user can cause derives
from ``HarnessError``; the CLI catches it once and prints one sentence with its exit code.
Each area adds its family here (store, sandbox, provider, ...), so there is one home for them.
"""

from __future__ import annotations

__all__ = ["HarnessError", "InputError"]


class HarnessError(Exception):
    """Base of every expected failure. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class InputError(HarnessError):
    """An input file is missing, unreadable or not what the command needs."""
