"""The process's capacity for blocking calls: one limiter for provider calls, one for tool calls.

Provider calls and tool calls run on worker threads. trio's default thread limiter (40 tokens,
shared by every ``to_thread.run_sync``) let hung provider connections - a reply dripping a byte
at a time, each abandoned at its deadline while its thread still reads - hold every token, so
later attempts were never sent and tool calls waited behind them. Here each kind has its own
``trio.CapacityLimiter``, sized from ``--max-cells`` N: a cell has at most one provider call and
one tool call in flight, and the other N tokens cover calls abandoned at their deadline whose
thread has not ended yet (the HTTP transport ends them at the attempt's deadline too). A
provider attempt that cannot get a token within its deadline is never sent: it fails as
``local_capacity``, an infrastructure failure of this process that counts toward the circuit
breaker, never the model's timeout.

The limiters are per trio run (``RunVar``): ``install`` sizes them when a run starts; code that
runs without one (a test calling a provider directly) gets the size for one cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

__all__ = ["Capacity", "capacity_for", "current", "install"]


@dataclass(frozen=True)
class Capacity:
    """The limiters of one trio run."""

    cells: int
    providers: trio.CapacityLimiter
    tools: trio.CapacityLimiter


def capacity_for(max_cells: int) -> Capacity:
    """Limiters for ``max_cells`` cells in flight (2N tokens each: see the module docs)."""
    cells = max(1, max_cells)
    return Capacity(
        cells=cells,
        providers=trio.CapacityLimiter(2 * cells),
        tools=trio.CapacityLimiter(2 * cells),
    )


_capacity: trio.lowlevel.RunVar[Capacity] = trio.lowlevel.RunVar("harness_capacity")


def install(max_cells: int) -> Capacity:
    """Size this trio run's limiters for ``max_cells`` cells (call before any call starts)."""
    capacity = capacity_for(max_cells)
    _capacity.set(capacity)
    return capacity


def current() -> Capacity:
    """This trio run's limiters (sized for one cell when none were installed)."""
    try:
        return _capacity.get()
    except LookupError:
        return install(1)
