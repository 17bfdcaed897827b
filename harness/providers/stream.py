"""The simulated provider's random stream: ``harness.streams.KeyedStream`` (``sim.stream.v1``).

The simulated provider draws every choice from a stream keyed by (seed, cell id, role,
conversation state); each draw is addressed by a label and an index, so adding a draw never
shifts another. The one implementation of seeded draws is ``harness.streams``.
"""

from __future__ import annotations

from harness.streams import KeyedStream as Stream

__all__ = ["Stream"]
