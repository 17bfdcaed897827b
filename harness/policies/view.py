"""What a termination policy decides on: the blinded view of an agent at a decision.

The view is the policies' input type and lives with them, so an agent loop outside the benchmark
can build one and ask the ECT gate without importing ``harness.worlds``: it needs only the ECT
model (``harness.ect``) and the trace records of the trusted adapter (``harness.tools.adapter``).
The benchmark's ``Snapshot.view()`` and the V2 loop build it; no policy sees a snapshot id, a
fault, a split or the gold decision.
"""

from __future__ import annotations

from typing import Any

import msgspec

from harness.ect.model import Certificate, Ledger, Requirements, TaskDescriptor
from harness.tools.adapter import CallSpec, ToolCall

__all__ = ["RecoveryState", "SnapshotView"]


class RecoveryState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Whether the agent is stuck repeating a failing call, and what would recover it.

    ``repeated_call`` is the identical request the trace ends with ``repeats`` times, failing
    each time with ``last_error``; ``recovery`` is a different call that obtains the evidence
    the repeated call was after. A clean snapshot repeats nothing and needs no recovery.
    """

    repeated_call: CallSpec | None = None
    repeats: int = 0
    last_error: str | None = None
    recovery: CallSpec | None = None

    @property
    def stagnating(self) -> bool:
        """True when the trace ends with the same failing call issued at least twice."""
        return self.repeated_call is not None and self.repeats >= 2

    @property
    def recovery_available(self) -> bool:
        """True when a call that would supply the missing evidence is known."""
        return self.recovery is not None


class SnapshotView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a blinded termination policy sees: no snapshot id, fault, split or gold."""

    task_id: str
    question: str
    descriptor: TaskDescriptor
    requirements: Requirements
    trace: tuple[ToolCall, ...]
    ledger: Ledger
    certificate: Certificate | None
    answer: dict[str, Any] | None
    message: str
    recovery: RecoveryState
