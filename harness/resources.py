"""Where the project's files are, in a source checkout and in an installed wheel: one home.

The top-level ``schedules/`` and ``sandbox_profiles/`` folders are the source of the frozen
study files and the sandbox profiles. ``harness/_data/`` holds a symlink to each, so a checkout
reads the folders themselves, and a built wheel carries real copies under ``harness/_data/``
(package data), so an installed ``harness`` finds the same bytes without a checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["code_root", "data_path", "default_stores_dir", "examples_dir", "is_checkout"]

_PACKAGE: Final = Path(__file__).resolve().parent


def code_root() -> Path:
    """The directory holding the ``harness`` (and ``preflight``) packages this process imported:
    the checkout's root, or ``site-packages`` for an installed wheel."""
    return _PACKAGE.parent


def is_checkout() -> bool:
    """Whether ``harness`` runs from a source checkout (editable install or the tree itself)."""
    root = code_root()
    return (root / "pyproject.toml").is_file() and (root / "schedules").is_dir()


def data_path(rel: str) -> Path:
    """The file at ``rel`` (e.g. ``schedules/v2-config.json``), resolved: the checkout's own
    file, or the wheel's copy. The path may not exist; readers report that themselves."""
    return (_PACKAGE / "_data" / rel).resolve()


def examples_dir() -> Path:
    """The bundled worked examples (one folder of verifier inputs each)."""
    return _PACKAGE / "examples"


def default_stores_dir() -> Path:
    """Default home of run stores: the checkout's ``stores/``, else ``./stores``."""
    return code_root() / "stores" if is_checkout() else Path.cwd() / "stores"
