"""Where preflight gets the canonical schedule to compare a schedule file with.

A schedule file is exact only when it equals the schedule regenerated from the frozen study
config. The regeneration belongs to the study (``harness.studies.v2``); this module only names
the callable preflight uses, so a study's runner hands in its own generator.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

__all__ = ["V2_GENERATOR", "ScheduleSource", "default_schedule_source"]

ScheduleSource = Callable[[], Sequence[Mapping[str, Any]]]
"""Returns the canonical schedule rows, in run order."""

V2_GENERATOR: Final = ("harness.studies.v2.schedule", "canonical_schedule")
"""Module and function that regenerate the V2 schedule from its frozen study config."""


def default_schedule_source() -> ScheduleSource:
    """The V2 study's schedule generator, looked up when the source is called.

    Calling the returned source raises ``ValueError`` naming what is missing when the study
    defines no generator (the schedule check then fails with that line).
    """

    def source() -> Sequence[Mapping[str, Any]]:
        module_name, attribute = V2_GENERATOR
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ValueError(f"the V2 schedule generator {module_name} is not available") from e
        generate = getattr(module, attribute, None)
        if not callable(generate):
            raise ValueError(f"{module_name} defines no {attribute}()")
        rows: Sequence[Mapping[str, Any]] = generate()
        return rows

    return source
