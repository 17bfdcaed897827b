"""Blinding and the critic core's fast-path invariant, over the whole static grid.

No split, fault or gold may reach a deployable policy or a prompt: relabelling every snapshot
(other fault, other split, flipped gold, other id) and planting a different gold answer must
leave every deployable decision and every provider request byte-identical. Only the
postcondition oracle, the labelled non-deployable reference, sees gold.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from harness.benchmark.build import benchmark
from harness.canonical import canonical_bytes
from harness.errors import FastPathInvariantError
from harness.faults import STATIC_FAULTS
from harness.policies import CriticCore, DecisionSource, fast_path
from harness.providers import (
    Audit,
    ProviderName,
    ProviderRequest,
    ProviderResult,
    SimulatedProvider,
    default_generation_config,
    memory_audit,
)
from harness.studies.static.run import DecisionRecord, decide_all, study_policies
from harness.worlds import Snapshot, SnapshotView

CONFIG = default_generation_config()


class Recording:
    """The simulated provider, keeping every request it answered."""

    def __init__(self) -> None:
        self.inner = SimulatedProvider()
        self.requests: list[ProviderRequest] = []

    @property
    def name(self) -> ProviderName:
        return ProviderName.SIMULATED

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        self.requests.append(request)
        return await self.inner.generate(request, audit)


class Refusing:
    """A provider that must never be called."""

    @property
    def name(self) -> ProviderName:
        return ProviderName.SIMULATED

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        raise AssertionError(f"provider called for {request.cell_id}")


def _relabel(snapshot: Snapshot) -> Snapshot:
    """Every scoring label changed; the agent's state untouched."""
    order = ("C0", *STATIC_FAULTS)
    fault = order[(order.index(snapshot.fault) + 4) % len(order)]
    return msgspec.structs.replace(
        snapshot,
        snapshot_id=f"{snapshot.task_id}.{fault}",
        fault=fault,
        split="dev" if snapshot.split == "heldout" else "heldout",
        gold_decision="continue" if snapshot.gold_decision == "complete" else "complete",
    )


def _run(
    snapshots: tuple[Snapshot, ...], gold: dict[str, Any]
) -> tuple[list[DecisionRecord], list[ProviderRequest]]:
    provider = Recording()
    policies = study_policies(provider, memory_audit()[0], CONFIG, gold)
    records: list[DecisionRecord] = []
    trio.run(lambda: decide_all(snapshots, policies, emit=records.append))
    return records, provider.requests


def _decisions(records: list[DecisionRecord]) -> list[tuple[Any, ...]]:
    return [(r.policy, r.decision, r.reason_codes, r.source, r.attempt_ids) for r in records]


def test_snapshot_view_has_no_field_for_labels() -> None:
    names = {f.name for f in msgspec.structs.fields(SnapshotView)}
    assert not {n for n in names if any(w in n for w in ("split", "fault", "gold", "oracle"))}
    assert "snapshot_id" not in names
    assert set(msgspec.structs.asdict(benchmark().static[0].view())) == names


def test_labels_and_gold_never_reach_a_deployable_policy_or_a_prompt() -> None:
    bench = benchmark()
    snapshots = bench.static
    gold = {t.task_id: t.gold for t in bench.tasks}
    planted = {task: dict.fromkeys(answer, "PLANTED-GOLD") for task, answer in gold.items()}
    records, requests = _run(snapshots, gold)
    relabelled, relabelled_requests = _run(tuple(_relabel(s) for s in snapshots), planted)

    def deployable(rs: list[DecisionRecord]) -> list[tuple[Any, ...]]:
        return [d for d in _decisions(rs) if d[0] != "postcondition_oracle"]

    assert deployable(records) == deployable(relabelled)
    # The oracle is the one policy that sees gold: planted gold changes its decisions.
    oracle = [d for d in _decisions(records) if d[0] == "postcondition_oracle"]
    oracle_planted = [d for d in _decisions(relabelled) if d[0] == "postcondition_oracle"]
    assert oracle != oracle_planted
    assert all(d[3] is DecisionSource.REFERENCE for d in oracle)

    assert len(requests) == len(snapshots)  # the full-trace critic, once per snapshot
    assert [canonical_bytes(r) for r in requests] == [
        canonical_bytes(r) for r in relabelled_requests
    ]
    ids = {s.snapshot_id for s in snapshots}
    for request in requests:
        text = "\n".join(m.text for m in request.messages)
        assert "heldout" not in text
        assert "PLANTED-GOLD" not in text
        assert not any(i in text or i in request.cell_id for i in ids)


def test_critic_core_fast_paths_decide_every_static_snapshot_without_a_provider() -> None:
    snapshots = benchmark().static
    assert len(snapshots) == 432
    core = CriticCore(Refusing(), memory_audit()[0], CONFIG, seed=1)

    async def run() -> list[DecisionSource]:
        return [(await core.decide(s.view())).source for s in snapshots]

    assert all(fast_path(s.view()) is not None for s in snapshots)
    assert set(trio.run(run)) == {DecisionSource.FAST_PATH}


def test_runner_stops_when_the_critic_core_needs_its_model() -> None:
    clean = benchmark().static[0]
    undecided = msgspec.structs.replace(clean, message="I have an answer.")
    assert fast_path(undecided.view()) is None
    policies = study_policies(SimulatedProvider(), memory_audit()[0], CONFIG, {})
    records: list[DecisionRecord] = []
    core_only = [p for p in policies if p.name == "critic_core"]
    with pytest.raises(FastPathInvariantError, match=r"needed its model on w00-lookup\.C0"):
        trio.run(lambda: decide_all((clean, undecided), core_only, emit=records.append))
    assert [r.snapshot_id for r in records] == ["w00-lookup.C0"]
