"""The V2 loop end to end on the real sandbox and store: a reduced schedule, independence, blinding.

Every tool call of these runs is a fresh sandboxed child; every cell is committed with fsync to a
real store on tmp_path. The in-process tool runner appears only as a reference to compare with.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from v2_support import (
    CountingTools,
    InProcessTools,
    config,
    reduced,
    reindexed,
    run_into,
)

from harness.canonical import canonical_bytes
from harness.providers import (
    ProviderRequest,
    ProviderResult,
    Role,
    SimulatedProvider,
    memory_audit,
)
from harness.providers.attempts import Audit
from harness.sandbox import ChildBackend, open_backend
from harness.store import finalize_store, read_store, verify_store
from harness.studies.v2.loop import run_cell
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import prepare

ROWS = 16  # w10-lookup and w10-aggregation, both checkpoints, all four pipelines, seed 1
LOCK = b'{"lock": "test bytes: the store treats the lock as opaque"}'


@pytest.fixture(scope="module")
def backend() -> ChildBackend:
    return open_backend()


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory, backend: ChildBackend) -> Any:
    store = tmp_path_factory.mktemp("v2") / "store"
    tools = CountingTools(backend)
    report = run_into(store, reduced(ROWS), LOCK, resume=False, tools=tools)
    return store, report, tools


def _bytes(results: list[CellResult]) -> list[bytes]:
    return [canonical_bytes(r) for r in results]


def test_v2_reduced_schedule_commits_every_cell_with_its_audit_group(sandboxed: Any) -> None:
    store, report, tools = sandboxed
    assert report.complete
    assert report.committed == ROWS
    assert verify_store(store)
    view = read_store(store)
    assert [c.row_index for c in view.cells] == list(range(ROWS))
    assert [c.row["cell_id"] for c in view.cells] == [r.cell_id for r in reduced(ROWS)]
    for record, result in zip(view.cells, report.results, strict=True):
        assert msgspec.convert(record.result, CellResult) == result
        assert len(record.audit) == result.provider_calls >= result.turns
        assert {a["cell_id"] for a in record.audit} == {result.cell_id}
        assert len(record.attempts) == result.provider_calls
        assert all(not a.orphaned for a in record.attempts)
        assert len(record.blobs) >= 1  # raw responses, content-addressed
    # Every executed tool call was a sandboxed child; refused calls never ran.
    assert tools.calls == sum(r.tool_calls for r in report.results)
    assert tools.calls > 0
    assert finalize_store(store, ROWS).startswith("blake3:")


def test_v2_sandboxed_results_equal_the_in_process_reference(
    sandboxed: Any, tmp_path: Path
) -> None:
    _, report, _ = sandboxed
    reference = run_into(
        tmp_path / "ref", reduced(ROWS), LOCK, resume=False, tools=InProcessTools()
    )
    assert _bytes(reference.results) == _bytes(report.results)


def test_v2_simulated_run_exercises_every_outcome_kind(sandboxed: Any) -> None:
    _, report, _ = sandboxed
    results = report.results
    assert all(r.simulated and r.provider == "simulated" for r in results)
    assert any(r.premature_unsupported_termination for r in results)
    assert any(r.supported_completion for r in results)
    assert any(r.recovery_event and r.completed_after_recovery for r in results)
    ect = [r for r in results if r.policy == "ect"]
    assert not any(r.premature_unsupported_termination for r in ect)


def test_v2_a_cell_is_the_same_alone_in_any_order_or_after_any_neighbour(
    sandboxed: Any, tmp_path: Path
) -> None:
    # Nothing crosses cells: a cell's result does not depend on what ran before it.
    _, report, _ = sandboxed
    rows = reduced(ROWS)
    picked = [rows[13], rows[2], rows[7], rows[0]]
    shuffled = run_into(
        tmp_path / "shuffled", reindexed(picked), LOCK, resume=False, tools=InProcessTools()
    )
    by_cell = {r.cell_id: canonical_bytes(r) for r in report.results}
    assert _bytes(shuffled.results) == [by_cell[r.cell_id] for r in picked]


class _Recording:
    """A provider wrapper keeping every request it was asked."""

    def __init__(self) -> None:
        self.inner = SimulatedProvider()
        self.requests: list[ProviderRequest] = []

    @property
    def name(self) -> Any:
        return self.inner.name

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        self.requests.append(request)
        return await self.inner.generate(request, audit)


def _requests_of(rows: Any, inputs: Any) -> dict[str, list[ProviderRequest]]:
    seen: dict[str, list[ProviderRequest]] = {}
    for row in rows:
        provider = _Recording()
        audit, _, _ = memory_audit()
        trio.run(run_cell, inputs.cell(row), provider, InProcessTools(), audit)
        seen[row.cell_id] = provider.requests
    return seen


def test_v2_prompts_are_blinded_and_hold_only_the_cells_own_state() -> None:
    rows = reduced(ROWS)
    inputs = prepare(config(), rows)
    seen = _requests_of(rows, inputs)
    words = re.compile(r"\b(gold|oracle|fault|split|incomplete|F[1-8]|U[1-3]|T1)\b")
    for row in rows:
        for request in seen[row.cell_id]:
            assert request.cell_id == row.cell_id
            for message in request.messages:
                assert words.search(message.text) is None, (row.cell_id, words.search(message.text))
            if request.role is Role.PLANNER:
                ids = {c["call_id"] for c in request.view["calls"]}
                trace = {c.call_id for c in inputs.checkpoints[(row.task_id, row.checkpoint)].trace}
                # Only this trajectory's calls: its checkpoint's, then the ones it made itself.
                assert trace <= ids
                assert len(ids - trace) <= config().budget.additional_tool_calls
    # Two cells of the same task and checkpoint start from byte-identical planner views.
    first = [seen[r.cell_id][0].view for r in rows if r.checkpoint == "clean"][:4]
    assert all(canonical_bytes(v) == canonical_bytes(first[0]) for v in first[:4])
