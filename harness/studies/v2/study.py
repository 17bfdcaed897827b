"""Running the frozen V2 study end to end: preflight, store, scheduler, manifest; and its status.

``execute`` is what ``harness v2 run`` and ``harness v2 resume`` do:

1. read the committed config and schedule (refused when the schedule is not the config's);
2. ``resume`` only: a missing store is refused and a finalized one is reported complete, both
   before anything else runs and with nothing written; the provider identity (provider, model,
   endpoint, generation config) is read from the store's genesis, only the credential comes
   from the flags, and a contradicting flag is refused in one line;
3. ``run`` only: refuse a directory that already holds a store (resume it; a finalized one:
   see its report) or anything else;
4. open the sandbox backend, then run preflight against exactly the lock, schedule and store
   paths of this run, the provider selection and the config's generation config - a failed
   check blocks the run; preflight is not optional (``execute`` requires it: the command line
   hands in ``preflight.run_preflight``, since the harness does not import ``preflight``). Its
   ``provider`` check opens the provider and, for a real one, makes one authenticated request
   that spends no tokens (the model's metadata);
5. create the store with the provider identity in its genesis (or open it for resume: verified
   prefix, torn tail repaired, orphaned attempts reported, a partial report removed; a store
   whose creation was killed before it was published holds nothing and is started afresh),
   journal the preflight request, keep the preflight report in it as a blob bound into the
   session's first commit, and run the remaining rows in order;
6. a signal or the provider circuit breaker stops the run unfinalized (``RunStoppedError``,
   ``ProviderOutageError``), naming the exact resume command; once every row is committed,
   finalize the store (its manifest pins the head) and return the manifest digest.

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
from typing import Any, Final, Protocol, TextIO

import msgspec

from harness.environment import describe_store
from harness.errors import (
    DurabilityError,
    StudyReportError,
    ToolChildKilledError,
    V2StudyError,
)
from harness.lock import DEFAULT_LOCK_PATH, read_lock_bytes
from harness.log import get_logger
from harness.preflight_report import PreflightReport, record_preflight
from harness.providers import GenerationConfig
from harness.providers.attempts import AttemptRecord, memory_audit
from harness.providers.kinds import ProviderName
from harness.providers.pacing import Pacing, paced
from harness.providers.protocol import Provider
from harness.providers.selection import (
    ProviderFlags,
    ProviderIdentity,
    ProviderSelection,
    open_provider,
    probe_provider,
    provider_identity,
    refuse_contradicting_flags,
    run_price,
    select_from_flags,
    selection_for_resume,
)
from harness.resources import data_path
from harness.run_identity import PROVIDER_KEY, provider_identity_of, read_identity
from harness.sandbox import ChildBackend, open_backend
from harness.store import (
    RunStore,
    StoreView,
    VerifyStatus,
    finalize_store,
    read_store,
)
from harness.studies._cost import announce, estimate
from harness.studies._store_audit import raise_if_stopped, refuse_key
from harness.studies._store_audit import resume_command as shared_resume_command
from harness.studies.progress import Progress, priced
from harness.studies.provenance import session_environment
from harness.studies.report_manifest import remove_partial_report
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, V2Config, load_config
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import POLICIES, CellResult, read_v2_store
from harness.studies.v2.pilot import (
    PILOT_KEY,
    PilotLabel,
    call_plans,
    pilot_label,
    select_rows,
)
from harness.studies.v2.runner import (
    RunReport,
    existing_cells,
    prepare,
    refuse_existing,
    run_rows,
)
from harness.studies.v2.schedule import (
    DEFAULT_SCHEDULE_PATH,
    Row,
    canonical_schedule,
    load_schedule,
)
from harness.terminal import escape

__all__ = [
    "RunOutcome",
    "PreflightHook",
    "execute",
    "read_results",
    "provider_line",
    "resume_command",
    "status_lines",
    "stored_identity",
]

_log = get_logger("harness.studies.v2")
_IDENTITY_KEY: Final = PROVIDER_KEY


class PreflightHook(Protocol):
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
        provider_probe: Callable[[], tuple[bool, str]] | None = None,
    ) -> PreflightReport:
        """The report of every check (``report.ok`` only when all passed)."""
        ...


@dataclass(frozen=True)
class RunOutcome:
    """What ``execute`` did: the session's report and, when complete, the manifest digest.

    ``complete`` is true when resume found the store already finalized and wrote nothing.
    """

    report: RunReport
    manifest: str | None
    orphaned_attempts: int
    complete: bool = False


def _inputs(
    config_path: Path | None, schedule_path: Path | None
) -> tuple[V2Config, tuple[Row, ...], list[dict[str, Any]], Path]:
    config, _ = load_config(config_path or data_path(DEFAULT_CONFIG_PATH))
    schedule = schedule_path or data_path(DEFAULT_SCHEDULE_PATH)
    rows, plain = load_schedule(schedule, config)
    return config, rows, plain, schedule


def _preflight(
    check: PreflightHook,
    lock_path: Path,
    schedule_path: Path,
    store_dir: Path,
    selection: ProviderSelection,
    config: V2Config,
    backend: ChildBackend,
    probe: Callable[[], tuple[bool, str]],
) -> PreflightReport:
    report = check(
        lock_path,
        schedule_path,
        store_dir,
        selection,
        generation_config=config.generation_config,
        schedule_source=canonical_schedule,
        sandbox=lambda: backend,
        provider_probe=probe,
    )
    for line in report.lines():
        _log.info("v2.preflight", check=line)
    report.require()
    return report


def resume_command(store_dir: Path, selection: ProviderSelection, lock_path: Path | None) -> str:
    """The exact command that continues ``store_dir`` (``harness v2 resume ...``)."""
    return shared_resume_command("v2", store_dir, selection, lock_path)


def stored_identity(view: StoreView) -> ProviderIdentity | None:
    """The provider identity a store's genesis binds (None: a store made before it was bound).

    Raises:
        V2StudyError: the genesis holds an identity that is not a provider identity.
    """
    try:
        return provider_identity_of(view)
    except StudyReportError as e:
        raise V2StudyError(str(e)) from e


class _Probe:
    """Opens the provider during preflight and makes its no-token request (gemini only)."""

    def __init__(self, selection: ProviderSelection, config: V2Config) -> None:
        self._selection = selection
        self._config = config
        self.provider: Provider | None = None
        self.audit, self.journal, self.blobs = memory_audit()

    def __call__(self) -> tuple[bool, str]:
        self.provider = open_provider(self._selection)
        return probe_provider(
            self.provider, self._selection, self._config.generation_config, self.audit
        )

    def journal_into(self, writer: RunStore) -> None:
        """Journal the preflight attempt into the store (bound into the next record)."""
        for address, data in self.blobs.all().items():
            if writer.put_blob(data) != address:  # the same domain and bytes: never differs
                raise V2StudyError("a preflight blob changed address in the store")
        for record in self.journal.records:
            key = writer.journal_begin(record.intent())
            blobs = [b for b in (record.request_blob, record.response_blob) if b is not None]
            writer.journal_end(key, record, blobs=blobs)

    def close(self) -> None:
        # The protocol has no close; the Gemini provider holds HTTP connections it closes.
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()


def _finalized(store_dir: Path) -> RunOutcome | None:
    """The outcome of resuming a store that is already finalized (None: it is not).

    Raises:
        StoreNotFoundError: no store at ``store_dir``.
        StudyKindError: a static study's store.
    """
    report = read_v2_store(store_dir, refuse_tamper=False).report  # refuses a static store
    if not report.finalized or report.status is not VerifyStatus.OK:
        return None
    ran = RunReport(store=store_dir, total=report.schedule_rows, done=report.cells)
    return RunOutcome(
        report=ran, manifest=report.manifest_digest, orphaned_attempts=0, complete=True
    )


def execute(  # noqa: C901 - the run's whole path, each failure ending in its one-line message
    store_dir: Path,
    *,
    resume: bool,
    selection: ProviderSelection | ProviderFlags,
    preflight: PreflightHook,
    lock_path: Path | None = None,
    config_path: Path | None = None,
    schedule_path: Path | None = None,
    progress_stream: TextIO | None = None,
    show_progress: bool = True,
    max_cells: int = 1,
    limit: int | None = None,
    cells: Sequence[str] = (),
    confirm: Callable[[Sequence[str]], bool] | None = None,
    pacing: Pacing | None = None,
    require_environment: bool = False,
) -> RunOutcome:
    """Run (or resume) the study into ``store_dir`` (see the module docstring).

    ``preflight`` runs the checks that gate the run (the command line hands in
    ``preflight.run_preflight``). For ``run``, ``selection`` is the provider selection; for
    ``resume`` it may be the flags as given, and the store's genesis supplies the rest.
    ``max_cells`` cells run at once, committed in schedule order. ``limit`` and ``cells``
    make a pilot (``pilot.select_rows``; ``run`` only: resume reads the pilot from genesis).
    Once preflight has checked the credential, and before a real provider is asked anything
    else, the cost estimate is printed and ``confirm`` (when given) is asked whether to go on;
    False stops with nothing written (``RunDeclinedError``, exit 0). ``pacing`` keeps the
    requests under the user's quota (``--max-rpm``/``--max-tpm``; recorded in ``run.log``).
    The session's environment is recorded in the store; ``require_environment`` refuses to
    start when it differs from the lock's reference or (resume) an earlier session's.

    Raises:
        StoreHasCellsError: ``run`` on a directory that already holds a store.
        StoreNotFoundError: ``resume`` of a directory that holds no store.
        ProviderSelectionError: resume flags contradict the store's provider identity.
        PreflightFailedError: a preflight check failed (every failed check is named).
        EnvironmentMismatchError: ``require_environment`` and the environment differs.
        ProviderOutageError: the circuit breaker stopped the run; committed cells are kept.
        RunStoppedError: SIGINT or SIGTERM stopped the run; committed cells are kept.
        RunDeclinedError: the user declined at the cost estimate; nothing was written.
        HarnessError: any other expected failure (lock, config, schedule, store, sandbox).
    """
    config, rows, plain, schedule = _inputs(config_path, schedule_path)
    if max_cells < 1:
        raise V2StudyError(f"--max-cells must be at least 1, not {max_cells}")
    if resume and (limit is not None or cells):
        raise V2StudyError("a resume continues the store's own rows; --limit/--cells are for run")
    lock = lock_path or data_path(DEFAULT_LOCK_PATH)
    if resume:
        # No store there (or only a create cut short, whose flags - a pilot's rows among them -
        # nothing recorded): StoreNotFoundError, before preflight.
        done = _finalized(store_dir)
        if done is not None:
            # Nothing to run, but a flag that contradicts the store is refused as on a
            # partial store (a typo must not pass silently because the store is sealed).
            stored = stored_identity(read_store(store_dir))
            flags = selection if isinstance(selection, ProviderFlags) else _flags_of(selection)
            if stored is not None:
                refuse_contradicting_flags(flags, stored, str(store_dir))
            return done
    if isinstance(selection, ProviderFlags):
        selection = (
            _resolve(store_dir, selection, config) if resume else select_from_flags(selection)
        )
    elif resume:
        _resolve(store_dir, _flags_of(selection), config)  # refuses a contradicting selection
    identity = provider_identity(selection, config.generation_config)
    label = _stored_pilot(store_dir) if resume else None
    if resume:
        rows = _pilot_rows(rows, label)
    else:
        rows, label = select_rows(rows, limit, cells)
    plain = [plain[row.index] for row in rows]
    bound_identity: dict[str, Any] = {_IDENTITY_KEY: msgspec.to_builtins(identity)}
    if label is not None:
        bound_identity[PILOT_KEY] = msgspec.to_builtins(label)
    if not resume:
        refuse_existing(store_dir, resume_command(store_dir, selection, lock_path))
    lock_bytes = read_lock_bytes(lock)
    environment = session_environment(
        lock_bytes, str(lock), resume_of=store_dir if resume else None, require=require_environment
    )
    stream = progress_stream if progress_stream is not None else sys.stderr
    if label is not None and show_progress:
        stream.write(escape(label.describe(), multiline=True) + "\n")
    pacing = pacing or Pacing()
    backend = open_backend()
    probe = _Probe(selection, config)
    try:
        report = _preflight(preflight, lock, schedule, store_dir, selection, config, backend, probe)
        if probe.provider is None:  # preflight skipped the probe only when it failed
            raise V2StudyError("preflight did not open the provider")
        if selection.provider is not ProviderName.SIMULATED:
            # After preflight: the key has been checked, and nothing is written yet.
            begun = (existing_cells(store_dir) or 0) if resume else 0
            guess = estimate(
                call_plans(rows[begun:], config.generation_config.gemini),
                run_price(selection, config.generation_config),
                unit="cell",
                max_cells=max_cells,
                max_rpm=pacing.max_rpm,
                max_tpm=pacing.max_tpm,
            )
            announce(guess, stream, show=show_progress, confirm=confirm)
        provider = paced(probe.provider, pacing)
        inputs = prepare(config, rows)
        orphans = 0
        if resume:
            resumed = RunStore.open_for_resume(
                store_dir,
                lock_bytes,
                plain,
                result_type=CellResult,
                attempt_type=AttemptRecord,
                environment=environment,
            )
            writer, orphans = resumed.writer, len(resumed.orphaned_attempts)
            bound = writer.identity.get(_IDENTITY_KEY)
            if bound is not None and bound != msgspec.to_builtins(identity):
                writer.close()
                raise V2StudyError(f"store {store_dir} changed its identity while it was opened")
        else:
            writer = RunStore.create(
                store_dir,
                lock_bytes,
                plain,
                result_type=CellResult,
                attempt_type=AttemptRecord,
                identity=bound_identity,
                environment=environment,
            )
        try:
            refuse_key(writer, provider)
            if resume:
                _supersede_partial_report(store_dir)
            probe.journal_into(writer)
            preflight_blob = record_preflight(writer, report)
            _log_session(writer, len(rows), max_cells, resume, pacing)
            progress = (
                Progress(
                    stream,
                    total=len(rows),
                    done=writer.next_row_index,
                    live=stream.isatty(),
                    priced=priced(selection, config.generation_config),
                )
                if show_progress
                else None
            )
            try:
                ran = run_rows(
                    writer,
                    inputs,
                    provider,
                    SandboxTools(backend, timeout_s=config.tool_timeout_s),
                    progress=progress,
                    first_blobs=(preflight_blob,),
                    max_cells=max_cells,
                )
            except* ToolChildKilledError as killed:
                # The loop cannot know the command; the stop message must name it exactly.
                again = resume_command(store_dir, selection, lock_path)
                leaf: BaseException = killed.exceptions[0]
                while isinstance(leaf, BaseExceptionGroup):  # the cells' nursery nests a group
                    leaf = leaf.exceptions[0]
                raise ToolChildKilledError(f"{leaf}; continue with `{again}`") from None
        finally:
            writer.close()
    finally:
        probe.close()
    again = resume_command(store_dir, selection, lock_path)
    raise_if_stopped(
        outage=ran.outage,
        stopped_by=ran.stopped_by,
        done=ran.done,
        total=ran.total,
        committed=ran.committed,
        unit="cell",
        again=again,
    )
    # A pilot is sealed as a pilot: its genesis says so, and no expected count makes it the study.
    expected = None if label is not None else len(rows)
    manifest = finalize_store(store_dir, expected) if ran.complete else None
    return RunOutcome(report=ran, manifest=manifest, orphaned_attempts=orphans)


RUN_LOG: Final = "run.log"
"""One JSON line per writer session in the store directory: how it ran (``max_cells``).

Not part of the chain: nothing there can change a result, and the records stay byte-identical
whatever ``--max-cells`` was."""


def _log_session(writer: RunStore, rows: int, max_cells: int, resume: bool, pacing: Pacing) -> None:
    """Append this session's line to ``run.log`` through the writer's directory descriptor
    (no link followed, no hard-linked file written: a planted one stops the run as tamper)."""
    line: dict[str, Any] = {
        "session": "resume" if resume else "run",
        "started_utc": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "first_row": writer.next_row_index,
        "rows": rows,
        "max_cells": max_cells,
    }
    if pacing.active:
        line["max_rpm"] = pacing.max_rpm
        line["max_tpm"] = pacing.max_tpm
    try:
        writer.append_note(RUN_LOG, msgspec.json.encode(line) + b"\n")
    except DurabilityError as e:
        _log.warning("v2.run_log_unwritable", store=str(writer.root), error=str(e))


def _stored_pilot(store_dir: Path) -> PilotLabel | None:
    genesis = read_store(store_dir).genesis
    return None if genesis is None else pilot_label(genesis.identity)


def _pilot_rows(rows: tuple[Row, ...], label: PilotLabel | None) -> tuple[Row, ...]:
    if label is None:
        return rows
    chosen, again = select_rows(rows, label.limit, label.cells)
    if again != label:
        raise V2StudyError("the store's pilot label does not select its own rows again")
    return chosen


def _flags_of(selection: ProviderSelection) -> ProviderFlags:
    source = selection.credential
    return ProviderFlags(
        provider=selection.provider.value,
        credential_file=Path(source.name) if source is not None and source.kind == "file" else None,
        credential_env=source.name if source is not None and source.kind == "env" else None,
        base_url=selection.base_url,
        model=selection.model,
        no_credential=selection.provider is ProviderName.OPENAI and source is None,
        planner=None if selection.planner is None else selection.planner.spec,
        price_input=None if selection.price is None else selection.price.input_per_million,
        price_output=None if selection.price is None else selection.price.output_per_million,
    )


def _resolve(store_dir: Path, flags: ProviderFlags, config: V2Config) -> ProviderSelection:
    """The selection a resume uses: the store's identity, the credential from the flags."""
    stored = stored_identity(read_store(store_dir))
    if stored is None:
        # A store made before its genesis bound the provider: the flags decide, as they did.
        _log.warning("v2.resume_without_identity", store=str(store_dir))
        return select_from_flags(flags)
    return selection_for_resume(flags, stored, config.generation_config, str(store_dir))


def _supersede_partial_report(store_dir: Path) -> None:
    """Remove a report written on this store while it was partial: resume makes it stale."""
    # Imported here: the report pulls in matplotlib, which a run does not otherwise need.
    from harness.studies.v2.report import REPORT_DIR, REPORT_FILES

    made = remove_partial_report(store_dir / REPORT_DIR, REPORT_FILES)
    if made is not None:
        _log.warning("v2.partial_report_removed", cells=made)


def read_results(store_dir: Path) -> tuple[list[CellResult], Any]:
    """The verified cells of a store decoded as ``CellResult`` (and the store view).

    Raises:
        StoreNotFoundError: no store there.
        V2StudyError: a committed result is not a V2 cell result.
    """
    view = read_v2_store(store_dir, refuse_tamper=False)
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


def provider_line(view: StoreView, results: Sequence[CellResult] = ()) -> str:
    """``provider: ...`` naming who ran the store (``harness.run_identity``; a store made
    before genesis bound its provider is named by its results)."""
    providers = sorted({r.provider for r in results})
    run = read_identity(
        view,
        fallback_provider=providers[0] if len(providers) == 1 else None,
        fallback_simulated=any(r.simulated for r in results),
    )
    return f"provider: {run.who()}"


def status_lines(
    store_dir: Path, *, read: tuple[list[CellResult], StoreView] | None = None
) -> list[str]:
    """The status of a V2 store, one line each (see the module docstring); ``read`` is what
    ``read_results`` returned, when the caller already read the store.

    Raises:
        StoreNotFoundError: no store there.
        V2StudyError: the store holds something other than V2 cell results.
    """
    results, view = read if read is not None else read_results(store_dir)
    report = view.report
    label = None if view.genesis is None else pilot_label(view.genesis.identity)
    lines = [
        f"store: {store_dir}" + ("" if label is None else f" - {label.describe()}"),
        provider_line(view, results),
        describe_store(view),
        f"verification: {report.status} ({report.code}): {report.reason}",
        f"cells: {report.cells}/{report.schedule_rows} committed"
        + (
            f"; finalized, manifest {report.manifest_digest}"
            if report.finalized
            else "; not finalized, manifest none"
        ),
        f"attempts journaled but not bound to a record: {report.pending_attempts}",
    ]
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
