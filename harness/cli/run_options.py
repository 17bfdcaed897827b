"""The run options both studies' commands share: ``--yes`` and the cost question, pacing.

``confirm`` asks "continue with these provider calls?" after the cost estimate, only when stdin
is a terminal and ``--yes`` was not given; Ctrl-C at the question is exit 130 like everywhere
else (``KeyboardInterrupt``, handled once by the main command), and a "no" is exit 0 with
nothing written (``harness.studies._cost.announce``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from harness.providers.pacing import Pacing

__all__ = ["confirm", "pacing_of", "pacing_options", "yes_option"]

F = TypeVar("F", bound=Callable[..., Any])


def yes_option(f: F) -> F:
    """Add ``--yes`` (keyword ``assume_yes``)."""
    return click.option(
        "--yes",
        "assume_yes",
        is_flag=True,
        help="Skip the question after a real provider's cost estimate.",
    )(f)


def confirm(assume_yes: bool) -> Callable[[Sequence[str]], bool] | None:
    """Ask to continue after the cost estimate only when stdin is a terminal."""
    if assume_yes or not sys.stdin.isatty():
        return None

    def ask(_lines: Sequence[str]) -> bool:
        try:
            return click.confirm("continue with these provider calls?", err=True)
        except click.Abort:
            raise KeyboardInterrupt from None  # Ctrl-C (or end of input) at the question

    return ask


def pacing_options(f: F) -> F:
    """Add ``--max-rpm N`` and ``--max-tpm N`` (keywords ``max_rpm``, ``max_tpm``)."""

    f = click.option(
        "--max-tpm",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Pace provider requests to at most N tokens per minute (your quota), so the run "
        "waits instead of meeting HTTP 429. Recorded in run.log, not in the chain.",
    )(f)
    f = click.option(
        "--max-rpm",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Pace provider requests to at most N per minute (your quota). Recorded in run.log.",
    )(f)
    return f


def pacing_of(max_rpm: int | None, max_tpm: int | None) -> Pacing:
    """The pacing the two options name."""
    return Pacing(max_rpm=max_rpm, max_tpm=max_tpm)
