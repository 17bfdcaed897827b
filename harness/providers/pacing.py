"""Quota-aware pacing: at most N provider requests, or N tokens, per minute.

``--max-rpm N`` and ``--max-tpm N`` keep a run under the user's quota instead of meeting HTTP
429: ``PacedProvider`` wraps the run's provider and, before each request, waits (``trio.sleep``)
until the last 60 seconds hold fewer than N request starts and fewer than N tokens. A request
counts its prompt's tokens (characters / ``chars_per_token`` of the frozen config) from the
moment it starts, replaced by the prompt, output and thought tokens its attempts reported once
it ends, so N cells in flight cannot all start on an empty window. One lock orders the waiting
requests, so the cells share one pace. The one pre-output retry inside a request is not paced
on its own (it follows a request that produced nothing).

Pacing changes when requests are sent, never what they are or what is recorded: it is written
in the store's ``run.log``, never in the chain, and the records are byte for byte those of an
unpaced run. Times are trio's monotonic clock.
"""

from __future__ import annotations

from collections import deque

import msgspec
import trio

from harness.providers.attempts import Audit
from harness.providers.credentials import KeyScan
from harness.providers.kinds import ProviderName
from harness.providers.protocol import Provider, ProviderRequest, ProviderResult

__all__ = ["WINDOW_S", "PacedProvider", "Pacing", "paced"]

WINDOW_S = 60.0


class Pacing(msgspec.Struct, frozen=True, kw_only=True):
    """The user's quota: requests and tokens per minute (None: no limit)."""

    max_rpm: int | None = None
    max_tpm: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("--max-rpm", self.max_rpm), ("--max-tpm", self.max_tpm)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")

    @property
    def active(self) -> bool:
        """True when either limit is set."""
        return self.max_rpm is not None or self.max_tpm is not None


class PacedProvider:
    """``inner``, with every request started within ``pacing`` (see the module docstring)."""

    def __init__(self, inner: Provider, pacing: Pacing) -> None:
        self._inner = inner
        self._pacing = pacing
        self._starts: deque[float] = deque()
        self._used: deque[list[float]] = deque()  # [start time, tokens]
        self._lock = trio.Lock()
        self.waited_s = 0.0

    @property
    def name(self) -> ProviderName:
        """The wrapped provider's name."""
        return self._inner.name

    def key_scan(self) -> KeyScan | None:
        """The wrapped provider's key matcher (None: it sends no key), so the store still
        refuses any write holding the key when the run is paced."""
        scan = getattr(self._inner, "key_scan", None)
        return scan() if callable(scan) else None

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Wait for the pace, then let the wrapped provider answer ``request``."""
        per_token = request.config.simulated.chars_per_token
        used = await self._wait(sum(len(m.text) for m in request.messages) / per_token)
        result = await self._inner.generate(request, audit)
        used[1] = sum(
            (a.usage.prompt_tokens or 0) + (a.usage.output_tokens or 0)
            + (a.usage.thought_tokens or 0)
            for a in result.attempts
        )  # fmt: skip
        return result

    async def _wait(self, prompt_tokens: float) -> list[float]:
        """Wait for the pace; return this request's entry in the token window."""
        rpm, tpm = self._pacing.max_rpm, self._pacing.max_tpm
        async with self._lock:
            while True:
                now = trio.current_time()
                while self._starts and self._starts[0] <= now - WINDOW_S:
                    self._starts.popleft()
                while self._used and self._used[0][0] <= now - WINDOW_S:
                    self._used.popleft()
                until = now
                if rpm is not None and len(self._starts) >= rpm:
                    until = max(until, self._starts[len(self._starts) - rpm] + WINDOW_S)
                if tpm is not None and self._used and sum(n for _, n in self._used) >= tpm:
                    until = max(until, self._used[0][0] + WINDOW_S)
                if until <= now:
                    break
                self.waited_s += until - now
                await trio.sleep(until - now)
            self._starts.append(now)
            used = [now, prompt_tokens]
            self._used.append(used)
            return used


def paced(provider: Provider, pacing: Pacing) -> Provider:
    """``provider`` paced by ``pacing``; itself when no limit is set."""
    return PacedProvider(provider, pacing) if pacing.active else provider
