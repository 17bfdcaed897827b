"""Task types: a candidate's evidence plan, and the admitted task with its trusted contract.

A task is one question about one world. Its plan says, per required answer slot, which closed
transform derives the answer and exactly which scoped values (and the tool call that observes
each) it needs. From the plan come the trusted contract R_t (``Requirements``: the one allowed
transform with its exact parameters, the scope rule, exact evidence cardinality, nullability,
tolerance) and the descriptor. The gold answer comes only from the oracles (``admission``).

This module defines data and derives the contract; it draws nothing and computes no answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest
from harness.ect.model import (
    Requirements,
    Scope,
    ScopeRule,
    SlotRequirement,
    Source,
    TaskDescriptor,
    descriptor_digest,
)
from harness.ect.transforms import Transform
from harness.tools.adapter import CallSpec, value_sources
from harness.worlds.world import PERIODS, Split

__all__ = [
    "FAMILIES",
    "Admission",
    "CallSpec",
    "Candidate",
    "EvidenceItem",
    "Family",
    "SlotPlan",
    "Task",
    "descriptor_for",
    "legitimate_sources",
    "oracle_digest",
    "requirements_for",
    "task_digest",
    "task_id_for",
]

Family = Literal[
    "lookup",
    "aggregation",
    "top_k",
    "temporal_comparison",
    "hierarchy_join",
    "missing_data_abstention",
]
FAMILIES: Final[tuple[Family, ...]] = (
    "lookup",
    "aggregation",
    "top_k",
    "temporal_comparison",
    "hierarchy_join",
    "missing_data_abstention",
)


class _Data(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the benchmark's value types."""


class EvidenceItem(_Data, frozen=True, kw_only=True):
    """One value a slot needs: its exact scope and the tool call that observes it."""

    scope: Scope
    call: CallSpec


class SlotPlan(_Data, frozen=True, kw_only=True):
    """How one required slot is answered: the transform and the exact evidence it replays."""

    slot: str
    transform: Transform
    evidence: tuple[EvidenceItem, ...]
    nullable: bool = False
    abs_tol: float = 0.0
    rel_tol: float = 0.0


class Candidate(_Data, frozen=True, kw_only=True):
    """One drawn parameterisation of a family in a world, before admission."""

    world_id: str
    family: Family
    attempt: int
    params: dict[str, Any]
    question: str
    slots: tuple[SlotPlan, ...]
    discovery: tuple[CallSpec, ...]
    """Calls an agent makes first to learn the ids it needs (their receipts are not cited)."""


class Admission(_Data, frozen=True, kw_only=True):
    """How the task was admitted: the candidate index that both oracles agreed on, and why every
    earlier candidate was turned away."""

    attempt: int
    rejected: tuple[str, ...]


class Task(_Data, frozen=True, kw_only=True):
    """An admitted task: descriptor, trusted contract, oracle answer, and the evidence plan.

    ``gold`` maps each required slot to the answer both oracles computed (canonically equal).
    ``plan`` is the oracle's required evidence per slot (what a supported answer must cite);
    ``discovery`` the lookups that precede it in a clean trace.
    """

    descriptor: TaskDescriptor
    requirements: Requirements
    split: Split
    question: str
    gold: dict[str, Any]
    plan: tuple[SlotPlan, ...]
    discovery: tuple[CallSpec, ...]
    admission: Admission

    @property
    def task_id(self) -> str:
        """The task id (``w03-top_k``)."""
        return self.descriptor.task_id

    @property
    def family(self) -> str:
        """The task family."""
        return self.descriptor.family

    @property
    def world_id(self) -> str:
        """The world the task asks about."""
        return self.descriptor.world_id

    def slot_plan(self, slot: str) -> SlotPlan:
        """The plan of one slot.

        Raises:
            KeyError: when the task has no such slot.
        """
        for plan in self.plan:
            if plan.slot == slot:
                return plan
        raise KeyError(slot)


def task_id_for(world_id: str, family: str) -> str:
    """The id of a world's task of one family: ``w<world>-<family>``."""
    return f"w{world_id}-{family}"


def descriptor_for(candidate: Candidate) -> TaskDescriptor:
    """The frozen descriptor (id, family, world, params, required slots) of a candidate."""
    return TaskDescriptor(
        task_id=task_id_for(candidate.world_id, candidate.family),
        family=candidate.family,
        world_id=candidate.world_id,
        params=candidate.params,
        required_slots=tuple(s.slot for s in candidate.slots),
    )


def _unique(values: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def legitimate_sources(items: Iterable[EvidenceItem]) -> tuple[Source, ...]:
    """The (tool, value path) pairs a slot's cited receipts may come from: every source of the
    catalog that yields one of its planned values (``value_sources``), e.g. the metric lookup
    and the matching series point. The contract's scope rule (so the verifier) and the gold
    judge use this one definition."""
    return _unique(source for i in items for source in value_sources(i.call, PERIODS))


def _rule(items: tuple[EvidenceItem, ...]) -> ScopeRule:
    return ScopeRule(
        entities=_unique(i.scope.entity for i in items),
        attributes=_unique(i.scope.attribute for i in items),
        levels=_unique(i.scope.level for i in items),
        dates=_unique(i.scope.date for i in items),
        sources=legitimate_sources(items),
    )


def requirements_for(descriptor: TaskDescriptor, slots: tuple[SlotPlan, ...]) -> Requirements:
    """The trusted contract R_t: per slot, the exact transform, scope, cardinality, and the
    tools and value paths the cited receipts may come from (``legitimate_sources``).

    Plans are built so that each slot's scope rule (a product of entities, attributes, levels
    and dates) holds exactly the planned scopes, so ``min = max = len(evidence)`` together with
    the verifier's duplicate-scope check pins the cited set to the planned one.
    """
    return Requirements(
        task_id=descriptor.task_id,
        descriptor_digest=descriptor_digest(descriptor),
        slots=tuple(
            SlotRequirement(
                slot=plan.slot,
                transforms=(plan.transform,),
                scope=_rule(plan.evidence),
                min_evidence=len(plan.evidence),
                max_evidence=len(plan.evidence),
                nullable=plan.nullable,
                abs_tol=plan.abs_tol,
                rel_tol=plan.rel_tol,
            )
            for plan in slots
        ),
    )


def task_digest(task: Task) -> str:
    """The pinned digest of a whole task (descriptor, contract, gold, plan, admission)."""
    return digest(Domain.TASK, task)


def oracle_digest(gold: dict[str, Any]) -> str:
    """The pinned digest of an oracle answer."""
    return digest(Domain.ORACLE, gold)
