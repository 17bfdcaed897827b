"""A seeded, portable integer stream: BLAKE3 in extendable-output mode, keyed by labels.

The same labels give the same numbers on every machine and Python version: the stream uses only
integer arithmetic on BLAKE3 output (no ``random``, no ``hash()``, no floats). Draws are
unbiased (rejection sampling).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar

import blake3

from harness.canonical import Domain

__all__ = ["Stream"]

T = TypeVar("T")

_BLOCK: Final = 512


class Stream:
    """Deterministic draws for one purpose, named by ``labels`` (e.g. ``("world", "03")``)."""

    def __init__(self, *labels: str) -> None:
        hasher = blake3.blake3(Domain.BENCH_STREAM.value.encode("ascii") + b"\x00")
        for label in labels:
            encoded = label.encode("utf-8")
            hasher.update(len(encoded).to_bytes(4, "big") + encoded)
        self._xof = blake3.blake3(key=hasher.digest())
        self._offset = 0
        self._buffer = b""

    def _next_u64(self) -> int:
        if len(self._buffer) < 8:
            self._buffer = self._xof.digest(length=_BLOCK, seek=self._offset)
            self._offset += _BLOCK
        word, self._buffer = self._buffer[:8], self._buffer[8:]
        return int.from_bytes(word, "big")

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``.

        Raises:
            ValueError: when ``n`` is not in ``[1, 2**64]``.
        """
        if not 1 <= n <= 1 << 64:
            raise ValueError(f"cannot draw below {n}: the stream draws 64-bit words")
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            word = self._next_u64()
            if word < limit:
                return word % n

    def between(self, low: int, high: int) -> int:
        """A uniform integer in ``[low, high]`` (both inclusive)."""
        return low + self.below(high - low + 1)

    def choice(self, items: Sequence[T]) -> T:
        """One uniformly chosen item."""
        return items[self.below(len(items))]

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """``k`` distinct items in draw order (a partial Fisher-Yates shuffle)."""
        pool = list(items)
        if not 0 <= k <= len(pool):
            raise ValueError(f"cannot sample {k} of {len(pool)}")
        for index in range(k):
            pick = index + self.below(len(pool) - index)
            pool[index], pool[pick] = pool[pick], pool[index]
        return pool[:k]
