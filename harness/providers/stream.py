"""A deterministic, labelled random stream derived with BLAKE3 (domain ``sim.stream.v1``).

The simulated provider draws every choice from a ``Stream`` keyed by (seed, cell id, role,
conversation state). Each draw is addressed by a label and an index and computed as a digest of
the key, the label and the index, so draws are independent of the order in which they are made:
adding a new draw to a behaviour never shifts the values of existing ones. Nothing here touches
the global ``random`` state, the clock or the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeVar

from harness.canonical import DIGEST_PREFIX, Domain, digest

__all__ = ["Stream"]

T = TypeVar("T")

_HEX_53_BITS: Final = 14  # 14 hex digits = 56 bits; the top 53 make an exact double in [0, 1)


class Stream:
    """Deterministic draws for one key."""

    __slots__ = ("_key",)

    def __init__(self, key: dict[str, Any]) -> None:
        self._key = key

    @property
    def key(self) -> dict[str, Any]:
        """The key (a copy)."""
        return dict(self._key)

    def _bits(self, label: str, index: int) -> int:
        hexdigits = digest(Domain.STREAM, {"index": index, "key": self._key, "label": label})
        return int(hexdigits[len(DIGEST_PREFIX) : len(DIGEST_PREFIX) + _HEX_53_BITS], 16) >> 3

    def uniform(self, label: str, index: int = 0) -> float:
        """A float in [0, 1) for ``(label, index)``."""
        return self._bits(label, index) / float(1 << 53)

    def below(self, label: str, probability: float, index: int = 0) -> bool:
        """True with ``probability`` (exactly False at 0.0, exactly True at 1.0)."""
        return self.uniform(label, index) < probability

    def choice(self, label: str, options: Sequence[T], index: int = 0) -> T:
        """One of ``options``, uniformly."""
        if not options:
            raise ValueError("choice from an empty sequence")
        return options[self._bits(label, index) % len(options)]
