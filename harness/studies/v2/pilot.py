"""Pilot subsets of the V2 schedule, and the cost estimate shown before a real-provider run.

A *pilot* is a run of a subset of the canonical schedule: ``--limit K`` (the first K rows of
the canonical order) and/or ``--cells PATTERN`` (shell-style globs on cell ids, repeatable; a
row is kept when any pattern matches it; with ``--limit`` too, the first K matching rows).
Its store binds only the selected rows (in canonical order, each keeping its ``index``) and
carries the label in its genesis identity under ``pilot`` (``PilotLabel``): ``v2 resume`` reads
it from there and continues the same rows, so a pilot can never be resumed into the full study;
``store finalize --expect-cells`` refuses it; ``v2 status`` and ``v2 report`` say PILOT.

``estimate`` is the cost of the planned cells before the first provider call: provider calls,
tokens and cost as a range, from the per-arm request sizes of the simulated run
(``SIMULATED_PROFILE``, measured by ``scripts/bench_concurrency.py --profile``) and the price
table of the frozen generation config. It runs nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from harness.errors import V2StudyError
from harness.providers.config import PriceTable
from harness.run_identity import PILOT_KEY, PilotLabel, pilot_label
from harness.studies.v2.schedule import Row

__all__ = [
    "PILOT_KEY",
    "SIMULATED_PROFILE",
    "ArmProfile",
    "Estimate",
    "PilotLabel",
    "estimate",
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


@dataclass(frozen=True)
class Estimate:
    """The planned cells and the range of what they may cost."""

    cells: int
    calls: tuple[int, int, int]
    tokens: tuple[int, int, int]
    cost: tuple[float, float, float]
    currency: str
    wall_seconds: tuple[float, float]

    def lines(self, max_cells: int, latency_s: float) -> list[str]:
        """The estimate as console lines."""
        low_c, mid_c, high_c = self.cost
        return [
            f"planned: {self.cells} cells, {self.calls[0]}-{self.calls[2]} provider calls "
            f"(about {self.calls[1]})",
            f"tokens: {self.tokens[0]:,}-{self.tokens[2]:,} (about {self.tokens[1]:,}); cost "
            f"{low_c:.2f}-{high_c:.2f} {self.currency} (about {mid_c:.2f}; thinking tokens "
            "billed as output are not in this estimate)",
            f"wall time at --max-cells {max_cells} and {latency_s:g} s per call: "
            f"{_clock(self.wall_seconds[0])}-{_clock(self.wall_seconds[1])}",
        ]


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def estimate(
    rows: Sequence[Row], price: PriceTable, *, max_cells: int, latency_s: float
) -> Estimate:
    """The range of provider calls, tokens, cost and wall time of running ``rows``."""
    calls = [0, 0.0, 0]
    tokens = [0, 0.0, 0]
    cost = [0.0, 0.0, 0.0]
    for row in rows:
        arm = SIMULATED_PROFILE[row.policy]
        for slot in range(3):
            calls[slot] += arm.calls[slot]
            prompt, output = arm.prompt_tokens[slot], arm.output_tokens[slot]
            tokens[slot] += prompt + output
            cost[slot] += (
                prompt * price.input_per_million + output * price.output_per_million
            ) / 1e6
    lanes = max(1, min(max_cells, len(rows)))
    wall = (calls[0] * latency_s / lanes, calls[2] * latency_s / lanes)
    return Estimate(
        cells=len(rows),
        calls=(int(calls[0]), round(calls[1]), int(calls[2])),
        tokens=(int(tokens[0]), round(tokens[1]), int(tokens[2])),
        cost=(cost[0], cost[1], cost[2]),
        currency=price.currency,
        wall_seconds=wall,
    )
