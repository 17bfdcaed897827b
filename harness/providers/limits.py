"""The frozen bounds on what a reply may put in memory and in the store.

A reply (a provider's HTTP body, counted both as it arrives and once decompressed; a planner
plug-in's encoded answer) above ``MAX_REPLY_BYTES`` is never read further: the attempt fails as
``response_too_large`` and keeps only its first ``KEPT_PREFIX_BYTES``. The bound is well under
the store's blob bound (64 MiB, which every reader enforces), so no reply can become a blob the
store would refuse, and a reply's memory is bounded whatever the endpoint sends (an endless body,
a gzip bomb). A Gemini or chat-completions reply of the study's output budgets is tens of KiB.
This module performs no I/O.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KEPT_PREFIX_BYTES", "MAX_REPLY_BYTES"]

MAX_REPLY_BYTES: Final = 8 << 20
"""The largest reply body (on the wire, and decoded) an attempt reads: 8 MiB."""

KEPT_PREFIX_BYTES: Final = 64 << 10
"""How much of a reply over the bound is kept (stored as the attempt's partial body): 64 KiB."""
