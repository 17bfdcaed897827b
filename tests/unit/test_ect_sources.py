"""The receipt's path is part of the evidence: contracts name each slot's allowed tools and value
paths, and a cited receipt from elsewhere is out of scope (re-digesting the ledger cannot help).
The legitimate sources have one definition (``legitimate_sources``), shared by the contract and
the gold judge: the metric lookup and every series point that yields the same value."""

from __future__ import annotations

import msgspec
import pytest

from harness import ect
from harness.benchmark.build import benchmark
from harness.studies.v2.judge import judge_proposal
from harness.tools.adapter import (
    VALUE_PATHS,
    ToolCall,
    receipts_for_call,
    series_point_path,
)
from harness.tools.catalog import call_tool
from harness.worlds.snapshots import Snapshot
from harness.worlds.tasks import Task
from harness.worlds.world import PERIODS, generate_world

replace = msgspec.structs.replace
CLEAN = [s for s in benchmark().snapshots() if s.fault == "C0"]


def _expected_sources(plan_items: object) -> set[tuple[str, str]]:
    """Written out independently of ``value_sources``: the planned call's own path, and for a
    metric lookup every series point index a range ending on or after its period can put it."""
    out = set()
    for item in plan_items:  # type: ignore[attr-defined]
        tool = item.call.tool_id
        out.add((tool, VALUE_PATHS[tool]))
        if tool == "get_metric":
            for index in range(PERIODS.index(item.call.args["period"]) + 1):
                out.add(("get_series", f"/body/points/{index}/value"))
    return out


def test_every_contract_allows_every_source_of_its_planned_values() -> None:
    assert len(CLEAN) == 72
    for task in benchmark().tasks:
        for slot, plan in zip(task.requirements.slots, task.plan, strict=True):
            allowed = {(s.tool_id, s.source_path) for s in slot.scope.sources}
            assert allowed == _expected_sources(plan.evidence), task.task_id


TASKS = {task.task_id: task for task in benchmark().tasks}


def _series_instead(
    snapshot: Snapshot, start_back: int, end_ahead: int
) -> tuple[Inputs, dict[str, object]] | None:
    """The clean snapshot with its first cited ``get_metric`` receipt replaced, in every claim
    citing it, by the matching point of a real ``get_series`` call (range ``start_back``
    periods before to ``end_ahead`` after), recorded by the trusted adapter."""
    cert = snapshot.certificate
    assert cert is not None
    by_id = {r.receipt_id: r for r in snapshot.ledger.receipts}
    cited = [rid for claim in cert.claims for rid in claim.evidence]
    lookups = [rid for rid in cited if by_id[rid].tool_id == "get_metric"]
    if not lookups:
        return None
    old = by_id[lookups[0]]
    assert old.scope.date is not None
    at = PERIODS.index(old.scope.date)
    start, end = max(0, at - start_back), min(len(PERIODS) - 1, at + end_ahead)
    args = {
        "entity": old.scope.entity,
        "metric": old.scope.attribute,
        "start": PERIODS[start],
        "end": PERIODS[end],
    }
    world = generate_world(snapshot.descriptor.world_id).to_plain()
    call = ToolCall(
        call_id="series-1",
        tool_id="get_series",
        args=args,
        response=call_tool(world, "get_series", args),
    )
    points = receipts_for_call(snapshot.task_id, call)
    point = points[at - start]
    assert point.source_path == series_point_path(at - start)
    assert point.scope == old.scope
    receipts = (*snapshot.ledger.receipts, *points)
    claims = tuple(
        replace(
            c,
            evidence=tuple(
                point.receipt_id if rid == old.receipt_id else rid for rid in c.evidence
            ),
        )
        for c in cert.claims
    )
    inputs = (
        snapshot.descriptor,
        snapshot.requirements,
        replace(snapshot.ledger, receipts=receipts),
        replace(cert, claims=claims, ledger_digest=ect.ledger_digest(receipts)),
    )
    answer = (
        dict(snapshot.answer)
        if snapshot.answer is not None
        else {c.slot: c.value for c in cert.claims}
    )
    return inputs, answer


@pytest.mark.parametrize("snapshot", CLEAN, ids=[s.task_id for s in CLEAN])
def test_the_series_point_is_supported_by_both_judges(snapshot: Snapshot) -> None:
    task: Task = TASKS[snapshot.task_id]
    for start_back, end_ahead in ((0, 0), (3, 2), (7, 7)):
        case = _series_instead(snapshot, start_back, end_ahead)
        assert case is not None, "every task cites a metric lookup"
        inputs, answer = case
        decision = ect.verify(*inputs, answer=answer)
        assert decision, decision.reason_codes
        judged = judge_proposal(task, inputs[2], answer, inputs[3])
        assert judged.supported, judged.problems
        # The same point relabelled to a path no series can put it at, or to another tool:
        # refused by both, for its source.
        ledger, cert = inputs[2], inputs[3]
        rid = next(
            r.receipt_id
            for r in ledger.receipts
            if r.call_id == "series-1"
            and r.receipt_id in {e for c in cert.claims for e in c.evidence}
        )
        for change, code in (
            ({"source_path": series_point_path(len(PERIODS))}, ect.ReasonCode.SCOPE_SOURCE_PATH),
            ({"tool_id": "describe_world"}, ect.ReasonCode.SCOPE_TOOL),
        ):
            receipts = tuple(
                replace(r, **change) if r.receipt_id == rid else r for r in ledger.receipts
            )
            bad = (
                inputs[0],
                inputs[1],
                replace(ledger, receipts=receipts),
                replace(cert, ledger_digest=ect.ledger_digest(receipts)),
            )
            refused = ect.verify(*bad, answer=answer)
            assert refused.reason_codes == (code,)
            assert not judge_proposal(task, bad[2], answer, bad[3]).supported


Inputs = tuple[ect.TaskDescriptor, ect.Requirements, ect.Ledger, ect.Certificate]


def _rebound(snapshot: Snapshot, **changes: object) -> Inputs:
    """The clean snapshot with its first cited receipt changed and the ledger re-digested (the
    certificate copies the new digest, so binding passes)."""
    cert = snapshot.certificate
    assert cert is not None
    ledger = snapshot.ledger
    cited = cert.claims[0].evidence[0]
    receipts = tuple(replace(r, **changes) if r.receipt_id == cited else r for r in ledger.receipts)
    return (
        snapshot.descriptor,
        snapshot.requirements,
        replace(ledger, receipts=receipts),
        replace(cert, ledger_digest=ect.ledger_digest(receipts)),
    )


@pytest.mark.parametrize("snapshot", CLEAN, ids=[s.task_id for s in CLEAN])
def test_a_nonsense_path_or_another_tool_is_refused_on_every_task(snapshot: Snapshot) -> None:
    assert ect.verify(*_rebound(snapshot))
    path = ect.verify(*_rebound(snapshot, source_path="/body/nonsense"))
    assert path.reason_codes == (ect.ReasonCode.SCOPE_SOURCE_PATH,)
    tool = ect.verify(*_rebound(snapshot, tool_id="describe_world"))
    assert tool.reason_codes == (ect.ReasonCode.SCOPE_TOOL,)
    # A series at the lookup's path is not a place a series puts a value (where the slot takes
    # series points at all; elsewhere the series is not a source of the slot).
    cert = snapshot.certificate
    assert cert is not None
    slot = next(s for s in snapshot.requirements.slots if s.slot == cert.claims[0].slot)
    takes_series = any(source.tool_id == "get_series" for source in slot.scope.sources)
    series = ect.verify(*_rebound(snapshot, tool_id="get_series"))
    assert series.reason_codes == (
        (ect.ReasonCode.SCOPE_SOURCE_PATH,) if takes_series else (ect.ReasonCode.SCOPE_TOOL,)
    )
    # The task/scope ablation switches the source check off with the rest of SCOPE.
    assert ect.verify(*_rebound(snapshot, source_path="/body/nonsense"), disabled={ect.Check.SCOPE})


def test_a_contract_without_sources_is_refused_at_decode() -> None:
    plain = msgspec.to_builtins(CLEAN[0].requirements)
    del plain["slots"][0]["scope"]["sources"]
    decision = ect.verify_json(
        msgspec.json.encode(CLEAN[0].descriptor),
        msgspec.json.encode(plain),
        msgspec.json.encode(CLEAN[0].ledger),
        msgspec.json.encode(CLEAN[0].certificate),
    )
    assert decision.reason_codes == (ect.ReasonCode.ADAPTER_REQUIREMENTS_MALFORMED,)
