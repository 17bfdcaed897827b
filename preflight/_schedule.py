"""What preflight is given to compare a schedule file with: the study's schedule generator.

A schedule file is exact only when it equals the schedule regenerated from the frozen study
config. The regeneration belongs to the study (``harness.studies.v2.schedule``); preflight does
not import the study, so its caller (the command line, or the study's own run) hands the
generator in as a ``ScheduleSource``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["ScheduleSource"]

ScheduleSource = Callable[[], Sequence[Mapping[str, Any]]]
"""Returns the canonical schedule rows, in run order."""
