"""The receipt's path is part of the evidence: contracts name each slot's allowed tools and value
paths, and a cited receipt from elsewhere is out of scope (re-digesting the ledger cannot help)."""

from __future__ import annotations

import msgspec
import pytest

from harness import ect
from harness.benchmark.build import benchmark
from harness.tools.adapter import VALUE_PATHS
from harness.worlds.snapshots import Snapshot

replace = msgspec.structs.replace
CLEAN = [s for s in benchmark().snapshots() if s.fault == "C0"]


def test_every_contract_allows_exactly_its_planned_calls_at_their_value_paths() -> None:
    assert len(CLEAN) == 72
    for task in benchmark().tasks:
        for slot, plan in zip(task.requirements.slots, task.plan, strict=True):
            planned = {
                (item.call.tool_id, VALUE_PATHS[item.call.tool_id]) for item in plan.evidence
            }
            allowed = {(s.tool_id, s.source_path) for s in slot.scope.sources}
            assert allowed == planned, task.task_id


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
    tool = ect.verify(*_rebound(snapshot, tool_id="get_series"))
    assert tool.reason_codes == (ect.ReasonCode.SCOPE_TOOL,)
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
