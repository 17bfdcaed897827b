"""Blinding: a prompt view must never carry split, fault or gold information.

A view is the structured JSON a prompt is rendered from. The study's blinded prompts omit the
split (development or held out), the injected fault and the gold answer, and so must every view.
``check_blinded`` refuses any view with an object key naming one of those (or the oracle that
knows the gold answer), at any depth, case-insensitively and as a substring, so ``gold_value``,
``faultId`` or ``data_split`` are refused as well as ``gold``.

Values cannot be judged generically (an agent's correct answer legitimately equals gold), so the
builders of views are responsible for values; tests scan rendered prompts for planted ones. This
module performs no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from harness.errors import PromptBlindingError

__all__ = ["WITHHELD_WORDS", "blinding_findings", "check_blinded"]

WITHHELD_WORDS: Final = ("split", "fault", "gold", "oracle")
"""Words no key of a view may contain."""


def blinding_findings(view: Any, path: str = "$") -> list[str]:
    """Return the JSON path of every key in ``view`` that names withheld information."""
    found: list[str] = []
    if isinstance(view, Mapping):
        for key, value in view.items():
            lowered = str(key).lower()
            if any(word in lowered for word in WITHHELD_WORDS):
                found.append(f"{path}.{key}")
            found.extend(blinding_findings(value, f"{path}.{key}"))
    elif isinstance(view, (list, tuple)):
        for index, value in enumerate(view):
            found.extend(blinding_findings(value, f"{path}[{index}]"))
    return found


def check_blinded(view: Any, *, what: str) -> None:
    """Raise unless ``view`` is blinded.

    Args:
        view: decoded JSON (dicts, lists, scalars).
        what: what the view is for (a prompt id), for the message.

    Raises:
        PromptBlindingError: naming the paths of the offending keys (never their values).
    """
    found = blinding_findings(view)
    if found:
        raise PromptBlindingError(
            f"view for {what} carries withheld fields (split/fault/gold/oracle): {', '.join(found)}"
        )
