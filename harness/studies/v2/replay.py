"""Credential-free, offline replay of a V2 run store: every decision and the whole analysis again.

``replay_store(root, config_path)`` needs no credential and no network (a process-local guard
refuses every socket connection and name lookup while it runs). From the store alone (its
records, its provider-attempt blobs and its copy of the study lock, which binds the frozen
study config) it:

1. verifies the store and audits every attempt's request and response hashes against the
   blobs (``harness.audit``);
2. re-runs every cell's planner loop (``harness.studies.v2.loop.run_cell``) from its
   regenerated task and checkpoint, with the planner's and critics' answers served from the
   recorded response blobs instead of a provider: each request the loop builds must hash to
   the recorded attempt's ``request_hash``, so a single differing prompt, view or config
   diverges. Tool calls are re-executed against the regenerated world (the synthetic tools are
   deterministic). Every policy decision is thus recomputed: ECT's verifier runs again on the
   rebuilt ledger and the certificate parsed from the recorded output, the critics' verdicts
   are parsed again from their recorded answers, and the gold judge scores every proposal
   again. The recomputed ``CellResult`` and audit group must equal the stored ones byte for
   byte;
3. recomputes the analysis and every report file and compares them with the stored report
   directory (default ``DIR/report``), byte for byte.

A cell whose recorded trajectory contains a sandbox failure (a timeout or a killed child) is
reported as not replayable: the failure's message is not part of the result, so its
transport error cannot be rebuilt; every other cell must replay exactly. This module writes
nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio

from harness.audit import audit_store
from harness.canonical import canonical_bytes
from harness.errors import NotReplayableError, ReplayMismatchError, StoreError, StudyReportError
from harness.providers.attempts import AttemptRecord, memory_audit
from harness.providers.kinds import ProviderName
from harness.sandbox import Outcome, ToolCallResult
from harness.store import CellRecord
from harness.studies._replay import (
    RecordedProvider,
    ReplayReport,
    ReplayTally,
    compare_report,
    offline,
    render_checks,
    replay_report,
    store_line,
)
from harness.studies.v2.loop import run_cell
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.report import (
    REPORT_DIR,
    bound_config,
    build_report,
    load_run,
)
from harness.studies.v2.runner import StudyInputs, prepare
from harness.studies.v2.schedule import Row
from harness.studies.v2.study import provider_line
from harness.tools.catalog import call_tool

__all__ = ["render_replay", "replay_store"]


class RecordedTools:
    """Re-executes each tool call against the world; refuses to invent a sandbox failure."""

    def __init__(self, steps: Sequence[Any]) -> None:
        self._executed = deque(s for s in steps if s.call_outcome in ("ok", "failed"))

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        """The call's response, as a sandboxed child would have returned it."""
        await trio.lowlevel.checkpoint()
        step = self._executed.popleft() if self._executed else None
        if step is not None and step.sandbox_outcome is not None:
            raise NotReplayableError(
                f"decision {step.decision}: the sandboxed call ended {step.sandbox_outcome}, "
                "whose message the result does not record"
            )
        # The JSON round trip a child's reply makes.
        response = msgspec.json.decode(msgspec.json.encode(call_tool(world, tool_id, args)))
        return ToolCallResult(outcome=Outcome.OK, response=response, exit_status=0, elapsed_s=0.0)


# --- replay -----------------------------------------------------------------------------------


def _first_difference(replayed: CellResult, stored: CellResult) -> str:
    for name in replayed.__struct_fields__:
        mine, theirs = getattr(replayed, name), getattr(stored, name)
        if canonical_bytes(mine) != canonical_bytes(theirs):
            if name == "steps":
                for a, b in zip(mine, theirs, strict=False):
                    if a != b:
                        return f"decision {b.decision} differs"
                return f"{len(mine)} decisions replayed, {len(theirs)} recorded"
            return f"{name} is {mine!r}, the store records {theirs!r}"
    return "the encodings differ"


async def _replay_cells(
    root: Path,
    inputs: StudyInputs,
    rows: Sequence[Row],
    records: Sequence[CellRecord],
    results: Sequence[CellResult],
    tally: ReplayTally,
) -> None:
    for row, record, stored in zip(rows, records, results, strict=True):
        where = f"row {record.row_index} ({row.cell_id})"
        try:
            attempts = [msgspec.convert(a, AttemptRecord, strict=True) for a in record.audit]
        except msgspec.ValidationError as e:
            tally.mismatches.append(f"{where}: its audit group does not decode: {e}")
            continue
        provider = RecordedProvider(root, ProviderName(stored.provider), attempts)
        audit, _, _ = memory_audit()
        try:
            run = await run_cell(inputs.cell(row), provider, RecordedTools(stored.steps), audit)
        except NotReplayableError as e:
            tally.not_replayable.append(f"{where}: {e}")
            continue
        except (ReplayMismatchError, StoreError) as e:
            tally.mismatches.append(f"{where}: {e}")
            continue
        tally.replayed += 1
        tally.served += provider.served
        tally.decisions += run.result.turns
        tally.policy_decisions += sum(s.verdict is not None for s in run.result.steps)
        problems = []
        if canonical_bytes(run.result) != canonical_bytes(stored):
            problems.append(f"result differs: {_first_difference(run.result, stored)}")
        tally.settle(where, problems, run.attempts, attempts, provider)


def replay_store(
    root: str | Path, config_path: Path, *, report_dir: Path | None = None
) -> ReplayReport:
    """Replay the store at ``root`` offline (see the module docstring).

    Args:
        root: the run store.
        config_path: the frozen V2 study config (refused unless the store's lock covers it).
        report_dir: the stored report to compare (default ``root/report``).

    Raises:
        StoreNotFoundError: no store at ``root``.
        StudyReportError: the store is tampered, holds no V2 results, or is bound to another
            study config.
    """
    base = Path(root)
    with offline():
        audit = audit_store(base)
        view, results = load_run(base)
        config, _ = bound_config(base, config_path)
        try:
            rows = [msgspec.convert(r.row, Row, strict=True) for r in view.cells]
        except msgspec.ValidationError as e:
            raise StudyReportError(f"store {base} holds a row that is not a V2 row: {e}") from e
        inputs = prepare(config, rows)
        tally = ReplayTally()
        trio.run(_replay_cells, base, inputs, rows, view.cells, results, tally)
        tables = compare_report(
            lambda: build_report(base, config_path).files,
            report_dir if report_dir is not None else base / REPORT_DIR,
            cells=len(view.cells),
            default=report_dir is None,
            command=f"harness v2 report {base}",
        )
    return replay_report(
        view,
        tally,
        audit.problems,
        tables,
        simulated=all(r.simulated for r in results),
        provider=provider_line(view, results),
    )


def render_replay(report: ReplayReport) -> str:
    """The replay report as text."""
    out = [
        *([report.provider] if report.provider else []),
        *([report.environment] if report.environment else []),
        store_line(report),
        f"cells: {report.cells_identical}/{report.cells} replayed identically "
        f"({report.cells_replayed} replayed, {len(report.not_replayable)} not replayable)",
        f"decisions: {report.decisions_replayed} planner decisions and "
        f"{report.policy_decisions_replayed} policy decisions recomputed; "
        f"{report.attempts_served} recorded provider attempts served from their blobs",
        *render_checks(report),
    ]
    return "\n".join(out)
