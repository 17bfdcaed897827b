"""Seeded, portable random streams: the one home of every deterministic draw in the harness.

Two ways to address draws, one reduction:

- ``Stream`` (the benchmark generator, domain ``bench.stream.v1``): a sequence of 64-bit words
  from BLAKE3 in extendable-output mode, keyed by labels; each draw consumes the next word(s).
- ``KeyedStream`` (the simulated provider, domain ``sim.stream.v1``): each draw is addressed by
  a label and an index and computed as a digest of the key, the label and the index, so draws
  are independent of the order in which they are made (adding a draw never shifts another).

Both reduce a word to ``[0, n)`` with the same rejection sampling (``_below``), so every integer
choice is unbiased. The same labels give the same numbers on every machine and Python version:
only integer arithmetic on BLAKE3 output (no ``random``, no ``hash()``, no wall clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import count
from typing import Any, Final, TypeVar

import blake3

from harness.canonical import DIGEST_PREFIX, Domain, digest

__all__ = ["KeyedStream", "Stream"]

T = TypeVar("T")

_BLOCK: Final = 512
_KEYED_BITS: Final = 53
_HEX_56_BITS: Final = 14  # 14 hex digits = 56 bits; the top 53 make an exact double in [0, 1)


def _below(n: int, bits: int, words: Iterable[int]) -> int:
    """The first of ``words`` (each uniform in ``[0, 2**bits)``) below the largest multiple of
    ``n``, reduced modulo ``n``: a uniform integer in ``[0, n)`` (rejection sampling).

    Raises:
        ValueError: when ``n`` is not in ``[1, 2**bits]``.
    """
    if not 1 <= n <= 1 << bits:
        raise ValueError(f"cannot draw below {n}: the stream draws {bits}-bit words")
    limit = (1 << bits) - ((1 << bits) % n)
    for word in words:
        if word < limit:
            return word % n
    raise ValueError("the stream ran dry")  # unreachable: the word sources are unbounded


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
        return _below(n, 64, iter(self._next_u64, -1))

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


class KeyedStream:
    """Deterministic draws for one key, each addressed by ``(label, index)``."""

    __slots__ = ("_key",)

    def __init__(self, key: dict[str, Any]) -> None:
        self._key = key

    @property
    def key(self) -> dict[str, Any]:
        """The key (a copy)."""
        return dict(self._key)

    def _bits(self, label: str, index: int) -> int:
        hexdigits = digest(Domain.STREAM, {"index": index, "key": self._key, "label": label})
        return int(hexdigits[len(DIGEST_PREFIX) : len(DIGEST_PREFIX) + _HEX_56_BITS], 16) >> 3

    def uniform(self, label: str, index: int = 0) -> float:
        """A float in [0, 1) for ``(label, index)``."""
        return self._bits(label, index) / float(1 << _KEYED_BITS)

    def below(self, label: str, probability: float, index: int = 0) -> bool:
        """True with ``probability`` (exactly False at 0.0, exactly True at 1.0)."""
        return self.uniform(label, index) < probability

    def choice(self, label: str, options: Sequence[T], index: int = 0) -> T:
        """One of ``options``, uniformly.

        The first word is ``(label, index)``'s own, so an accepted draw is the plain ``word %
        len(options)`` it always was; only a word in the biased tail (probability below
        ``len(options) / 2**53``) is rejected, and the next word is ``(label#1, index)``, ...

        Raises:
            ValueError: when ``options`` is empty.
        """
        if not options:
            raise ValueError("choice from an empty sequence")
        words = (self._bits(label if k == 0 else f"{label}#{k}", index) for k in count())
        return options[_below(len(options), _KEYED_BITS, words)]
