"""The static study runner: seven termination policies and the ECT ablations over the grid.

For every snapshot of the chosen split (held out by default: 36 tasks x clean + F1..F8 = 324
snapshots) every policy decides on the snapshot's blinded view, in a fixed order: the seven
policies of the paper's Table 2, then ECT with each single check family removed (Table 3). One
``DecisionRecord`` per (policy, snapshot); the scoring labels (fault, split, gold decision,
family, world) are attached by the runner *after* the policy decided and never reach a policy.

The run is written through the run store (``harness.store``), as V2's is (see
``harness.studies.static.records`` for what genesis, rows and results hold): one cell record
per snapshot, committed (append + fsync + HEAD) before the next snapshot starts; every provider
attempt journaled (fsynced) before it is sent and after it ends, with the simulated provider
too, as V2 does; raw responses as blobs; the manifest once every snapshot is committed.

A stop leaves the store unfinalized and resumable (``resume_static``, ``harness static
resume``): SIGINT/SIGTERM end the run after the last committed snapshot (exit 130); a snapshot
whose every provider attempt failed for an infrastructure reason (a rejected key, a quota, no
connection) is never committed - it measured an outage, not a policy - and the run stops with
``ProviderOutageError`` (exit 75). Resume reads the identity from the genesis, takes only the
credential from the flags, and continues from the verified prefix; policies hold no state
across snapshots, so a resumed run's results equal an uninterrupted run's.

Frozen inputs: the benchmark must match its pinned manifest; the generation config is the
study's default; the full-trace critic's seed is 2705; the critic core's model path would use
seed ``CRITIC_CORE_SEED``, but on the static grid it must never be reached: every critic-core
decision must come from a deterministic fast path, or the run stops with
``FastPathInvariantError`` (a silent change of the comparison's information regime).

This module runs the study and writes records; it computes no endpoint (``report``).
"""

from __future__ import annotations

import dataclasses
import shlex
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TextIO

import msgspec
import trio

from harness.benchmark.build import Benchmark, benchmark
from harness.benchmark.manifest import check_manifest
from harness.errors import (
    BreakerTrippedError,
    FastPathInvariantError,
    ProviderSelectionError,
    StaticStudyError,
    StoreExistsError,
    TamperError,
)
from harness.faults import STATIC_FAULTS
from harness.lock import DEFAULT_LOCK_PATH, read_lock_bytes
from harness.log import get_logger
from harness.policies import (
    Ablation,
    CompletionToken,
    CriticCore,
    DecisionSource,
    EctPolicy,
    FullTraceCritic,
    ModelPolicy,
    PermissiveHeuristic,
    Policy,
    PolicyDecision,
    PostconditionOracle,
    SelfCheck,
)
from harness.providers.attempts import AttemptRecord, Audit
from harness.providers.config import (
    FULL_TRACE_CRITIC_SEED,
    GenerationConfig,
    config_digest,
    default_generation_config,
)
from harness.providers.kinds import ProviderName
from harness.providers.pacing import Pacing, paced
from harness.providers.protocol import Provider
from harness.providers.selection import (
    ProviderFlags,
    ProviderSelection,
    open_provider,
    provider_identity,
    run_price,
    selection_for_resume,
)
from harness.resources import data_path
from harness.stopping import request_stop
from harness.store import RunStore, finalize_store, read_store, verify_store
from harness.studies._cost import CallPlan, announce, estimate
from harness.studies._store_audit import (
    Breaker,
    StoreAudit,
    outage,
    raise_if_stopped,
    refuse_key,
)
from harness.studies._store_audit import resume_command as shared_resume_command
from harness.studies.progress import Progress, priced
from harness.studies.provenance import session_environment
from harness.studies.report_manifest import remove_partial_report
from harness.studies.static.records import (
    REPORT_DIR,
    REPORT_FILES,
    DecisionRecord,
    StaticCellResult,
    StaticIdentity,
    StudySplit,
    decode_identity,
    snapshot_rows,
)
from harness.worlds.snapshots import FaultId, Snapshot

__all__ = [
    "ABLATION_POLICIES",
    "ABLATION_TARGETS",
    "CRITIC_CORE_SEED",
    "MAIN_POLICIES",
    "POLICY_LABELS",
    "STUDY_SPLITS",
    "DecisionRecord",
    "STATIC_PROFILE",
    "RunControls",
    "StaticOutcome",
    "decide_all",
    "decide_snapshot",
    "resume_command",
    "resume_static",
    "run_static",
    "study_policies",
    "study_snapshots",
]

_log = get_logger("harness.studies.static")
_PLAIN: Final = msgspec.json.Decoder(dict[str, Any])

STUDY_SPLITS: Final[tuple[StudySplit, ...]] = ("heldout", "dev")

CRITIC_CORE_SEED: Final = 1
"""Seed of the critic core's model path in the static study (one decision per snapshot)."""

MAIN_POLICIES: Final = (
    "completion_token",
    "self_check",
    "heuristic",
    "critic_core",
    "full_trace_critic",
    "postcondition_oracle",
    "ect",
)
"""The seven policies of Table 2, in table order."""

ABLATION_POLICIES: Final = tuple(EctPolicy(a).name for a in Ablation)
"""ECT with one check family removed, in Table 3 order."""

POLICY_LABELS: Final[Mapping[str, str]] = {
    "completion_token": "Completion",
    "self_check": "Self-check",
    "heuristic": "Heuristic",
    "critic_core": "Critic core",
    "full_trace_critic": "Full-trace critic",
    "postcondition_oracle": "Postcondition oracle",
    "ect": "ECT",
}
"""Table 2 row labels."""

ABLATION_TARGETS: Final[Mapping[Ablation, tuple[FaultId | None, Literal["U", "S"]]]] = {
    Ablation.CLAIM_COVERAGE: ("F5", "U"),
    Ablation.TASK_SCOPE: ("F4", "U"),
    Ablation.OUTCOME_VALIDATION: ("F3", "U"),
    Ablation.LEDGER_REFERENCE: ("F7", "U"),
    Ablation.VALUE_REPLAY: ("F6", "U"),
    Ablation.EXACT_TRANSFORM: (None, "U"),
    Ablation.RECOVERY_CHECK: ("F8", "S"),
}
"""Each ablation's matched fault (None: no matched fault in the grid) and the endpoint whose
count it changes (U unsafe complete, S stuck)."""


AnyPolicy = Policy | ModelPolicy


def study_policies(
    provider: Provider,
    audit: Audit,
    config: GenerationConfig,
    gold: Mapping[str, Mapping[str, Any]],
) -> list[AnyPolicy]:
    """The fourteen policies of a static run, in record order (Table 2, then Table 3)."""
    policies: list[AnyPolicy] = [
        CompletionToken(),
        SelfCheck(),
        PermissiveHeuristic(),
        CriticCore(provider, audit, config, seed=CRITIC_CORE_SEED),
        FullTraceCritic(provider, audit, config),
        PostconditionOracle(gold),
        EctPolicy(),
    ]
    policies.extend(EctPolicy(a) for a in Ablation)
    assert tuple(p.name for p in policies) == (*MAIN_POLICIES, *ABLATION_POLICIES)
    return policies


def study_snapshots(bench: Benchmark, split: StudySplit) -> tuple[Snapshot, ...]:
    """The split's static snapshots in canonical order (task by task, C0 then F1..F8)."""
    snapshots = tuple(s for s in bench.static if s.split == split)
    assert all(s.fault in ("C0", *STATIC_FAULTS) for s in snapshots)
    return snapshots


def _record(snapshot: Snapshot, policy: str, decided: PolicyDecision) -> DecisionRecord:
    return DecisionRecord(
        policy=policy,
        snapshot_id=snapshot.snapshot_id,
        task_id=snapshot.task_id,
        world_id=snapshot.descriptor.world_id,
        family=snapshot.descriptor.family,
        fault=snapshot.fault,
        split=snapshot.split,
        gold_decision=snapshot.gold_decision,
        decision=decided.decision,
        reason_codes=decided.reason_codes,
        source=decided.source,
        attempt_ids=decided.attempt_ids,
    )


async def _decide(policy: AnyPolicy, snapshot: Snapshot) -> PolicyDecision:
    result = policy.decide(snapshot.view())
    if isinstance(result, PolicyDecision):
        return result
    return await result


async def decide_snapshot(
    snapshot: Snapshot, policies: Sequence[AnyPolicy]
) -> tuple[DecisionRecord, ...]:
    """Every policy's decision on ``snapshot``'s blinded view, in order, with its labels.

    Raises:
        FastPathInvariantError: when the critic core needed its model on the snapshot.
    """
    records = []
    for policy in policies:
        decided = await _decide(policy, snapshot)
        if isinstance(policy, CriticCore) and decided.source is not DecisionSource.FAST_PATH:
            raise FastPathInvariantError(
                f"the critic core needed its model on {snapshot.snapshot_id}: every static "
                "snapshot must be decided by a deterministic fast path"
            )
        records.append(_record(snapshot, policy.name, decided))
    return tuple(records)


async def decide_all(
    snapshots: Sequence[Snapshot],
    policies: Sequence[AnyPolicy],
    *,
    emit: Callable[[DecisionRecord], None],
    advance: Callable[[], None] = lambda: None,
) -> int:
    """Let every policy decide on every snapshot's blinded view, in order (no store).

    Args:
        snapshots: the grid (labels stay here; policies get ``snapshot.view()`` only).
        policies: from ``study_policies`` (or any policies with distinct names).
        emit: receives each record as soon as its snapshot is decided.
        advance: called once per finished snapshot (progress).

    Returns:
        The number of records emitted.

    Raises:
        FastPathInvariantError: when the critic core needed its model on a snapshot.
    """
    count = 0
    for snapshot in snapshots:
        for record in await decide_snapshot(snapshot, policies):
            emit(record)
            count += 1
        advance()
    return count


def resume_command(store_dir: Path, selection: ProviderSelection, lock_path: Path | None) -> str:
    """The exact command that continues ``store_dir`` (``harness static resume ...``)."""
    return shared_resume_command("static", store_dir, selection, lock_path)


def _close(provider: Provider) -> None:
    # The protocol has no close; the Gemini provider holds HTTP connections that it closes.
    close = getattr(provider, "close", None)
    if callable(close):
        close()


ProgressFactory = Callable[[int, int, bool], Progress]
"""Given the number of snapshots, those already committed and whether the run's cost is known,
returns the progress line (``harness.studies.progress.Progress``, the one both studies draw)
the run reports to."""


@dataclass(frozen=True)
class StaticOutcome:
    """What a run or resume did. ``complete``: resume found the store already finalized."""

    store: Path
    provider: str
    snapshots: int
    done: int
    committed: int
    decisions: int
    attempts: int
    manifest: str | None
    orphaned_attempts: int = 0
    complete: bool = False


@dataclass(frozen=True)
class RunControls:
    """How a real-provider run is asked for and kept in bounds (the same as V2's).

    Attributes:
        breaker_limit: the circuit breaker's K (consecutive infrastructure failures that stop
            the run; the command line passes the frozen V2 config's value).
        confirm: asked after the cost estimate whether to go on (None: go on).
        stream: where the estimate goes; ``show``: print it (not with -q, unless asked).
        pacing: ``--max-rpm``/``--max-tpm``.
    """

    breaker_limit: int = 5
    confirm: Callable[[Sequence[str]], bool] | None = None
    stream: TextIO | None = None
    show: bool = False
    pacing: Pacing = field(default_factory=Pacing)


STATIC_PROFILE: Final = CallPlan(calls=(1, 1.0, 2), prompt_tokens=(595, 1149.5, 5070),
                                 output_tokens=(16, 18.6, 60), output_budget=0)  # fmt: skip
"""Per snapshot: the full-trace critic's one call (two with its pre-output retry), its prompt
and output tokens (min, mean, max), measured on a simulated heldout run (324 snapshots: the
simulated provider counts characters / chars_per_token, the sizes a real model is sent; the
maximum doubled for the retry). The critic core decides every static snapshot on its fast path
(``FastPathInvariantError`` otherwise) and asks no model."""


def _announce(
    selection: ProviderSelection, config: GenerationConfig, remaining: int, controls: RunControls
) -> None:
    """The cost estimate and the question before a real provider's first call.

    Raises:
        RunDeclinedError: the user said no; nothing was written.
    """
    if selection.provider is ProviderName.SIMULATED or remaining == 0:
        return
    plan = dataclasses.replace(STATIC_PROFILE, output_budget=config.gemini.critic.max_output_tokens)
    guess = estimate(
        [plan] * remaining,
        run_price(selection, config),
        unit="snapshot",
        max_cells=1,
        max_rpm=controls.pacing.max_rpm,
        max_tpm=controls.pacing.max_tpm,
    )
    stream = controls.stream if controls.stream is not None else sys.stderr
    announce(guess, stream, show=controls.show, confirm=controls.confirm)


class _StoreAudit(StoreAudit):
    """The run store as the critics' attempt journal and blob sink; ``ended`` collects the
    snapshot's ended attempts: its audit group."""

    def __init__(self, store: RunStore, breaker: Breaker) -> None:
        super().__init__(store, breaker)
        self.breaker = breaker
        self.ended: list[AttemptRecord] = []

    def end(self, record: AttemptRecord) -> None:
        """Journal how an attempt ended, and keep it for the snapshot's audit group."""
        super().end(record)
        self.ended.append(record)


@dataclass
class _Session:
    committed: int = 0
    decisions: int = 0
    attempts: int = 0
    stopped_by: str | None = None
    outage: str | None = None


async def _commit_snapshots(
    writer: RunStore,
    snapshots: Sequence[Snapshot],
    policies: Sequence[AnyPolicy],
    sink: _StoreAudit,
    session: _Session,
    line: Progress | None,
    handle_signals: bool,
) -> None:
    """Decide and commit every snapshot from the store's next row on, in order."""

    async def watch(scope: trio.CancelScope, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
            task_status.started()
            async for signum in received:
                session.stopped_by = signal.Signals(signum).name
                request_stop()
                _log.warning("static.stop_requested", signal=session.stopped_by)
                scope.cancel()

    async with trio.open_nursery() as nursery:
        if handle_signals:
            await nursery.start(watch, nursery.cancel_scope)
        for index in range(writer.next_row_index, len(snapshots)):
            snapshot = snapshots[index]
            if line is not None:
                line.start(snapshot.snapshot_id)
            sink.ended.clear()
            try:
                decisions = await decide_snapshot(snapshot, policies)
            except BreakerTrippedError:
                decisions = ()
            attempts = list(sink.ended)
            if sink.breaker.tripped is not None:
                # K consecutive infrastructure failures: the snapshot in flight is dropped
                # (its attempts are journaled; resume binds them) and the run stops.
                session.outage = sink.breaker.tripped
                break
            why = outage(attempts)
            if why is not None:
                session.outage = (
                    f"every provider attempt on {snapshot.snapshot_id} failed for an "
                    f"infrastructure reason ({why})"
                )
                break
            result = StaticCellResult(snapshot_id=snapshot.snapshot_id, decisions=decisions)
            # As plain JSON (lists, no tuples): the store's fast check then needs no walk. A
            # decision record holds no float, so the JSON round trip cannot hide a NaN.
            writer.commit_cell(index, _PLAIN.decode(msgspec.json.encode(result)), attempts)
            session.committed += 1
            session.decisions += len(decisions)
            session.attempts += len(attempts)
            if line is not None:
                _show(line, attempts)
            await trio.lowlevel.checkpoint()  # lets a pending signal stop the run here
        nursery.cancel_scope.cancel()


def _show(line: Progress, attempts: Sequence[AttemptRecord]) -> None:
    """One committed snapshot on the progress line: its attempts, their tokens and cost."""
    line.finish(
        provider_calls=len(attempts),
        tokens=sum(
            (a.usage.prompt_tokens or 0)
            + (a.usage.output_tokens or 0)
            + (a.usage.thought_tokens or 0)
            for a in attempts
        ),
        cost_usd=sum(a.cost_usd or 0.0 for a in attempts),
    )


def _model(selection: ProviderSelection, config: GenerationConfig) -> str:
    if selection.provider is ProviderName.SIMULATED:
        return config.simulated.model
    return selection.model if selection.model is not None else config.gemini.model


def _drive(
    writer: RunStore,
    *,
    snapshots: Sequence[Snapshot],
    selection: ProviderSelection,
    provider: Provider,
    config: GenerationConfig,
    gold: Mapping[str, Mapping[str, Any]],
    lock_path: Path | None,
    progress: ProgressFactory | None,
    handle_signals: bool,
    orphans: int,
    breaker_limit: int,
) -> StaticOutcome:
    """Run the remaining snapshots into ``writer``; finalize when all are committed."""
    store_dir = writer.root
    refuse_key(writer, provider)
    session = _Session()
    line = (
        progress(len(snapshots), writer.next_row_index, priced(selection, config))
        if progress is not None
        else None
    )
    sink = _StoreAudit(writer, Breaker(breaker_limit, line))
    policies = study_policies(provider, Audit(journal=sink, blobs=sink), config, gold)
    try:
        try:
            trio.run(
                _commit_snapshots,
                writer,
                snapshots,
                policies,
                sink,
                session,
                line,
                handle_signals,
            )
        except BaseExceptionGroup as group:
            # The nursery wraps what a snapshot raised (a fast-path breach, a failed
            # fsync); callers see that one error itself.
            leaf: BaseException = group
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            if leaf is group:
                raise
            raise leaf from None
        finally:
            if line is not None:
                line.close()
        done = writer.next_row_index
    finally:
        writer.close()
    again = resume_command(store_dir, selection, lock_path)
    raise_if_stopped(
        outage=session.outage,
        stopped_by=session.stopped_by if done < len(snapshots) else None,
        done=done,
        total=len(snapshots),
        committed=session.committed,
        unit="snapshot",
        again=again,
    )
    manifest = finalize_store(store_dir, len(snapshots))
    _log.debug("static.run", store=str(store_dir), committed=session.committed)
    return StaticOutcome(
        store=store_dir,
        provider=selection.provider.value,
        snapshots=len(snapshots),
        done=done,
        committed=session.committed,
        decisions=session.decisions,
        attempts=session.attempts,
        manifest=manifest,
        orphaned_attempts=orphans,
    )


def _supersede_partial_report(store_dir: Path) -> None:
    """Remove a report written on this store while it was partial: resume makes it stale."""
    made = remove_partial_report(store_dir / REPORT_DIR, REPORT_FILES)
    if made is not None:
        _log.warning("static.partial_report_removed", store=str(store_dir), cells=made)


def _refuse_existing(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if (out / "records.log").exists():
            raise StoreExistsError(
                f"{out} already holds a run store; continue it with `harness static resume "
                f"{shlex.quote(str(out))}` or choose another --out"
            )
        what = "is not a directory" if not out.is_dir() else "exists and is not empty"
        raise StoreExistsError(
            f"{out} {what}; a run never writes into one - choose another --out or remove it"
        )


def run_static(
    out: Path,
    *,
    split: StudySplit,
    selection: ProviderSelection,
    lock_path: Path | None = None,
    progress: ProgressFactory | None = None,
    handle_signals: bool = True,
    controls: RunControls | None = None,
    require_environment: bool = False,
) -> StaticOutcome:
    """Run the static study into a new store at ``out`` and finalize it.

    Args:
        out: a new or empty directory.
        split: ``heldout`` (the study) or ``dev`` (development).
        selection: which provider answers model calls (no planner plug-in).
        lock_path: the study lock genesis binds (default: ``schedules/study-lock.json``).
        progress: see ``ProgressFactory``.
        handle_signals: stop cleanly on SIGINT/SIGTERM (needs the main thread).
        controls: the cost question, the circuit breaker, pacing (``RunControls``).
        require_environment: refuse to start when the environment differs from the lock's
            reference (otherwise it is only recorded, in genesis).

    Raises:
        StoreExistsError: when ``out`` exists and is not empty (checked first).
        EnvironmentMismatchError: ``require_environment`` and the environment differs.
        RunDeclinedError: the user declined at the cost estimate; nothing was written.
        ProviderSelectionError: a planner plug-in was given (the static study has no planner).
        ManifestMismatchError: when the benchmark differs from its pinned manifest.
        CredentialError: when the credential source is unusable.
        ProviderOutageError: a snapshot measured only an outage (exit 75; resumable).
        RunStoppedError: SIGINT or SIGTERM stopped the run (exit 130; resumable).
        FastPathInvariantError: the critic core needed its model on a snapshot (the store is
            left unfinalized).
    """
    _refuse_existing(out)
    if selection.planner is not None:
        # The static study has no planner: its snapshots are fixed, only critics are asked.
        raise ProviderSelectionError("--planner applies only to harness v2 run")
    lock = lock_path or data_path(DEFAULT_LOCK_PATH)
    lock_bytes = read_lock_bytes(lock)
    environment = session_environment(
        lock_bytes, str(lock), resume_of=None, require=require_environment
    )
    bench = benchmark()
    manifest = check_manifest(bench)
    snapshots = study_snapshots(bench, split)
    config = default_generation_config()
    identity = StaticIdentity(
        split=split,
        provider=provider_identity(selection, config),
        model=_model(selection, config),
        manifest_digest=manifest.digest,
        policies=(*MAIN_POLICIES, *ABLATION_POLICIES),
        critic_core_seed=CRITIC_CORE_SEED,
        full_trace_critic_seed=FULL_TRACE_CRITIC_SEED,
    )
    controls = controls or RunControls()
    provider = open_provider(selection)
    try:
        # After the credential is read, before anything is written or asked of the model.
        _announce(selection, config, len(snapshots), controls)
        writer = RunStore.create(
            out,
            lock_bytes,
            snapshot_rows(snapshots),
            result_type=StaticCellResult,
            attempt_type=AttemptRecord,
            identity=msgspec.to_builtins(identity),
            environment=environment,
        )
        return _drive(
            writer,
            snapshots=snapshots,
            selection=selection,
            provider=paced(provider, controls.pacing),
            config=config,
            gold={t.task_id: t.gold for t in bench.tasks if t.split == split},
            lock_path=lock_path,
            progress=progress,
            handle_signals=handle_signals,
            orphans=0,
            breaker_limit=controls.breaker_limit,
        )
    finally:
        _close(provider)


def resume_static(
    store_dir: Path,
    *,
    flags: ProviderFlags,
    lock_path: Path | None = None,
    progress: ProgressFactory | None = None,
    handle_signals: bool = True,
    controls: RunControls | None = None,
    require_environment: bool = False,
) -> StaticOutcome:
    """Continue a static store from its verified prefix and finalize it.

    The split, provider, model, endpoint and generation config come from the store's genesis;
    only the credential comes from ``flags``. A finalized store is reported complete and
    nothing is written. The session's environment is recorded in its journal entry;
    ``require_environment`` refuses to start when it differs from the lock's reference or
    an earlier session's.

    Raises:
        StoreNotFoundError: no store at ``store_dir``.
        StudyKindError: the store is not a static study's.
        ProviderSelectionError: a flag contradicts the store's identity.
        StaticStudyError: the generation config or benchmark changed since the store began.
        TamperError, LockMismatchError, ScheduleMismatchError: the store refuses resume.
        ProviderOutageError, RunStoppedError, FastPathInvariantError: as ``run_static``.
    """
    report = verify_store(store_dir)
    view = read_store(store_dir)
    if view.genesis is None:  # only tamper leaves a store without one (exit 3)
        raise TamperError(
            f"store {store_dir} fails verification ({view.report.code}): {view.report.reason}; "
            "resume refused"
        )
    identity = decode_identity(dict(view.genesis.identity), str(store_dir))
    config = default_generation_config()
    selection = selection_for_resume(flags, identity.provider, config, str(store_dir))
    if report.finalized and report.cells == report.schedule_rows:
        return StaticOutcome(
            store=store_dir,
            provider=identity.provider.provider.value,
            snapshots=report.schedule_rows,
            done=report.cells,
            committed=0,
            decisions=0,
            attempts=0,
            manifest=report.manifest_digest,
            complete=True,
        )
    if config_digest(config) != identity.provider.generation_config_digest:
        raise StaticStudyError(
            f"store {store_dir} was run with generation config "
            f"{identity.provider.generation_config_digest}; this harness's is "
            f"{config_digest(config)} (a changed config is a different run: start a new store)"
        )
    bench = benchmark()
    manifest = check_manifest(bench)
    if manifest.digest != identity.manifest_digest:
        raise StaticStudyError(
            f"store {store_dir} was run on benchmark {identity.manifest_digest}; this one is "
            f"{manifest.digest}: start a new store"
        )
    snapshots = study_snapshots(bench, identity.split)
    lock = lock_path or data_path(DEFAULT_LOCK_PATH)
    lock_bytes = read_lock_bytes(lock)
    environment = session_environment(
        lock_bytes, str(lock), resume_of=store_dir, require=require_environment
    )
    controls = controls or RunControls()
    provider = open_provider(selection)
    try:
        _announce(selection, config, len(snapshots) - report.cells, controls)
        resumed = RunStore.open_for_resume(
            store_dir,
            lock_bytes,
            snapshot_rows(snapshots),
            result_type=StaticCellResult,
            attempt_type=AttemptRecord,
            environment=environment,
        )
    except BaseException:
        _close(provider)
        raise
    try:
        _supersede_partial_report(store_dir)
    except BaseException:
        resumed.writer.close()
        _close(provider)
        raise
    try:
        return _drive(
            resumed.writer,
            snapshots=snapshots,
            selection=selection,
            provider=paced(provider, controls.pacing),
            config=config,
            gold={t.task_id: t.gold for t in bench.tasks if t.split == identity.split},
            lock_path=lock_path,
            progress=progress,
            handle_signals=handle_signals,
            orphans=len(resumed.orphaned_attempts),
            breaker_limit=controls.breaker_limit,
        )
    finally:
        _close(provider)
