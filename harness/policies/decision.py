"""What every termination policy returns, the two policy protocols, and provider attempt ids.

A ``PolicyDecision`` is the verdict (complete, continue or stuck), every reason code behind it
(verifier codes and ``PolicyReason`` codes, as wire strings), which kind of rule produced it
(``DecisionSource``: a fixed rule, a critic's deterministic fast path, a model judgement, the
verifier, the controller's recovery rule, or the oracle reference), the ids of the provider
attempts it spent, and feedback text for an agent loop that continues.

Deterministic policies satisfy ``Policy`` (a plain ``decide``); policies that may call a
provider satisfy ``ModelPolicy`` (an ``async decide`` for trio). Both read only a blinded
``SnapshotView``. This module defines types; it decides nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

import msgspec

from harness.canonical import Domain, digest
from harness.ect.model import Verdict
from harness.policies.view import SnapshotView
from harness.providers.attempts import AttemptRecord

__all__ = [
    "DecisionSource",
    "ModelPolicy",
    "Policy",
    "PolicyDecision",
    "attempt_id",
    "view_digest",
]


class DecisionSource(StrEnum):
    """Which kind of rule produced a decision (stable wire strings, counted in reports)."""

    RULE = "rule"
    """A fixed deterministic rule (completion token, self-check, heuristic)."""
    FAST_PATH = "fast_path"
    """A critic's deterministic fast path: reported as a deterministic critic decision, not an
    LLM judgement."""
    MODEL = "model"
    """A model call: its verdict, or its failure mapped to continue."""
    VERIFIER = "verifier"
    """The ECT verifier, with ECT's recovery check."""
    CONTROLLER = "controller"
    """The controller's one-attempt stuck recovery overriding the critic core's stuck."""
    REFERENCE = "reference"
    """The postcondition oracle, which sees gold (non-deployable)."""


class PolicyDecision(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One policy decision.

    Attributes:
        decision: complete, continue or stuck.
        reason_codes: every reason behind it, as wire strings (verifier ``ReasonCode`` values
            first in verifier order, then ``PolicyReason`` values).
        source: which kind of rule decided.
        attempt_ids: ids (``attempt_id``) of the provider attempts spent on this decision.
        feedback: what an agent loop that continues is told (empty when there is nothing to
            say). Never part of a score.
    """

    decision: Verdict
    reason_codes: tuple[str, ...]
    source: DecisionSource
    attempt_ids: tuple[str, ...] = ()
    feedback: str = ""


class Policy(Protocol):
    """A deterministic termination policy."""

    @property
    def name(self) -> str:
        """Stable policy key (recorded with every decision)."""
        ...

    def decide(self, view: SnapshotView) -> PolicyDecision:
        """Decide on one blinded snapshot view."""
        ...


class ModelPolicy(Protocol):
    """A termination policy that may call a provider (run under trio)."""

    @property
    def name(self) -> str:
        """Stable policy key (recorded with every decision)."""
        ...

    async def decide(self, view: SnapshotView) -> PolicyDecision:
        """Decide on one blinded snapshot view; provider failures map to continue."""
        ...


def attempt_id(record: AttemptRecord) -> str:
    """The id of one provider attempt: the digest of its audit record."""
    return digest(Domain.PROVIDER_ATTEMPT, record)


def view_digest(view: SnapshotView) -> str:
    """Digest of a blinded view (names a model call's cell without revealing anything else)."""
    return digest(Domain.POLICY_VIEW, view)
