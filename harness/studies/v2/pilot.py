"""Pilot subsets of the V2 schedule, and the cost estimate shown before a real-provider run.

A *pilot* is a run of a subset of the canonical schedule: ``--limit K`` (the first K rows of
the canonical order) and/or ``--cells PATTERN`` (shell-style globs on cell ids, repeatable; a
row is kept when any pattern matches it; with ``--limit`` too, the first K matching rows).
Its store binds only the selected rows (in canonical order, each keeping its ``index``) and
carries the label in its genesis identity under ``pilot`` (``PilotLabel``): ``v2 resume`` reads
it from there and continues the same rows, so a pilot can never be resumed into the full study;
``store finalize --expect-cells`` refuses it; ``v2 status`` and ``v2 report`` say PILOT.

``call_plans`` is what the planned cells ask of the provider, for the cost estimate before the
first provider call (``harness.studies._cost``): provider calls and tokens per cell from the
per-arm request sizes of the simulated run (``SIMULATED_PROFILE``, measured by
``scripts/bench_concurrency.py --profile``) and the frozen output budgets. It runs nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from harness.errors import V2StudyError
from harness.providers.config import GeminiSettings
from harness.run_identity import PILOT_KEY, PilotLabel, pilot_label
from harness.studies._cost import CallPlan
from harness.studies.v2.schedule import Row

__all__ = [
    "PILOT_KEY",
    "SIMULATED_PROFILE",
    "ArmProfile",
    "PilotLabel",
    "call_plans",
    "pilot_label",
    "select_rows",
]


def select_rows(
    rows: Sequence[Row], limit: int | None, patterns: Sequence[str]
) -> tuple[tuple[Row, ...], PilotLabel | None]:
    """The rows a run covers and its pilot label (None: the whole study).

    Raises:
        V2StudyError: ``limit`` below 1, an empty pattern, or a pattern that matches no cell.
    """
    if limit is None and not patterns:
        return tuple(rows), None
    if limit is not None and limit < 1:
        raise V2StudyError(f"--limit must be at least 1, not {limit}")
    chosen = list(rows)
    for pattern in patterns:
        if not pattern:
            raise V2StudyError("--cells needs a non-empty glob pattern on cell ids")
        if not any(fnmatch.fnmatchcase(row.cell_id, pattern) for row in rows):
            raise V2StudyError(
                f"--cells {pattern!r} matches no cell id of the schedule "
                "(cell ids look like w10-lookup.clean.ect.s1)"
            )
    if patterns:
        chosen = [r for r in rows if any(fnmatch.fnmatchcase(r.cell_id, p) for p in patterns)]
    if limit is not None:
        chosen = chosen[:limit]
    label = PilotLabel(limit=limit, cells=tuple(patterns), rows=len(chosen), of=len(rows))
    return tuple(chosen), label


@dataclass(frozen=True)
class ArmProfile:
    """Per-cell provider calls and tokens of one arm in the simulated run (min, mean, max)."""

    calls: tuple[int, float, int]
    prompt_tokens: tuple[int, float, int]
    output_tokens: tuple[int, float, int]


# Measured on the simulated run of the full schedule (576 cells) with
# `scripts/bench_concurrency.py --profile`; tokens are the simulated provider's estimate from
# text length (characters / chars_per_token), i.e. the request sizes a real model would see;
# output tokens include thinking tokens (none in the simulation).
SIMULATED_PROFILE: Final[dict[str, ArmProfile]] = {
    "critic": ArmProfile((1, 1.3, 4), (2003, 3577.2, 9859), (42, 276.2, 526)),
    "controller": ArmProfile((1, 1.3, 4), (2003, 3690.0, 14166), (86, 276.9, 641)),
    "full_trace": ArmProfile((2, 2.6, 8), (2699, 5514.2, 19841), (201, 338.1, 1335)),
    "ect": ArmProfile((1, 2.1, 4), (2074, 6561.3, 20221), (216, 453.3, 1236)),
}


def call_plans(rows: Sequence[Row], limits: GeminiSettings) -> list[CallPlan]:
    """What each row asks of the provider (``SIMULATED_PROFILE`` of its arm), with the largest
    output one call may bill under the frozen limits (thinking counts against it)."""
    budget = max(limits.planner.max_output_tokens, limits.critic.max_output_tokens)
    return [
        CallPlan(
            calls=SIMULATED_PROFILE[row.policy].calls,
            prompt_tokens=SIMULATED_PROFILE[row.policy].prompt_tokens,
            output_tokens=SIMULATED_PROFILE[row.policy].output_tokens,
            output_budget=budget,
        )
        for row in rows
    ]
