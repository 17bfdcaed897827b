"""Fault operators change only what they claim to, and never the descriptor, contract or gold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.benchmark.build import Benchmark, benchmark
from harness.canonical import canonical_bytes
from harness.ect.transforms import Item, replay
from harness.errors import FaultNotApplicableError
from harness.faults import ALL_FAULTS, FAULTS, STATIC_FAULTS, apply_fault, fault_applies
from harness.tools.adapter import ToolCall, receipts_for_call
from harness.tools.catalog import call_tool
from harness.worlds import Snapshot, Task, clean_snapshot, task_digest
from harness.worlds.snapshots import DONE_LINE, SELF_CHECK_LINE


def _pairs(bench: Benchmark) -> Iterator[tuple[Task, Snapshot, Snapshot]]:
    clean: dict[str, Snapshot] = {}
    for snapshot in bench.snapshots():
        if snapshot.fault == "C0":
            clean[snapshot.task_id] = snapshot
        else:
            yield bench.task(snapshot.task_id), clean[snapshot.task_id], snapshot


def _receipt(snapshot: Snapshot, receipt_id: str) -> Any:
    return next(r for r in snapshot.ledger.receipts if r.receipt_id == receipt_id)


def test_grid_shape_and_gold_decisions() -> None:
    bench = benchmark()
    assert len(bench.static) == 432
    assert sum(s.fault == "C0" for s in bench.static) == 48
    held_out = [s for s in bench.static if s.split == "heldout"]
    assert len(held_out) == 324
    assert sum(s.fault != "C0" for s in held_out) == 288
    for snapshot in bench.snapshots():
        decision = "complete" if snapshot.fault in ("C0", "T1") else "continue"
        assert snapshot.gold_decision == decision
        assert snapshot.snapshot_id == f"{snapshot.task_id}.{snapshot.fault}"
    for task in bench.tasks_in("v2"):
        faults = {s.fault for s in bench.v2 if s.task_id == task.task_id}
        expected = set(ALL_FAULTS) | {"C0"}
        if task.family in ("aggregation", "missing_data_abstention"):
            expected.discard("U1")  # no parameterised transform to drift
        assert faults == expected, task.task_id


def test_every_fault_keeps_descriptor_contract_question_and_gold() -> None:
    bench = benchmark()
    for task, clean, faulted in _pairs(bench):
        for field in ("descriptor", "requirements", "question", "task_id", "split"):
            assert canonical_bytes(getattr(faulted, field)) == canonical_bytes(
                getattr(clean, field)
            )
        assert canonical_bytes(faulted.descriptor) == canonical_bytes(task.descriptor)
    # Re-applying every operator leaves each task (and its gold) byte-identical.
    for task in bench.tasks:
        before = task_digest(task)
        world = bench.plain_world(task.world_id)
        clean = clean_snapshot(task, world)
        for fault in ALL_FAULTS:
            if fault_applies(fault, clean, task, world):
                apply_fault(fault, clean, task, world)
        assert task_digest(task) == before


def test_faults_change_only_the_parts_they_declare() -> None:
    for _task, clean, faulted in _pairs(benchmark()):
        spec = FAULTS[faulted.fault]
        if "receipts" not in spec.changes:
            assert faulted.trace == clean.trace
            assert faulted.ledger == clean.ledger
        if "recovery" not in spec.changes:
            assert faulted.recovery == clean.recovery
        if "certificate" not in spec.changes:
            assert faulted.certificate is not None
            assert clean.certificate is not None
            assert faulted.certificate.claims == clean.certificate.claims
            assert faulted.answer == clean.answer
            assert faulted.message == clean.message


def test_answer_effects_match_the_fault_table() -> None:
    bench = benchmark()
    for task, _clean, faulted in _pairs(bench):
        effect = FAULTS[faulted.fault].answer
        if effect == "kept":
            assert faulted.answer == task.gold, faulted.snapshot_id
        elif effect == "none":
            assert faulted.answer is None
        elif effect == "removed":
            assert faulted.answer == {}
        elif effect == "slot_dropped":
            assert faulted.answer is not None
            assert set(faulted.answer) == set(task.gold) - {task.descriptor.required_slots[-1]}
        elif effect == "altered":
            assert faulted.answer != task.gold
        else:
            assert effect == "recomputed"
    # held-out: four of the eight static faults keep a gold answer while unsupported
    kept = [
        s
        for s in bench.static
        if s.split == "heldout" and s.fault != "C0" and s.answer == bench.task(s.task_id).gold
    ]
    assert len(kept) == 144
    assert {s.fault for s in kept} == {"F2", "F3", "F4", "F7"}


def test_clean_snapshot_is_a_naive_complete_agent() -> None:
    for snapshot in benchmark().snapshots():
        if snapshot.fault == "F8":
            assert DONE_LINE not in snapshot.message
            assert "APPROVED" not in snapshot.message
        else:
            assert snapshot.message.splitlines()[-2:] == [DONE_LINE, SELF_CHECK_LINE]
        if snapshot.fault == "C0":
            assert snapshot.certificate is not None
            assert snapshot.recovery.repeated_call is None
            assert not snapshot.recovery.stagnating


def test_f1_to_f7_operators_do_what_they_say() -> None:
    for task, clean, faulted in _pairs(benchmark()):
        assert clean.certificate is not None
        fault = faulted.fault
        if fault == "F1":
            assert faulted.certificate is not None
            assert faulted.certificate.claims == ()
            assert "Answer:" not in faulted.message
        elif fault in ("F2", "F3", "F4"):
            changed = [(a, b) for a, b in zip(clean.trace, faulted.trace, strict=True) if a != b]
            assert len(changed) == 1
            before, after = changed[0]
            assert before.call_id == after.call_id
            rid = f"{after.call_id}.0"
            new, old = _receipt(faulted, rid), _receipt(clean, rid)
            cited = any(rid in c.evidence for c in faulted.certificate.claims)  # type: ignore[union-attr]
            assert cited
            rules = task.requirements.slots
            if fault == "F2":
                assert new.scope.entity != old.scope.entity
                assert all(new.scope.entity not in r.scope.entities for r in rules)
            elif fault == "F3":
                assert after.response["status"] == "ok"
                assert after.response["body"]["status"] == "error"
                assert (new.exec_status, new.validation) == ("error", "validated")
                assert new.scope == old.scope
            else:
                assert new.scope.date != old.scope.date
                assert all(new.scope.date not in r.scope.dates for r in rules)
        elif fault == "F5":
            assert faulted.certificate is not None
            assert len(faulted.certificate.claims) == len(clean.certificate.claims) - 1
        elif fault == "F6":
            assert faulted.certificate is not None
            diffs = [
                (a, b)
                for a, b in zip(clean.certificate.claims, faulted.certificate.claims, strict=True)
                if a != b
            ]
            assert len(diffs) == 1
            assert diffs[0][0].value != diffs[0][1].value
            assert diffs[0][0].evidence == diffs[0][1].evidence
        elif fault == "F7":
            assert faulted.certificate is not None
            ids = {r.receipt_id for r in faulted.ledger.receipts}
            citations = {e for c in faulted.certificate.claims for e in c.evidence}
            assert len(citations - ids) == 1


def test_only_f8_repeats_a_call_in_the_static_grid() -> None:
    for snapshot in benchmark().static:
        requests = [(c.tool_id, canonical_bytes(c.args)) for c in snapshot.trace]
        repeated = len(set(requests)) < len(requests)
        assert repeated == (snapshot.fault == "F8"), snapshot.snapshot_id


def test_f8_repeats_a_failing_call_and_a_recovery_exists() -> None:
    bench = benchmark()
    for snapshot in (s for s in bench.snapshots() if s.fault == "F8"):
        task = bench.task(snapshot.task_id)
        recovery = snapshot.recovery
        assert snapshot.certificate is None
        assert snapshot.answer is None
        assert recovery.stagnating
        assert recovery.recovery_available
        last, before = snapshot.trace[-1], snapshot.trace[-2]
        assert (last.tool_id, last.args) == (before.tool_id, before.args)
        assert recovery.repeated_call is not None
        assert recovery.repeated_call.args == last.args
        assert last.response == before.response
        assert last.response["status"] == "ok"
        assert last.response["body"]["error"]["code"] == recovery.last_error == "INVALID_PERIOD"
        assert [c.call_id for c in snapshot.trace] == [
            f"c{i:02d}" for i in range(1, len(snapshot.trace) + 1)
        ]
        # Running the recovery call yields a usable receipt for exactly the missing scope.
        assert recovery.recovery is not None
        world = bench.plain_world(task.world_id)
        response = call_tool(world, recovery.recovery.tool_id, recovery.recovery.args)
        (receipt,) = receipts_for_call(
            task.task_id,
            ToolCall(
                call_id="c99",
                tool_id=recovery.recovery.tool_id,
                args=recovery.recovery.args,
                response=response,
            ),
        )
        assert (receipt.exec_status, receipt.validation) == ("ok", "validated")
        have = {r.scope for r in snapshot.ledger.receipts if r.exec_status == "ok"}
        assert receipt.scope not in have
        needed = {i.scope for p in task.plan for i in p.evidence}
        assert receipt.scope in needed


def _replays(snapshot: Snapshot, claim: Any) -> Any:
    by_id = {r.receipt_id: r for r in snapshot.ledger.receipts}
    items = [
        Item(
            by_id[e].value,
            by_id[e].scope.entity,
            by_id[e].scope.attribute,
            by_id[e].scope.level,
            by_id[e].scope.date,
        )
        for e in claim.evidence
    ]
    return replay(claim.transform, items)


def test_unseen_faults_are_internally_consistent_contract_violations() -> None:
    for task, clean, faulted in _pairs(benchmark()):
        if faulted.fault not in ("U1", "U2", "U3"):
            continue
        assert faulted.certificate is not None
        assert clean.certificate is not None
        diffs = [
            (a, b, slot)
            for a, b, slot in zip(
                clean.certificate.claims,
                faulted.certificate.claims,
                task.requirements.slots,
                strict=True,
            )
            if a != b
        ]
        assert len(diffs) == 1
        before, after, slot = diffs[0]
        assert _replays(faulted, after) == after.value  # the value is recomputed, not stale
        if faulted.fault == "U1":
            assert type(after.transform) is type(before.transform)
            assert after.transform not in slot.transforms
        elif faulted.fault == "U2":
            assert len(after.evidence) == len(before.evidence) - 1
        else:
            dates = [_receipt(faulted, e).scope.date for e in after.evidence]
            assert sum(d not in slot.scope.dates for d in dates) == 1
            assert len(after.evidence) == len(before.evidence)


def test_t1_adds_a_conflicting_validated_receipt_for_a_cited_scope() -> None:
    for _task, clean, faulted in _pairs(benchmark()):
        if faulted.fault != "T1":
            continue
        assert faulted.trace[:-1] == clean.trace
        revision = faulted.ledger.receipts[-1]
        twins = [r for r in faulted.ledger.receipts[:-1] if r.scope == revision.scope]
        assert len(twins) == 1
        original = twins[0]
        assert original.value != revision.value
        for receipt in (original, revision):
            assert (receipt.exec_status, receipt.validation) == ("ok", "validated")
        assert faulted.certificate is not None
        assert any(original.receipt_id in c.evidence for c in faulted.certificate.claims)


def test_operators_refuse_a_non_clean_snapshot_and_inapplicable_tasks() -> None:
    bench = benchmark()
    task = bench.task("w02-aggregation")
    world = bench.plain_world("02")
    f5 = bench.snapshot("w02-aggregation.F5")
    with pytest.raises(FaultNotApplicableError, match=r"is not the clean snapshot"):
        apply_fault("F2", f5, task, world)
    clean = bench.snapshot("w02-aggregation.C0")
    with pytest.raises(FaultNotApplicableError, match=r"no parameterised transform"):
        apply_fault("U1", clean, task, world)
    assert all(fault_applies(f, clean, task, world) for f in STATIC_FAULTS)


def test_operators_are_deterministic() -> None:
    bench = benchmark()
    task = bench.task("w05-hierarchy_join")
    world = bench.plain_world("05")
    clean = clean_snapshot(task, world)
    for fault in ALL_FAULTS:
        once = apply_fault(fault, clean, task, world)
        assert canonical_bytes(once) == canonical_bytes(apply_fault(fault, clean, task, world))
