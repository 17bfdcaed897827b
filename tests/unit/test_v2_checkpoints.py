"""Checkpoints: clean ones are supported, incomplete ones lack evidence a budgeted call supplies."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from harness.ect import Claim, verify
from harness.errors import CheckpointError
from harness.studies.v2.checkpoints import Checkpoint, build_checkpoints, call_number
from harness.studies.v2.judge import judge_proposal, missing_evidence
from harness.studies.v2.schedule import assign_faults
from harness.tools.adapter import build_ledger
from harness.worlds import (
    FAMILIES,
    V2_WORLDS,
    Task,
    build_tasks,
    certificate_for,
    find_support,
    generate_world,
    run_calls,
)

TABLE = assign_faults(V2_WORLDS, FAMILIES)


@cache
def _world(world_id: str) -> tuple[dict[str, Any], tuple[Task, ...]]:
    world = generate_world(world_id)
    return world.to_plain(), tuple(build_tasks(world))


def _task(task_id: str) -> tuple[Task, dict[str, Any]]:
    plain, tasks = _world(task_id[1:3])
    return next(t for t in tasks if t.task_id == task_id), plain


@cache
def _checkpoints(task_id: str) -> tuple[Checkpoint, Checkpoint]:
    task, plain = _task(task_id)
    return build_checkpoints(task, plain, TABLE[task_id], tool_budget=3)


def _certify(task: Task, trace: tuple[Any, ...]) -> tuple[Any, Any]:
    """The certificate a careful agent builds from ``trace``: None when evidence is missing."""
    ledger = build_ledger(task.task_id, trace)
    support = find_support(task, ledger)
    if support is None:
        return ledger, None
    claims = [
        Claim(slot=p.slot, value=task.gold[p.slot], evidence=support[p.slot], transform=p.transform)
        for p in task.plan
    ]
    return ledger, certificate_for(task, ledger, claims)


@pytest.mark.parametrize("task_id", sorted(TABLE))
def test_v2_clean_checkpoint_supports_a_valid_certificate(task_id: str) -> None:
    task, _ = _task(task_id)
    clean, _ = _checkpoints(task_id)
    assert clean.kind == "clean"
    assert clean.missing == ()
    assert clean.draft is None
    ledger, certificate = _certify(task, clean.trace)
    assert certificate is not None
    assert verify(task.descriptor, task.requirements, ledger, certificate)
    assert judge_proposal(task, ledger, dict(task.gold), certificate).supported


@pytest.mark.parametrize("task_id", sorted(TABLE))
def test_v2_incomplete_checkpoint_is_recoverable_within_the_tool_budget(task_id: str) -> None:
    task, plain = _task(task_id)
    _, incomplete = _checkpoints(task_id)
    assert incomplete.kind == "incomplete"
    assert incomplete.fault == TABLE[task_id]
    assert len(incomplete.missing) >= 1
    assert 1 <= len(incomplete.recovery) <= 3
    ledger, certificate = _certify(task, incomplete.trace)
    assert certificate is None  # no valid certificate can be built yet
    assert missing_evidence(task, ledger) == (incomplete.missing, incomplete.recovery)
    recovered = (
        *incomplete.trace,
        *run_calls(plain, incomplete.recovery, first=incomplete.first_new_call),
    )
    ledger, certificate = _certify(task, recovered)
    assert certificate is not None
    assert verify(task.descriptor, task.requirements, ledger, certificate)
    assert judge_proposal(task, ledger, dict(task.gold), certificate).supported


@pytest.mark.parametrize("task_id", sorted(TABLE))
def test_v2_incomplete_draft_is_never_a_supported_completion(task_id: str) -> None:
    task, _ = _task(task_id)
    _, incomplete = _checkpoints(task_id)
    draft = incomplete.draft
    assert draft is not None
    if incomplete.fault == "F8":
        assert draft.claims is None  # a stagnating agent has not answered
        assert "failed again" in draft.message
        return
    assert draft.claims is not None
    ledger = build_ledger(task.task_id, incomplete.trace)
    rebound = certificate_for(task, ledger, draft.claims)
    assert not verify(task.descriptor, task.requirements, ledger, rebound)
    assert not judge_proposal(task, ledger, draft.answer, rebound).supported


@pytest.mark.parametrize("task_id", sorted(TABLE))
def test_v2_new_calls_never_reuse_an_id_a_draft_can_cite(task_id: str) -> None:
    _, incomplete = _checkpoints(task_id)
    cited = [
        rid
        for claim in (incomplete.draft.claims or () if incomplete.draft else ())
        for rid in claim.evidence
    ]
    highest = max(
        call_number(x.split(".")[0]) for x in [c.call_id for c in incomplete.trace] + cited
    )
    assert incomplete.first_new_call > highest


def test_v2_fault_that_does_not_apply_is_refused() -> None:
    task, plain = _task("w10-aggregation")  # U1 needs a parameterised transform
    with pytest.raises(CheckpointError, match=r"^fault U1 cannot be assigned to w10-aggregation"):
        build_checkpoints(task, plain, "U1", tool_budget=3)


def test_v2_checkpoint_needing_more_calls_than_the_budget_is_refused() -> None:
    task, plain = _task("w10-lookup")
    with pytest.raises(CheckpointError, match=r"is not recoverably incomplete"):
        build_checkpoints(task, plain, TABLE["w10-lookup"], tool_budget=0)
