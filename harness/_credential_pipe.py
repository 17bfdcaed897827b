"""The key a re-executed ``harness`` inherited through a pipe (see ``harness._entry``).

``take_inherited`` runs first thing in the new process image: it reads the pipe named by
``HARNESS_CREDENTIAL_FD=<fd>:<NAME>`` to its end, closes it and removes the variable, so no
child process can ever find the descriptor or the key. ``inherited_key(NAME)`` then hands the
key to ``harness.providers.credentials`` as if variable NAME still held it. This module imports
nothing of the harness, so the entry point stays fast.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

__all__ = ["CREDENTIAL_FD_VARIABLE", "inherited", "inherited_key", "take_inherited"]

CREDENTIAL_FD_VARIABLE: Final = "HARNESS_CREDENTIAL_FD"

_inherited: dict[str, str] = {}


def take_inherited() -> None:
    """Read the key the previous image piped over (first thing, before any child can exist)."""
    marker = os.environ.pop(CREDENTIAL_FD_VARIABLE, None)
    if marker is None:
        return
    fd_text, _, name = marker.partition(":")
    try:
        fd = int(fd_text)
    except ValueError:
        return
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    _inherited[name] = b"".join(chunks).decode("utf-8", "surrogateescape")


def inherited_key(name: str) -> str | None:
    """The key variable ``name`` held before this program re-executed itself without it."""
    return _inherited.get(name)


def inherited() -> bool:
    """True when this process image received a key through the pipe."""
    return bool(_inherited)
