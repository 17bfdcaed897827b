"""One value perturbation: a plausible wrong value of the same shape as a claimed one.

The fault operators (``harness.faults``, F6: a certified value the receipts do not support) and
the simulated planner (``harness.providers.sim_planner``, a miscomputed claim) both write "what
a careless synthesis step would write": an arithmetic slip on a number, a mixed-up id or date on
a string, two items swapped in a list. They differ in two pinned ways, kept so that the
benchmark manifest and every simulated run stay byte-identical:

- ``strict=True`` (the faults): a string becomes another member of its own kind (a date for a
  date, an entity for an entity); an empty list becomes ``["?"]``, a dict has its first key's
  value perturbed, and a value of any other type is refused (``ValueError``): a fault snapshot
  must differ from the clean one.
- ``strict=False`` (the simulated planner): a string becomes the first other entity or date of
  the slot's scope, and a value with no obvious slip (empty list, dict, other types) is
  returned unchanged (the planner's claim then happens to be right).
"""

from __future__ import annotations

from typing import Any

from harness.ect.model import SlotRequirement

__all__ = ["perturb"]


def perturb(value: Any, slot: SlotRequirement, *, strict: bool) -> Any:
    """A different value of the same shape as ``value``, the slot ``slot`` claims.

    Raises:
        ValueError: when ``strict`` and ``value``'s type has no perturbation.
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + max(1, abs(value) // 10)
    if isinstance(value, float):
        return value * 1.1 if value else 1.0
    if isinstance(value, str):
        dates = [d for d in slot.scope.dates if d is not None]
        if strict:
            pool = dates if value in dates else list(slot.scope.entities)
        else:
            pool = [*slot.scope.entities, *dates]
        return next((p for p in pool if p != value), value + "-")
    if isinstance(value, list) and (value or strict):
        if len(value) > 1:
            return [value[1], value[0], *value[2:]]
        return [perturb(value[0], slot, strict=strict)] if value else ["?"]
    if not strict:
        return value
    if isinstance(value, dict) and value:
        first = sorted(value)[0]
        return {**value, first: perturb(value[first], slot, strict=strict)}
    raise ValueError(f"cannot alter a claimed value of type {type(value).__name__}")
