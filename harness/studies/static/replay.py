"""Credential-free, offline replay of a static run store: every decision and every report file.

``replay_static(root)`` needs no credential and no network (the same process-local guard as
V2's replay refuses every socket connection and name lookup while it runs). From the store
alone it:

1. verifies the store and audits every attempt's request and response hashes against the
   blobs (``harness.audit``);
2. rebuilds each committed snapshot from the benchmark (which must match the manifest digest
   the genesis binds) and lets all fourteen policies decide again on its blinded view, the
   critics' answers served from the recorded response blobs (each request must hash to the
   recorded attempt's ``request_hash``). The recomputed ``DecisionRecord``s and the attempts
   they made must equal the stored result and audit group byte for byte;
3. recomputes the analysis and every report file and compares them with the stored report
   directory (default ``STORE/report``), byte for byte.

This module writes nothing. What both studies' replays share (the offline guard, recorded
answers, the report comparison, ``ReplayReport``) is ``harness.studies._replay``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import trio

from harness.audit import audit_store
from harness.benchmark.build import benchmark
from harness.benchmark.manifest import check_manifest
from harness.canonical import canonical_bytes
from harness.errors import ReplayMismatchError, StoreError
from harness.providers.attempts import AttemptRecord, memory_audit
from harness.providers.config import default_generation_config
from harness.providers.kinds import ProviderName
from harness.store import CellRecord, read_store
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
from harness.studies.static.analysis import analyze, load_run
from harness.studies.static.records import StaticCellResult, decode_identity
from harness.studies.static.report import REPORT_DIR, render_files
from harness.studies.static.run import decide_snapshot, study_policies, study_snapshots
from harness.worlds.snapshots import Snapshot

__all__ = ["render_static_replay", "replay_static"]


async def _replay_cells(
    root: Path,
    cells: tuple[CellRecord, ...],
    snapshots: dict[str, Snapshot],
    gold: Mapping[str, Mapping[str, Any]],
    name: ProviderName,
    tally: ReplayTally,
) -> None:
    config = default_generation_config()
    for cell in cells:
        where = f"row {cell.row_index} ({cell.row.get('snapshot_id')})"
        try:
            stored = msgspec.convert(cell.result, StaticCellResult, strict=True)
            attempts = [msgspec.convert(a, AttemptRecord, strict=True) for a in cell.audit]
        except msgspec.ValidationError as e:
            tally.mismatches.append(f"{where}: its result or audit group does not decode: {e}")
            continue
        snapshot = snapshots.get(stored.snapshot_id)
        if snapshot is None:
            tally.mismatches.append(f"{where}: no snapshot {stored.snapshot_id} in the benchmark")
            continue
        provider = RecordedProvider(root, name, attempts)
        audit, journal, _ = memory_audit()
        policies = study_policies(provider, audit, config, gold)
        try:
            decisions = await decide_snapshot(snapshot, policies)
        except (ReplayMismatchError, StoreError) as e:
            tally.mismatches.append(f"{where}: {e}")
            continue
        tally.replayed += 1
        tally.served += provider.served
        tally.policy_decisions += len(decisions)
        problems = []
        if [canonical_bytes(d) for d in decisions] != [
            canonical_bytes(d) for d in stored.decisions
        ]:
            differing = [
                d.policy
                for d, s in zip(decisions, stored.decisions, strict=False)
                if canonical_bytes(d) != canonical_bytes(s)
            ]
            problems.append(f"decisions differ ({', '.join(differing) or 'count'})")
        tally.settle(where, problems, journal.records, attempts, provider)


def replay_static(root: str | Path, *, report_dir: Path | None = None) -> ReplayReport:
    """Replay the static store at ``root`` offline (see the module docstring).

    Raises:
        StoreNotFoundError: no store at ``root``.
        TamperError: the store fails verification (exit 3).
        StudyKindError: the store is not a static study's.
        RunRecordsError: a record is not a static run's.
    """
    base = Path(root)
    with offline():
        audit = audit_store(base)
        run = load_run(base)  # refuses tamper and another study's store
        view = read_store(base)
        assert view.genesis is not None  # load_run refused a store without one
        identity = decode_identity(dict(view.genesis.identity), str(base))
        bench = benchmark()
        manifest = check_manifest(bench)
        tally = ReplayTally()
        if manifest.digest != identity.manifest_digest:
            tally.mismatches.append(
                f"the store was run on benchmark {identity.manifest_digest}, this one is "
                f"{manifest.digest}"
            )
        snapshots = {s.snapshot_id: s for s in study_snapshots(bench, identity.split)}
        gold = {t.task_id: t.gold for t in bench.tasks if t.split == identity.split}
        name = identity.provider.provider
        trio.run(_replay_cells, base, view.cells, snapshots, gold, name, tally)
        tables = compare_report(
            lambda: render_files(analyze(run)),
            report_dir if report_dir is not None else base / REPORT_DIR,
            cells=len(view.cells),
            default=report_dir is None,
            command=f"harness static report {base}",
        )
    return replay_report(
        view,
        tally,
        audit.problems,
        tables,
        simulated=run.info.simulated,
        provider=f"provider: {run.run.who()}",
    )


def render_static_replay(report: ReplayReport) -> str:
    """The replay report of a static store as text."""
    out = [
        report.provider,
        *([report.environment] if report.environment else []),
        store_line(report, study="static"),
        f"snapshots: {report.cells_identical}/{report.cells} replayed identically "
        f"({report.cells_replayed} replayed)",
        f"decisions: {report.policy_decisions_replayed} policy decisions recomputed; "
        f"{report.attempts_served} recorded provider attempts served from their blobs",
        *render_checks(report),
    ]
    return "\n".join(out)
