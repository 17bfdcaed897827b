"""The four V2 termination pipelines, built fresh for every cell from ``harness.policies``.

================  ==============================================================  ==========
arm               policy objects (one set per cell)                               provider
================  ==============================================================  ==========
critic            ``CriticCore`` (fast paths, then ``critic.v1`` at the cell seed)  yes
controller        ``Controller`` wrapping a fresh ``CriticCore``                  yes
full_trace        ``FullTraceCritic`` (``full_trace_critic.v1``, seed 2705)       yes
ect               ``EctPolicy`` (verifier + recovery check)                       no
================  ==============================================================  ==========

This layer only adapts: every arm is awaited the same way and judges a blinded
``SnapshotView`` of the planner's proposal. The loop consults it on ``complete`` and ``stuck``
proposals; tool calls need no termination decision. Critic model calls carry the cell's id and
are journaled in the cell's audit. Nothing is shared between cells: a controller's one recovery
attempt, in particular, is per cell.
"""

from __future__ import annotations

from typing import Protocol

from harness.policies import Controller, CriticCore, EctPolicy, FullTraceCritic, PolicyDecision
from harness.providers.attempts import Audit
from harness.providers.config import GenerationConfig
from harness.providers.protocol import Provider
from harness.studies.v2.outcomes import PolicyArm
from harness.worlds.snapshots import SnapshotView

__all__ = ["Pipeline", "make_pipeline"]


class _Decides(Protocol):
    @property
    def name(self) -> str: ...

    async def decide(self, view: SnapshotView) -> PolicyDecision: ...


class Pipeline:
    """One cell's termination policy, awaited uniformly."""

    def __init__(self, arm: PolicyArm, policy: _Decides | EctPolicy) -> None:
        self._arm = arm
        self._policy = policy

    @property
    def arm(self) -> PolicyArm:
        """Which of the four pipelines this is."""
        return self._arm

    @property
    def policy_name(self) -> str:
        """The underlying policy's stable name."""
        return self._policy.name

    async def decide(self, view: SnapshotView) -> PolicyDecision:
        """The policy's decision on one proposal (ECT's verifier runs synchronously)."""
        if isinstance(self._policy, EctPolicy):
            return self._policy.decide(view)
        return await self._policy.decide(view)


def make_pipeline(
    arm: PolicyArm,
    *,
    provider: Provider,
    audit: Audit,
    config: GenerationConfig,
    seed: int,
    cell_id: str,
) -> Pipeline:
    """Fresh policy objects for one cell of ``arm``."""
    if arm == "critic":
        return Pipeline(arm, CriticCore(provider, audit, config, seed=seed, cell_id=cell_id))
    if arm == "controller":
        core = CriticCore(provider, audit, config, seed=seed, cell_id=cell_id)
        return Pipeline(arm, Controller(core))
    if arm == "full_trace":
        return Pipeline(arm, FullTraceCritic(provider, audit, config, cell_id=cell_id))
    return Pipeline(arm, EctPolicy())
