"""The static study runner: seven termination policies and the ECT ablations over the grid.

For every snapshot of the chosen split (held out by default: 36 tasks x clean + F1..F8 = 324
snapshots) every policy decides on the snapshot's blinded view, in a fixed order: the seven
policies of the paper's Table 2, then ECT with each single check family removed (Table 3). One
``DecisionRecord`` per (policy, snapshot) goes to decisions.jsonl; the scoring labels (fault,
split, gold decision, family, world) are attached by the runner *after* the policy decided and
never reach a policy. Provider attempts and raw responses go to attempts.jsonl and blobs/;
run.json is written last.

Frozen inputs: the benchmark must match its pinned manifest; the generation config is the
study's default; the full-trace critic's seed is 2705; the critic core's model path would use
seed ``CRITIC_CORE_SEED``, but on the static grid it must never be reached: every critic-core
decision must come from a deterministic fast path, or the run stops with
``FastPathInvariantError`` (a silent change of the comparison's information regime).

This module runs the study and writes records; it computes no endpoint (``static_report``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import msgspec
import trio

from harness.benchmark.build import Benchmark, benchmark
from harness.benchmark.manifest import check_manifest
from harness.ect.model import Verdict
from harness.errors import FastPathInvariantError
from harness.faults import STATIC_FAULTS
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
from harness.providers.audit import Audit
from harness.providers.config import (
    FULL_TRACE_CRITIC_SEED,
    GenerationConfig,
    config_digest,
    default_generation_config,
)
from harness.providers.kinds import ProviderName
from harness.providers.protocol import Provider
from harness.providers.selection import ProviderSelection, open_provider
from harness.studies.static.records import RunWriter, check_out_dir
from harness.worlds.snapshots import FaultId, GoldDecision, Snapshot
from harness.worlds.world import Split

__all__ = [
    "ABLATION_POLICIES",
    "ABLATION_TARGETS",
    "CRITIC_CORE_SEED",
    "MAIN_POLICIES",
    "POLICY_LABELS",
    "STUDY_SPLITS",
    "DecisionRecord",
    "Progress",
    "RunInfo",
    "decide_all",
    "default_out",
    "run_static",
    "study_policies",
    "study_snapshots",
]

_log = get_logger("harness.studies.static")

StudySplit = Literal["heldout", "dev"]
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


class DecisionRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One line of decisions.jsonl: a policy's decision on one snapshot, with its labels.

    The labels (``fault`` .. ``gold_decision``) are scoring data attached by the runner; the
    policy decided without them.
    """

    schema_version: Literal[1] = 1
    policy: str
    snapshot_id: str
    task_id: str
    world_id: str
    family: str
    fault: FaultId
    split: Split
    gold_decision: GoldDecision
    decision: Verdict
    reason_codes: tuple[str, ...]
    source: DecisionSource
    attempt_ids: tuple[str, ...]


class RunInfo(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """run.json: what was run, on what, with which frozen inputs, and the digests of the files.

    The generation config is kept as plain JSON (with its digest), so a report can still read
    a run made before the config type gained a field.
    """

    schema_version: Literal[1] = 1
    study: Literal["static"] = "static"
    split: StudySplit
    provider: ProviderSelection
    simulated: bool
    model: str
    generation_config: dict[str, Any]
    config_digest: str
    manifest_digest: str
    policies: tuple[str, ...]
    snapshots: int
    records: int
    attempts: int
    critic_core_seed: int
    full_trace_critic_seed: int
    files: dict[str, str]


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


async def decide_all(
    snapshots: Sequence[Snapshot],
    policies: Sequence[AnyPolicy],
    *,
    emit: Callable[[DecisionRecord], None],
    advance: Callable[[], None] = lambda: None,
) -> int:
    """Let every policy decide on every snapshot's blinded view, in order.

    Args:
        snapshots: the grid (labels stay here; policies get ``snapshot.view()`` only).
        policies: from ``study_policies`` (or any policies with distinct names).
        emit: receives each record as soon as it exists.
        advance: called once per finished snapshot (progress).

    Returns:
        The number of records emitted.

    Raises:
        FastPathInvariantError: when the critic core needed its model on a snapshot.
    """
    count = 0
    for snapshot in snapshots:
        for policy in policies:
            decided = await _decide(policy, snapshot)
            if isinstance(policy, CriticCore) and decided.source is not DecisionSource.FAST_PATH:
                raise FastPathInvariantError(
                    f"the critic core needed its model on {snapshot.snapshot_id}: every static "
                    "snapshot must be decided by a deterministic fast path"
                )
            emit(_record(snapshot, policy.name, decided))
            count += 1
        advance()
    return count


def default_out(split: StudySplit, selection: ProviderSelection, config: GenerationConfig) -> Path:
    """``stores/static-<split>-<provider>-<12 hex of the config digest>`` (deterministic)."""
    short = config_digest(config).removeprefix("blake3:")[:12]
    return Path("stores") / f"static-{split}-{selection.provider.value}-{short}"


def _close(provider: Provider) -> None:
    # The protocol has no close; the Gemini provider holds HTTP connections that it closes.
    close = getattr(provider, "close", None)
    if callable(close):
        close()


class Progress(Protocol):
    """What the runner reports progress to (``click.progressbar`` satisfies it)."""

    def update(self, n_steps: int) -> None:
        """Advance by ``n_steps`` snapshots."""
        ...


def run_static(
    out: Path,
    *,
    split: StudySplit,
    selection: ProviderSelection,
    progress: Callable[[int], AbstractContextManager[Progress]] | None = None,
) -> RunInfo:
    """Run the static study into ``out`` and return what run.json says.

    Args:
        out: a new or empty directory.
        split: ``heldout`` (the study) or ``dev`` (development).
        selection: which provider answers model calls.
        progress: given the number of snapshots, returns a context manager whose value is
            advanced once per finished snapshot (e.g. ``click.progressbar(length=...)``).

    Raises:
        RunDirectoryExistsError: when ``out`` exists and is not empty (checked first).
        ManifestMismatchError: when the benchmark differs from its pinned manifest.
        CredentialError: when the gemini credential source is unusable.
        FastPathInvariantError: when the critic core needed its model on a snapshot (the
            directory is left without run.json, as an interrupted run).
    """
    check_out_dir(out)
    bench = benchmark()
    manifest = check_manifest(bench)
    snapshots = study_snapshots(bench, split)
    config = default_generation_config()
    simulated = selection.provider is ProviderName.SIMULATED
    provider = open_provider(selection)
    gold = {t.task_id: t.gold for t in bench.tasks if t.split == split}
    writer = RunWriter(out, durable=not simulated)
    try:
        policies = study_policies(provider, Audit(journal=writer, blobs=writer), config, gold)
        attempts = 0

        def emit(record: DecisionRecord) -> None:
            nonlocal attempts
            attempts += len(record.attempt_ids)
            writer.decision(record)

        with progress(len(snapshots)) if progress is not None else nullcontext() as bar:
            advance = (lambda: bar.update(1)) if bar is not None else (lambda: None)
            records = trio.run(lambda: decide_all(snapshots, policies, emit=emit, advance=advance))
        model = (
            config.simulated.model
            if simulated
            else selection.model
            if selection.model is not None
            else config.gemini.model
        )
        info = writer.finish(
            lambda files: RunInfo(
                split=split,
                provider=selection,
                simulated=simulated,
                model=model,
                generation_config=msgspec.to_builtins(config),
                config_digest=config_digest(config),
                manifest_digest=manifest.digest,
                policies=tuple(p.name for p in policies),
                snapshots=len(snapshots),
                records=records,
                attempts=attempts,
                critic_core_seed=CRITIC_CORE_SEED,
                full_trace_critic_seed=FULL_TRACE_CRITIC_SEED,
                files=files,
            )
        )
    finally:
        writer.close()
        _close(provider)
    _log.debug("static.run", out=str(out), split=split, records=records, attempts=attempts)
    return info
