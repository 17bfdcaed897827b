"""A study run's progress line on stderr, for both studies: cells (a V2 cell, a static snapshot)
done, the current one, provider calls, failed attempts, tokens, cost, ETA.

On a terminal the line is redrawn in place, cut to the terminal's width so it never wraps;
otherwise (a log file, CI) no line is drawn and one summary line is written every ``every``
cells and at the end, so logs stay short. Failed provider attempts are counted as they are
journaled, with the current streak of infrastructure failures, so a failing key or network is
visible before the circuit breaker stops the run. Progress is display only: nothing here is
recorded or hashed, and the wall clock it reads (a monotonic one) never reaches a result.
"""

from __future__ import annotations

import shutil
import time
import warnings
from typing import Any, Final, TextIO

from harness.log import before_log_line
from harness.providers.config import GenerationConfig
from harness.providers.kinds import ProviderName
from harness.providers.selection import ProviderSelection, run_price
from harness.terminal import escape

__all__ = ["Progress", "priced"]

_BAR: Final = 24


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.2f}M"
    if count >= 1_000:
        return f"{count / 1_000:.1f}k"
    return str(count)


def priced(selection: ProviderSelection, config: GenerationConfig) -> bool:
    """Whether a run's cost is known: the simulated provider (free) or a price table."""
    return selection.provider is ProviderName.SIMULATED or run_price(selection, config) is not None


class Progress:
    """Counts and renders progress (see the module docstring).

    Args:
        stream: where to write (stderr).
        total: cells in the schedule.
        done: cells already committed when this session started.
        live: redraw one line in place (a terminal) instead of writing periodic lines.
        every: with ``live`` off, write a line every this many cells.
        priced: the run has a price table; without one the cost shows as unknown, never $0.
        unit: what a cell is called on the line (``cells``; the static study's ``snapshots``).
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        total: int,
        done: int,
        live: bool,
        every: int = 48,
        priced: bool = True,
        unit: str = "cells",
    ) -> None:
        self._stream = stream
        self._total = total
        self._done = done
        self._start_done = done
        self._live = live
        self._every = max(1, every)
        self._priced = priced
        self._unit = unit
        self._started = time.monotonic()
        self.provider_calls = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.failed = 0
        self.streak = 0
        self._current = ""
        self._written = -1
        self._drawn = False  # a live line is on the terminal, not ended by a newline
        self._show_warning = warnings.showwarning
        if live:
            # Log lines and Python warnings (an SDK's) end the live line before they print.
            before_log_line(self._end_line)
            warnings.showwarning = self._warning

    def _warning(self, *args: Any, **kwargs: Any) -> None:
        self._end_line()
        self._show_warning(*args, **kwargs)

    def _end_line(self) -> None:
        """End the live line before a log line is written under it."""
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False

    def _line(self) -> str:
        filled = _BAR * self._done // max(1, self._total)
        session = self._done - self._start_done
        elapsed = time.monotonic() - self._started
        eta = _clock(elapsed / session * (self._total - self._done)) if session else "?"
        cost = f"${self.cost_usd:.4f}" if self._priced else "unknown"
        return (
            f"[{'#' * filled}{'.' * (_BAR - filled)}] {self._done}/{self._total} {self._unit}"
            f" | {self._current or '-'} | provider calls {self.provider_calls}"
            f" | failed {self.failed}{f' (streak {self.streak})' if self.streak else ''}"
            f" | tokens {_tokens(self.tokens)} | cost {cost}"
            f" | elapsed {_clock(elapsed)} | ETA {eta}"
        )

    def _write(self, final: bool = False) -> None:
        self._written = self._done
        if self._live:
            width = max(20, shutil.get_terminal_size().columns - 1)
            line = escape(self._line())  # the line's own controls are added below
            if len(line) > width:
                line = line[: width - 3] + "..."
            self._stream.write("\r\x1b[2K" + line + ("\n" if final else ""))
            self._drawn = not final
        else:
            self._stream.write(escape(self._line()) + "\n")
        self._stream.flush()

    def start(self, cell_id: str) -> None:
        """A cell begins (shown live only)."""
        self._current = cell_id
        if self._live:
            self._write()

    def failures(self, failed: int, streak: int) -> None:
        """Failed provider attempts so far this session, and the current infrastructure streak."""
        changed = (failed, streak) != (self.failed, self.streak)
        self.failed, self.streak = failed, streak
        if self._live and changed:
            self._write()

    def finish(self, *, provider_calls: int, tokens: int, cost_usd: float) -> None:
        """A cell was committed."""
        self._done += 1
        self.provider_calls += provider_calls
        self.tokens += tokens
        self.cost_usd += cost_usd
        if self._live or self._done % self._every == 0 or self._done == self._total:
            self._write()

    def close(self) -> None:
        """Write the last line (and end the live one)."""
        self._current = "stopped" if self._done < self._total else "done"
        if self._live or self._written != self._done:
            self._write(final=True)
        if self._live:
            before_log_line(None)
            warnings.showwarning = self._show_warning
