"""Running the frozen V2 study end to end: preflight, store, scheduler, manifest; and its status.

``execute`` is what ``harness v2 run`` and ``harness v2 resume`` do:

1. read the committed config and schedule (refused when the schedule is not the config's);
2. ``run`` only: refuse a directory that already holds a store (resume it instead);
3. open the sandbox backend, then run preflight against exactly the lock, schedule and store
   paths of this run, the provider selection and the config's generation config - a failed
   check blocks the run; preflight is not optional (``execute`` requires it: the command line
   hands in ``preflight.run_preflight``, since the harness does not import ``preflight``);
4. create the store (or open it for resume: verified prefix, torn tail repaired, orphaned
   attempts reported; a store whose creation was killed before it was published holds nothing
   and is started afresh), keep the preflight report in it as a blob bound into the session's first
   commit, and run the remaining rows in order;
5. once every row is committed, finalize the store (its manifest pins the head) and return
   the manifest digest.

``status_lines`` summarizes a store for ``harness v2 status``: verification, cells, pending
attempts and per-pipeline counts of the primary outcomes so far. It is a progress view, not
the confirmatory analysis (``harness v2 report``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

import msgspec

from harness.errors import RunStoppedError, V2StudyError
from harness.lock import DEFAULT_LOCK_PATH
from harness.log import get_logger
from harness.preflight_report import PreflightReport, record_preflight
from harness.providers import GenerationConfig
from harness.providers.audit import AttemptRecord
from harness.providers.selection import ProviderSelection, open_provider
from harness.resources import data_path, default_stores_dir
from harness.safeio import MAX_READ, read_input
from harness.sandbox import ChildBackend, open_backend
from harness.store import RunStore, finalize_store, read_store
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, V2Config, load_config
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import POLICIES, CellResult
from harness.studies.v2.progress import Progress
from harness.studies.v2.runner import RunReport, prepare, refuse_existing, run_rows
from harness.studies.v2.schedule import (
    DEFAULT_SCHEDULE_PATH,
    Row,
    canonical_schedule,
    load_schedule,
)

__all__ = [
    "Outcome",
    "PreflightCheck",
    "default_store_dir",
    "execute",
    "killed_before_publish",
    "read_results",
    "status_lines",
]

_log = get_logger("harness.studies.v2")


class PreflightCheck(Protocol):
    """Runs every preflight check against exactly one run's inputs; never raises for a failure.

    ``preflight.run_preflight`` is the implementation; the command line hands it in.
    """

    def __call__(
        self,
        lock_path: Path,
        schedule_path: Path,
        store_dir: Path,
        provider: ProviderSelection,
        *,
        generation_config: GenerationConfig,
        schedule_source: Callable[[], Sequence[Mapping[str, Any]]],
        sandbox: Callable[[], ChildBackend],
    ) -> PreflightReport:
        """The report of every check (``report.ok`` only when all passed)."""
        ...


@dataclass(frozen=True)
class Outcome:
    """What ``execute`` did: the session's report and, when complete, the manifest digest."""

    report: RunReport
    manifest: str | None
    orphaned_attempts: int


def default_store_dir(now: datetime | None = None) -> Path:
    """A new store directory under the project's ``stores/``: ``v2-<UTC time>``."""
    moment = now if now is not None else datetime.now(tz=UTC)
    return default_stores_dir() / f"v2-{moment.strftime('%Y%m%dT%H%M%SZ')}"


def _inputs(
    config_path: Path | None, schedule_path: Path | None
) -> tuple[V2Config, tuple[Row, ...], list[dict[str, Any]], Path]:
    config, _ = load_config(config_path or data_path(DEFAULT_CONFIG_PATH))
    schedule = schedule_path or data_path(DEFAULT_SCHEDULE_PATH)
    rows, plain = load_schedule(schedule, config)
    return config, rows, plain, schedule


def _preflight(
    check: PreflightCheck,
    lock_path: Path,
    schedule_path: Path,
    store_dir: Path,
    selection: ProviderSelection,
    config: V2Config,
    backend: ChildBackend,
) -> PreflightReport:
    report = check(
        lock_path,
        schedule_path,
        store_dir,
        selection,
        generation_config=config.generation_config,
        schedule_source=canonical_schedule,
        sandbox=lambda: backend,
    )
    for line in report.lines():
        _log.info("v2.preflight", check=line)
    report.require()
    return report


def _read_lock(path: Path) -> bytes:
    try:
        return read_input(path, MAX_READ, "study lock")
    except OSError as e:
        raise V2StudyError(
            f"cannot read the study lock {path}: {e.strerror}; write it with `harness lock`"
        ) from e


def execute(
    store_dir: Path,
    *,
    resume: bool,
    selection: ProviderSelection,
    preflight: PreflightCheck,
    lock_path: Path | None = None,
    config_path: Path | None = None,
    schedule_path: Path | None = None,
    progress_stream: TextIO | None = None,
) -> Outcome:
    """Run (or resume) the study into ``store_dir`` (see the module docstring).

    ``preflight`` runs the checks that gate the run (the command line hands in
    ``preflight.run_preflight``).

    Raises:
        StoreHasCellsError: ``run`` on a directory that already holds a store.
        PreflightFailedError: a preflight check failed (every failed check is named).
        RunStoppedError: SIGINT or SIGTERM stopped the run; committed cells are kept.
        HarnessError: any other expected failure (lock, config, schedule, store, sandbox).
    """
    config, rows, plain, schedule = _inputs(config_path, schedule_path)
    lock = lock_path or data_path(DEFAULT_LOCK_PATH)
    lock_bytes = _read_lock(lock)
    if not resume:
        refuse_existing(store_dir)
    backend = open_backend()
    report = _preflight(preflight, lock, schedule, store_dir, selection, config, backend)
    provider = open_provider(selection)
    inputs = prepare(config, rows)
    orphans = 0
    if resume and killed_before_publish(store_dir):
        # A run killed while creating its store left only a private partial directory: no
        # cell, no attempt. Resuming it is starting it (create clears the partial).
        _log.warning("v2.resume_unpublished", store=str(store_dir))
        resume = False
    if resume:
        resumed = RunStore.open_for_resume(
            store_dir, lock_bytes, plain, result_type=CellResult, attempt_type=AttemptRecord
        )
        writer, orphans = resumed.writer, len(resumed.orphaned_attempts)
    else:
        writer = RunStore.create(
            store_dir, lock_bytes, plain, result_type=CellResult, attempt_type=AttemptRecord
        )
    try:
        preflight_blob = record_preflight(writer, report)
        stream = progress_stream if progress_stream is not None else sys.stderr
        progress = Progress(
            stream, total=len(rows), done=writer.next_row_index, live=stream.isatty()
        )
        ran = run_rows(
            writer,
            inputs,
            provider,
            SandboxTools(backend, timeout_s=config.tool_timeout_s),
            progress=progress,
            first_blobs=(preflight_blob,),
        )
    finally:
        writer.close()
        # The protocol has no close; the Gemini provider holds HTTP connections it closes.
        close = getattr(provider, "close", None)
        if callable(close):
            close()
    if ran.stopped_by is not None:
        raise RunStoppedError(
            f"stopped by {ran.stopped_by} after {ran.done}/{ran.total} committed cells "
            f"({ran.committed} this session); continue with `harness v2 resume {store_dir}`"
        )
    manifest = finalize_store(store_dir, len(rows)) if ran.complete else None
    return Outcome(report=ran, manifest=manifest, orphaned_attempts=orphans)


def killed_before_publish(store_dir: Path) -> bool:
    """True when ``store_dir`` holds no store but a creation of it was cut short there."""
    if store_dir.exists() and any(store_dir.iterdir()):
        return False
    parent = store_dir.parent
    prefix = f".{store_dir.name}.partial-"
    return parent.is_dir() and any(p.name.startswith(prefix) for p in parent.iterdir())


def read_results(store_dir: Path) -> tuple[list[CellResult], Any]:
    """The verified cells of a store decoded as ``CellResult`` (and the store view).

    Raises:
        StoreNotFoundError: no store there.
        V2StudyError: a committed result is not a V2 cell result.
    """
    view = read_store(store_dir)
    results = []
    for record in view.cells:
        try:
            results.append(msgspec.convert(record.result, CellResult))
        except msgspec.ValidationError as e:
            raise V2StudyError(
                f"{store_dir}: record {record.seq} holds no V2 cell result ({e})"
            ) from e
    return results, view


def _rate(count: int, total: int) -> str:
    return f"{count}/{total}"


def summary_rows(results: Sequence[CellResult]) -> list[dict[str, Any]]:
    """Per pipeline, over primary cells: U, S, FC, R, completed after recovery, stuck, turns,
    tool calls, provider calls, tokens (counts with their denominators, and means)."""
    rows = []
    for policy in POLICIES:
        cells = [r for r in results if r.policy == policy and r.primary]
        incomplete = [r for r in cells if r.checkpoint == "incomplete"]
        clean = [r for r in cells if r.checkpoint == "clean"]
        n = max(1, len(cells))
        rows.append(
            {
                "policy": policy,
                "cells": len(cells),
                "U": sum(r.premature_unsupported_termination for r in incomplete),
                "U_of": len(incomplete),
                "S": sum(r.supported_completion for r in cells),
                "S_of": len(cells),
                "FC": sum(r.clean_false_continuation for r in clean),
                "FC_of": len(clean),
                "R": sum(r.recovery_event for r in incomplete),
                "R_of": len(incomplete),
                "R_then_S": sum(r.completed_after_recovery for r in incomplete),
                "stuck": sum(r.terminal == "stuck" for r in cells),
                "recoverable_stuck": sum(r.recoverable_stuck for r in cells),
                "turns": round(sum(r.turns for r in cells) / n, 3),
                "calls": round(sum(r.tool_calls for r in cells) / n, 3),
                "provider_calls": round(sum(r.provider_calls for r in cells) / n, 3),
                "tokens": round(sum(r.tokens for r in cells) / n, 1),
            }
        )
    return rows


def status_lines(store_dir: Path) -> list[str]:
    """The status of a V2 store, one line each (see the module docstring).

    Raises:
        StoreNotFoundError: no store there.
        V2StudyError: the store holds something other than V2 cell results.
    """
    results, view = read_results(store_dir)
    report = view.report
    lines = [
        f"store: {store_dir}",
        f"verification: {report.status} ({report.code}): {report.reason}",
        f"cells: {report.cells}/{report.schedule_rows} committed"
        + (
            f"; finalized, manifest {report.manifest_digest}"
            if report.finalized
            else "; not finalized, manifest none"
        ),
        f"attempts journaled but not bound to a record: {report.pending_attempts}",
    ]
    if any(r.simulated for r in results):
        lines.append(
            "provider: SIMULATED (deterministic stand-in, not a language model): "
            "these are results of a simulation"
        )
    elif results:
        lines.append(f"provider: {results[0].provider}")
    lines.append(
        "primary cells so far (T1 clusters excluded): U = premature unsupported termination "
        "(incomplete), S = supported completion, FC = clean false continuation, R = recovery "
        "event (incomplete), R->S = recovered then completed with support; means per cell"
    )
    header = (
        f"{'pipeline':<11} {'U':>7} {'S':>8} {'FC':>7} {'R':>7} {'R->S':>5} {'stuck':>5} "
        f"{'turns':>6} {'calls':>6} {'prov.':>6} {'tokens':>8}"
    )
    lines.append(header)
    for row in summary_rows(results):
        lines.append(
            f"{row['policy']:<11} {_rate(row['U'], row['U_of']):>7} "
            f"{_rate(row['S'], row['S_of']):>8} {_rate(row['FC'], row['FC_of']):>7} "
            f"{_rate(row['R'], row['R_of']):>7} {row['R_then_S']:>5} {row['stuck']:>5} "
            f"{row['turns']:>6.2f} {row['calls']:>6.2f} {row['provider_calls']:>6.2f} "
            f"{row['tokens']:>8.0f}"
        )
    return lines
