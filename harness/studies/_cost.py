"""The cost estimate shown before a real-provider run, and the question after it (both studies).

A study describes what each unit of work (a V2 cell, a static snapshot) asks of the provider as a
``CallPlan``: provider calls, prompt and output tokens per unit (min, typical, max), and the
largest output one call may bill (the role's frozen ``max_output_tokens``, which the thinking
budget counts against). ``estimate`` adds them up and prices them with the run's price table
(``selection.run_price``): a range for the typical run, and an *upper bound* in which every call
of every unit is the largest and bills its whole output budget, thinking included. With no price
table (an endpoint other than Google's, no ``--price-input``/``--price-output``) the cost is
unknown, and the lines say so instead of quoting a price.

The wall time assumes a nominal latency per call and N units in parallel; with pacing
(``--max-rpm``/``--max-tpm``, ``harness.providers.pacing``) it is at least what the pace allows.

``announce`` prints the lines and asks the question; a "no" raises ``RunDeclinedError`` (exit 0,
nothing written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from harness.errors import RunDeclinedError
from harness.providers.config import PriceTable

__all__ = ["NOMINAL_LATENCY_S", "CallPlan", "Estimate", "announce", "estimate"]

NOMINAL_LATENCY_S: Final = 2.0
NO_PRICE: Final = (
    "cost unknown: no price table for this endpoint (give --price-input USD --price-output USD "
    "per million tokens)"
)


@dataclass(frozen=True)
class CallPlan:
    """What one unit of work asks of the provider: (min, typical, max) per unit.

    ``output_budget`` is the largest output one of its calls may bill, thinking included.
    """

    calls: tuple[int, float, int]
    prompt_tokens: tuple[int, float, int]
    output_tokens: tuple[int, float, int]
    output_budget: int


@dataclass(frozen=True)
class Estimate:
    """The planned units and the range of what they may cost and take."""

    units: int
    unit: str
    calls: tuple[int, int, int]
    tokens: tuple[int, int, int]
    cost: tuple[float, float, float] | None
    upper_cost: float | None
    currency: str
    wall_seconds: tuple[float, float]
    max_cells: int
    latency_s: float
    pace: str

    def lines(self) -> list[str]:
        """The estimate as console lines."""
        if self.cost is None or self.upper_cost is None:
            money = NO_PRICE
        else:
            low, mid, high = self.cost
            money = (
                f"cost {low:.2f}-{high:.2f} {self.currency} (about {mid:.2f}); at most "
                f"{self.upper_cost:.2f} {self.currency} if every call used its whole output "
                "budget, thinking included"
            )
        return [
            f"planned: {self.units} {self.unit}s, {self.calls[0]}-{self.calls[2]} provider "
            f"calls (about {self.calls[1]})",
            f"tokens: {self.tokens[0]:,}-{self.tokens[2]:,} (about {self.tokens[1]:,}); {money}",
            f"wall time at --max-cells {self.max_cells} and {self.latency_s:g} s per call"
            f"{self.pace}: {_clock(self.wall_seconds[0])}-{_clock(self.wall_seconds[1])}",
        ]


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def estimate(
    plans: Sequence[CallPlan],
    price: PriceTable | None,
    *,
    unit: str,
    max_cells: int,
    latency_s: float = NOMINAL_LATENCY_S,
    max_rpm: int | None = None,
    max_tpm: int | None = None,
) -> Estimate:
    """The range of provider calls, tokens, cost and wall time of running ``plans``."""
    calls = [0.0, 0.0, 0.0]
    tokens = [0.0, 0.0, 0.0]
    cost = [0.0, 0.0, 0.0]
    upper = 0.0
    rate_in = 0.0 if price is None else price.input_per_million / 1e6
    rate_out = 0.0 if price is None else price.output_per_million / 1e6
    for plan in plans:
        for slot in range(3):
            calls[slot] += plan.calls[slot]
            prompt, output = plan.prompt_tokens[slot], plan.output_tokens[slot]
            tokens[slot] += prompt + output
            cost[slot] += prompt * rate_in + output * rate_out
        upper += plan.prompt_tokens[2] * rate_in + plan.calls[2] * plan.output_budget * rate_out
    lanes = max(1, min(max_cells, len(plans)))
    wall = [calls[0] * latency_s / lanes, calls[2] * latency_s / lanes]
    pace = []
    if max_rpm is not None:
        pace.append(f"--max-rpm {max_rpm}")
        wall = [max(wall[0], calls[0] * 60.0 / max_rpm), max(wall[1], calls[2] * 60.0 / max_rpm)]
    if max_tpm is not None:
        pace.append(f"--max-tpm {max_tpm}")
        wall = [
            max(wall[0], tokens[0] * 60.0 / max_tpm),
            max(wall[1], tokens[2] * 60.0 / max_tpm),
        ]
    priced = price is not None and price.priced
    return Estimate(
        units=len(plans),
        unit=unit,
        calls=(int(calls[0]), round(calls[1]), int(calls[2])),
        tokens=(int(tokens[0]), round(tokens[1]), int(tokens[2])),
        cost=(cost[0], cost[1], cost[2]) if priced else None,
        upper_cost=upper if priced else None,
        currency="USD" if price is None else price.currency,
        wall_seconds=(wall[0], wall[1]),
        max_cells=max_cells,
        latency_s=latency_s,
        pace=f" paced by {' and '.join(pace)}" if pace else "",
    )


def announce(
    guess: Estimate,
    stream: TextIO,
    *,
    show: bool,
    confirm: Callable[[Sequence[str]], bool] | None,
) -> None:
    """Print the estimate (not with -q, unless a question follows) and ask ``confirm``.

    Raises:
        RunDeclinedError: ``confirm`` said no (nothing was written).
    """
    lines = guess.lines()
    for line in lines if show or confirm is not None else ():
        stream.write(f"estimate: {line}\n")
    stream.flush()
    if confirm is not None and not confirm(lines):
        raise RunDeclinedError("declined at the cost estimate; nothing was written")
