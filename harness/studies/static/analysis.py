"""The static study's analysis: load a run's records and recompute every endpoint and H1.

``load_run`` reads a static run store back through verification (``harness.store.read_store``)
and refuses a tampered store (with its verify code), a store of another study, and records
that are not one decision per policy and committed snapshot with consistent labels, every
cited provider attempt in the snapshot's audit group. A store that is not finalized (an
interrupted run) loads as *partial*: its committed snapshots only, and the report says so.

``analyze`` recomputes everything from the records (the
endpoints, breakdowns, unsupported claims, provider usage, H1 and the Table 3 ablations; see
``harness.studies.static.report`` for what each means and how it is rendered).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

import msgspec
import numpy as np

from harness.analysis import (
    BootstrapInterval,
    cluster_bootstrap_difference,
    macro_f1,
    mcnemar_exact,
)
from harness.ect.model import Verdict
from harness.ect.reasons import ReasonCode, family_of
from harness.environment import describe_store
from harness.errors import RunRecordsError, TamperError
from harness.faults import FAULTS, STATIC_FAULTS
from harness.log import get_logger
from harness.policies import Ablation, PolicyReason, attempt_id
from harness.providers.attempts import AttemptRecord
from harness.run_identity import RunIdentity, read_identity
from harness.store import VerifyStatus, read_store
from harness.studies.static.records import (
    DecisionRecord,
    StaticCellResult,
    StaticIdentity,
    decode_identity,
)
from harness.studies.static.run import (
    ABLATION_POLICIES,
    ABLATION_TARGETS,
    MAIN_POLICIES,
    POLICY_LABELS,
)

_log = get_logger("harness.studies.static")

__all__ = [
    "ABLATION_LABELS",
    "ALPHA",
    "CLAIM_FAULTS",
    "CLEAN_FAULT",
    "REPLICATES",
    "TASK_BOOTSTRAP_SEED",
    "UNSUPPORTED_BOOTSTRAP_SEED",
    "UCR_BOOTSTRAP_SEED",
    "WORLD_BOOTSTRAP_SEED",
    "ENDPOINT_NAMES",
    "RECOVERABLE_FAULTS",
    "AblationRow",
    "H1Result",
    "PolicyRow",
    "ProviderUsage",
    "SecondaryRow",
    "StaticResults",
    "StaticRun",
    "UnsupportedClaims",
    "analyze",
    "label_of",
    "load_run",
]

REPLICATES: Final = 10_000
TASK_BOOTSTRAP_SEED: Final = 5101
"""Seed of H1's task-cluster bootstrap."""
WORLD_BOOTSTRAP_SEED: Final = 5102
"""Seed of H1's world-cluster sensitivity bootstrap."""
UCR_BOOTSTRAP_SEED: Final = 5103
"""Seed of the per-policy UCR intervals in the figure."""
UNSUPPORTED_BOOTSTRAP_SEED: Final = 5104
"""Seed of the per-policy intervals of unsupported claims accepted."""
ALPHA: Final = 0.05

CLAIM_FAULTS: Final = ("F1", "F2", "F3", "F4", "F5", "F6", "F7")
"""Fault snapshots whose agent claims completion without support (F8's has not answered)."""

CLEAN_FAULT: Final = "C0"
RECOVERABLE_FAULTS: Final = tuple(f for f in STATIC_FAULTS if "recovery" in FAULTS[f].changes)
"""Fault snapshots whose recovery state names an available recovery (F8): a ``stuck`` there is
a *recoverable stuck*, a stop while the agent could still have obtained the evidence."""
ENDPOINT_NAMES: Final = ("U", "C", "S", "recoverable stuck", "extra calls")
"""Every endpoint the static report breaks down by fault and family, in its column order."""
_ENDPOINTS: Final[tuple[Literal["U", "S"], ...]] = ("U", "S")
_VERIFIER_CODES: Final = frozenset(code.value for code in ReasonCode)
ABLATION_LABELS: Final = {
    Ablation.CLAIM_COVERAGE: "Claim coverage",
    Ablation.TASK_SCOPE: "Task/scope",
    Ablation.OUTCOME_VALIDATION: "Outcome/validation",
    Ablation.LEDGER_REFERENCE: "Ledger/reference",
    Ablation.VALUE_REPLAY: "Value replay",
    Ablation.EXACT_TRANSFORM: "Exact transform",
    Ablation.RECOVERY_CHECK: "Recovery check",
}


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    """Base of result types."""


# ---------------------------------------------------------------------------------------------
# Loading


class StaticRun(msgspec.Struct, frozen=True, kw_only=True):
    """A checked static store: its identity, the decision records and the attempts by id.

    ``partial`` is true when the store is not finalized (``cells`` of ``expected`` snapshots
    committed).
    """

    info: StaticIdentity
    records: tuple[DecisionRecord, ...]
    attempts: dict[str, AttemptRecord]
    cells: int
    expected: int
    partial: bool
    run: RunIdentity
    environment: str = ""  # what produced the store: harness.environment.describe_store


def load_run(store_dir: Path) -> StaticRun:
    """Read and check a static run store.

    Raises:
        StoreNotFoundError: no store at ``store_dir``.
        TamperError: the store fails verification for a reason no crash explains (exit 3,
            naming the verify code).
        StudyKindError: the store is not a static study's.
        RunRecordsError: naming the first record that is malformed or inconsistent.
    """
    view = read_store(store_dir)
    report = view.report
    if report.status is VerifyStatus.TAMPER:
        raise TamperError(
            f"store {store_dir} fails verification (tamper, {report.code}): {report.reason}; "
            "no report is made from it"
        )
    if view.genesis is None:
        raise RunRecordsError(f"store {store_dir} has no verified genesis record")
    info = decode_identity(dict(view.genesis.identity), str(store_dir))
    records: list[DecisionRecord] = []
    attempts: dict[str, AttemptRecord] = {}
    for cell in view.cells:
        try:
            result = msgspec.convert(cell.result, StaticCellResult, strict=True)
            group = [msgspec.convert(a, AttemptRecord, strict=True) for a in cell.audit]
        except msgspec.ValidationError as e:
            raise RunRecordsError(
                f"{store_dir}: record {cell.seq} holds no static cell result ({e})"
            ) from e
        if result.snapshot_id != cell.row.get("snapshot_id"):
            raise RunRecordsError(
                f"{store_dir}: record {cell.seq} decides {result.snapshot_id}, its row "
                f"{cell.row.get('snapshot_id')}"
            )
        ids = {attempt_id(a): a for a in group}
        cited = {aid for r in result.decisions for aid in r.attempt_ids}
        if cited != set(ids):
            raise RunRecordsError(
                f"{store_dir}: record {cell.seq} cites {len(cited)} provider attempt(s), its "
                f"audit group holds {len(ids)}"
            )
        records.extend(result.decisions)
        attempts.update(ids)
    partial = not report.finalized or report.cells < report.schedule_rows
    run = StaticRun(
        environment=describe_store(view),
        info=info,
        records=tuple(records),
        attempts=attempts,
        cells=report.cells,
        expected=report.schedule_rows,
        partial=partial,
        run=read_identity(view, unit="snapshots"),
    )
    if not run.records:
        raise RunRecordsError(f"store {store_dir} holds no committed snapshot yet")
    _check(run)
    return run


def _check(run: StaticRun) -> None:
    info, records = run.info, run.records
    wanted = (*MAIN_POLICIES, *ABLATION_POLICIES)
    if info.policies != wanted:
        raise RunRecordsError(f"the store's genesis lists policies {list(info.policies)}")
    seen: set[tuple[str, str]] = set()
    labels: dict[str, tuple[str, ...]] = {}
    per_policy: Counter[str] = Counter()
    for r in records:
        key = (r.policy, r.snapshot_id)
        if key in seen:
            raise RunRecordsError(f"{r.policy} decided {r.snapshot_id} twice")
        seen.add(key)
        if r.policy not in wanted:
            raise RunRecordsError(f"record of unknown policy {r.policy!r}")
        if r.split != info.split:
            raise RunRecordsError(f"{r.snapshot_id} is {r.split}, the run is {info.split}")
        if r.gold_decision != ("complete" if r.fault == CLEAN_FAULT else "continue"):
            raise RunRecordsError(f"{r.snapshot_id} has gold {r.gold_decision} for {r.fault}")
        label = (r.task_id, r.world_id, r.family, r.fault, r.gold_decision)
        if labels.setdefault(r.snapshot_id, label) != label:
            raise RunRecordsError(f"records disagree on the labels of {r.snapshot_id}")
        per_policy[r.policy] += 1
    if len(labels) != run.cells or any(per_policy[p] != run.cells for p in wanted):
        raise RunRecordsError(
            f"every policy must decide each of the {run.cells} committed snapshots exactly once"
        )
    for record in run.attempts.values():
        if record.simulated != info.simulated:
            raise RunRecordsError(
                f"attempt {record.cell_id} disagrees with the genesis on simulated"
            )


# ---------------------------------------------------------------------------------------------
# Results


class PolicyRow(_Out, frozen=True, kw_only=True):
    """One policy's primary endpoints (a Table 2 row)."""

    policy: str
    label: str
    unsafe: int
    clean_non_complete: int
    stuck: int
    macro_f1: float
    faults: int
    cleans: int
    ucr: float
    ucr_low: float
    ucr_high: float
    decided_by: dict[str, int]


class H1Result(_Out, frozen=True, kw_only=True):
    """H1: ECT versus the critic core on per-task unsafe-completion indicators."""

    tasks: int
    worlds: int
    b_ect: int
    b_critic: int
    p_value: float
    estimate_pp: float
    task_low_pp: float
    task_high_pp: float
    world_low_pp: float
    world_high_pp: float
    replicates: int
    task_seed: int
    world_seed: int
    passed: bool


class AblationRow(_Out, frozen=True, kw_only=True):
    """One single-check ablation (a Table 3 row)."""

    ablation: str
    check: str
    target_fault: str | None
    target: str
    endpoint: Literal["U", "S"]
    tasks: int
    ect_count: int | None
    ablated_count: int | None
    effect: int | None
    residual_contained: int | None
    residual_families: dict[str, int]
    other_effects: dict[str, int]


class UnsupportedClaims(_Out, frozen=True, kw_only=True):
    """Unsupported completion claims a policy accepted (completed) on F1-F7 snapshots."""

    policy: str
    label: str
    accepted: int
    claims: int
    pct: float
    low_pct: float
    high_pct: float
    by_fault: dict[str, int]


class SecondaryRow(_Out, frozen=True, kw_only=True):
    """One policy's secondary endpoints (the prespecified ones V2 reports too).

    ``recoverable_stuck`` of ``recoverable``: ``stuck`` on snapshots with an available
    recovery (F8); ``other_stuck``: the rest of S. ``extra_calls`` of ``cleans``: ``continue`` on
    a clean snapshot, whose answer was already supported: each sends a finished agent on for at
    least one more call (a lower bound on the calls it wastes; ``stuck`` there stops instead).
    """

    policy: str
    label: str
    stuck: int
    recoverable_stuck: int
    recoverable: int
    other_stuck: int
    extra_calls: int
    cleans: int


class ProviderUsage(_Out, frozen=True, kw_only=True):
    """Provider use of one policy over the run."""

    policy: str
    model_decisions: int
    attempts: int
    retries: int
    provider_failures: int
    parse_failures: int
    prompt_tokens: int
    output_tokens: int
    thought_tokens: int
    latency_s: float
    cost_usd: float


class StaticResults(_Out, frozen=True, kw_only=True):
    """Everything the report prints, recomputed from one run's records."""

    split: str
    simulated: bool
    model: str
    tasks: int
    worlds: int
    faults: int
    cleans: int
    rows: tuple[PolicyRow, ...]
    h1: H1Result
    ablations: tuple[AblationRow, ...]
    by_fault: dict[str, dict[str, dict[str, int]]]
    by_family: dict[str, dict[str, int]]
    localisation: dict[str, dict[str, int]]
    usage: tuple[ProviderUsage, ...]
    ucr_replicates: int
    ucr_seed: int
    unsupported_claims: tuple[UnsupportedClaims, ...] = ()
    secondary: tuple[SecondaryRow, ...] = ()
    endpoints_by_fault: dict[str, dict[str, dict[str, int]]] = {}
    """Per policy, per fault (C0 and F1-F8), every endpoint of ``ENDPOINT_NAMES``."""
    endpoints_by_family: dict[str, dict[str, dict[str, int]]] = {}
    """Per policy, per task family, every endpoint of ``ENDPOINT_NAMES``."""
    partial_of: tuple[int, int] | None = None
    """(committed, expected) snapshots when the store is not finalized; None when complete."""
    environment: str = ""
    """The environment line of the store (``harness.environment.describe_store``)."""
    run: RunIdentity | None = None
    """Who ran the store and its state (``harness.run_identity``), as every file names it."""


def _is_fault(r: DecisionRecord) -> bool:
    return r.fault != CLEAN_FAULT


def _complete(r: DecisionRecord) -> bool:
    return r.decision is Verdict.COMPLETE


def _unsafe(r: DecisionRecord) -> bool:
    return _is_fault(r) and _complete(r)


def _code_family(code: str) -> str:
    if code in _VERIFIER_CODES:
        return family_of(ReasonCode(code)).value
    return code.split("_", 1)[0]


def _interval(
    first: Sequence[float], second: Sequence[float], trials: Sequence[float], seed: int
) -> BootstrapInterval:
    return cluster_bootstrap_difference(first, second, trials, replicates=REPLICATES, seed=seed)


def label_of(policy: str, simulated: bool) -> str:
    """Table label of a policy; the simulated full-trace critic says so."""
    label = POLICY_LABELS[policy]
    if policy == "full_trace_critic" and simulated:
        return label + " (simulated)"
    return label


def analyze(run: StaticRun) -> StaticResults:
    """Recompute every endpoint from ``run``'s records (see the module docstring)."""
    by_policy: dict[str, list[DecisionRecord]] = defaultdict(list)
    for r in run.records:
        by_policy[r.policy].append(r)
    base = by_policy["ect"]
    tasks = list(dict.fromkeys(r.task_id for r in base))
    worlds = sorted({r.world_id for r in base})
    world_of = {r.task_id: r.world_id for r in base}
    faults = sum(1 for r in base if _is_fault(r))
    cleans = len(base) - faults

    def per_task(records: Iterable[DecisionRecord]) -> dict[str, int]:
        counts = dict.fromkeys(tasks, 0)
        for r in records:
            counts[r.task_id] += _unsafe(r)
        return counts

    trials_by_task = Counter(r.task_id for r in base if _is_fault(r))
    trials = [float(trials_by_task[t]) for t in tasks]
    zeros = [0.0] * len(tasks)
    rows = []
    for policy in MAIN_POLICIES:
        records = by_policy[policy]
        unsafe = per_task(records)
        interval = _interval([float(unsafe[t]) for t in tasks], zeros, trials, UCR_BOOTSTRAP_SEED)
        rows.append(
            PolicyRow(
                policy=policy,
                label=label_of(policy, run.info.simulated),
                unsafe=sum(unsafe.values()),
                clean_non_complete=sum(1 for r in records if not _is_fault(r) and not _complete(r)),
                stuck=sum(1 for r in records if _is_fault(r) and r.decision is Verdict.STUCK),
                macro_f1=macro_f1(
                    [_complete(r) for r in records],
                    [r.gold_decision == "complete" for r in records],
                ),
                faults=faults,
                cleans=cleans,
                ucr=interval.estimate,
                ucr_low=interval.low,
                ucr_high=interval.high,
                decided_by=dict(sorted(Counter(r.source.value for r in records).items())),
            )
        )
    return StaticResults(
        split=run.info.split,
        simulated=run.info.simulated,
        model=run.info.model,
        tasks=len(tasks),
        worlds=len(worlds),
        faults=faults,
        cleans=cleans,
        rows=tuple(rows),
        h1=_h1(by_policy, tasks, world_of, trials),
        ablations=_ablations(by_policy, len(tasks)),
        by_fault={
            policy: {
                fault: {
                    verdict.value: sum(
                        1 for r in by_policy[policy] if r.fault == fault and r.decision is verdict
                    )
                    for verdict in Verdict
                }
                for fault in (CLEAN_FAULT, *STATIC_FAULTS)
            }
            for policy in (*MAIN_POLICIES, *ABLATION_POLICIES)
        },
        by_family={
            policy: dict(sorted(Counter(r.family for r in by_policy[policy] if _unsafe(r)).items()))
            for policy in MAIN_POLICIES
        },
        localisation={
            fault: dict(
                sorted(
                    Counter(
                        family
                        for r in base
                        if r.fault == fault
                        for family in {_code_family(c) for c in r.reason_codes}
                    ).items()
                )
            )
            for fault in (CLEAN_FAULT, *STATIC_FAULTS)
        },
        usage=tuple(_usage(policy, by_policy[policy], run.attempts) for policy in MAIN_POLICIES),
        ucr_replicates=REPLICATES,
        ucr_seed=UCR_BOOTSTRAP_SEED,
        unsupported_claims=tuple(
            _unsupported(policy, by_policy[policy], tasks, run.info.simulated)
            for policy in MAIN_POLICIES
        ),
        secondary=tuple(
            _secondary(policy, by_policy[policy], run.info.simulated) for policy in MAIN_POLICIES
        ),
        endpoints_by_fault={
            policy: {
                fault: _endpoints([r for r in by_policy[policy] if r.fault == fault])
                for fault in (CLEAN_FAULT, *STATIC_FAULTS)
            }
            for policy in MAIN_POLICIES
        },
        endpoints_by_family={
            policy: {
                family: _endpoints([r for r in by_policy[policy] if r.family == family])
                for family in sorted({r.family for r in base})
            }
            for policy in MAIN_POLICIES
        },
        partial_of=(run.cells, run.expected) if run.partial else None,
        environment=run.environment,
        run=run.run,
    )


def _recoverable_stuck(r: DecisionRecord) -> bool:
    return r.fault in RECOVERABLE_FAULTS and r.decision is Verdict.STUCK


def _extra_call(r: DecisionRecord) -> bool:
    return r.fault == CLEAN_FAULT and r.decision is Verdict.CONTINUE


def _endpoints(records: Sequence[DecisionRecord]) -> dict[str, int]:
    """Every endpoint of ``ENDPOINT_NAMES`` counted over ``records``."""
    return {
        "U": sum(1 for r in records if _unsafe(r)),
        "C": sum(1 for r in records if not _is_fault(r) and not _complete(r)),
        "S": sum(1 for r in records if _is_fault(r) and r.decision is Verdict.STUCK),
        "recoverable stuck": sum(1 for r in records if _recoverable_stuck(r)),
        "extra calls": sum(1 for r in records if _extra_call(r)),
    }


def _secondary(policy: str, records: Sequence[DecisionRecord], simulated: bool) -> SecondaryRow:
    counts = _endpoints(records)
    return SecondaryRow(
        policy=policy,
        label=label_of(policy, simulated),
        stuck=counts["S"],
        recoverable_stuck=counts["recoverable stuck"],
        recoverable=sum(1 for r in records if r.fault in RECOVERABLE_FAULTS),
        other_stuck=counts["S"] - counts["recoverable stuck"],
        extra_calls=counts["extra calls"],
        cleans=sum(1 for r in records if not _is_fault(r)),
    )


def _unsupported(
    policy: str, records: Sequence[DecisionRecord], tasks: Sequence[str], simulated: bool
) -> UnsupportedClaims:
    claimed = [r for r in records if r.fault in CLAIM_FAULTS]
    events = dict.fromkeys(tasks, 0)
    trials = dict.fromkeys(tasks, 0)
    for r in claimed:
        events[r.task_id] += _complete(r)
        trials[r.task_id] += 1
    accepted = sum(events.values())
    n = sum(trials.values())
    interval = _interval(
        [float(events[t]) for t in tasks],
        [0.0] * len(tasks),
        [float(trials[t]) for t in tasks],
        UNSUPPORTED_BOOTSTRAP_SEED,
    )
    return UnsupportedClaims(
        policy=policy,
        label=label_of(policy, simulated),
        accepted=accepted,
        claims=n,
        pct=100 * accepted / n if n else 0.0,
        low_pct=100 * interval.low,
        high_pct=100 * interval.high,
        by_fault={
            f: sum(1 for r in claimed if r.fault == f and _complete(r)) for f in CLAIM_FAULTS
        },
    )


def _h1(
    by_policy: Mapping[str, Sequence[DecisionRecord]],
    tasks: Sequence[str],
    world_of: Mapping[str, str],
    trials: Sequence[float],
) -> H1Result:
    events: dict[str, dict[str, int]] = {}
    for policy in ("ect", "critic_core"):
        counts = dict.fromkeys(tasks, 0)
        for r in by_policy[policy]:
            counts[r.task_id] += _unsafe(r)
        events[policy] = counts
    ect, critic = events["ect"], events["critic_core"]
    b_ect = sum(1 for t in tasks if ect[t] > 0 and critic[t] == 0)
    b_critic = sum(1 for t in tasks if critic[t] > 0 and ect[t] == 0)
    p_value = mcnemar_exact(b_ect, b_critic)
    task_interval = _interval(
        [float(ect[t]) for t in tasks],
        [float(critic[t]) for t in tasks],
        trials,
        TASK_BOOTSTRAP_SEED,
    )
    worlds = sorted(set(world_of.values()))
    per_world = {w: np.zeros(3) for w in worlds}
    for task, n in zip(tasks, trials, strict=True):
        per_world[world_of[task]] += (ect[task], critic[task], n)
    world_interval = _interval(
        [float(per_world[w][0]) for w in worlds],
        [float(per_world[w][1]) for w in worlds],
        [float(per_world[w][2]) for w in worlds],
        WORLD_BOOTSTRAP_SEED,
    )
    return H1Result(
        tasks=len(tasks),
        worlds=len(worlds),
        b_ect=b_ect,
        b_critic=b_critic,
        p_value=p_value,
        estimate_pp=100 * task_interval.estimate,
        task_low_pp=100 * task_interval.low,
        task_high_pp=100 * task_interval.high,
        world_low_pp=100 * world_interval.low,
        world_high_pp=100 * world_interval.high,
        replicates=REPLICATES,
        task_seed=TASK_BOOTSTRAP_SEED,
        world_seed=WORLD_BOOTSTRAP_SEED,
        passed=task_interval.estimate < 0 and p_value < ALPHA and task_interval.high < 0,
    )


def _count(records: Iterable[DecisionRecord], fault: str, endpoint: Literal["U", "S"]) -> int:
    wanted = Verdict.COMPLETE if endpoint == "U" else Verdict.STUCK
    return sum(1 for r in records if r.fault == fault and r.decision is wanted)


def _ablations(
    by_policy: Mapping[str, Sequence[DecisionRecord]], tasks: int
) -> tuple[AblationRow, ...]:
    full = by_policy["ect"]
    rows = []
    for ablation, policy in zip(Ablation, ABLATION_POLICIES, strict=True):
        target, endpoint = ABLATION_TARGETS[ablation]
        ablated = by_policy[policy]
        other: dict[str, int] = {}
        for fault in (CLEAN_FAULT, *STATIC_FAULTS):
            if fault == target:
                continue
            for kind in _ENDPOINTS:
                delta = _count(ablated, fault, kind) - _count(full, fault, kind)
                if delta:
                    other[f"{fault} {kind}"] = delta
        if target is None:
            rows.append(
                AblationRow(
                    ablation=ablation.value,
                    check=ABLATION_LABELS[ablation],
                    target_fault=None,
                    target="No matched fault",
                    endpoint=endpoint,
                    tasks=tasks,
                    ect_count=None,
                    ablated_count=None,
                    effect=None,
                    residual_contained=None,
                    residual_families={},
                    other_effects=other,
                )
            )
            continue
        ect_count = _count(full, target, endpoint)
        ablated_count = _count(ablated, target, endpoint)
        # Still contained: on the matched fault the ablated policy does not complete (U) or,
        # for the recovery check, still continues (S); the reason families name what held it.
        contained = [
            r
            for r in ablated
            if r.fault == target
            and (r.decision is Verdict.CONTINUE if endpoint == "S" else not _complete(r))
        ]
        families = Counter(
            family for r in contained for family in {_code_family(c) for c in r.reason_codes}
        )
        rows.append(
            AblationRow(
                ablation=ablation.value,
                check=ABLATION_LABELS[ablation],
                target_fault=target,
                target=f"{FAULTS[target].name.capitalize()} ({target})",
                endpoint=endpoint,
                tasks=tasks,
                ect_count=ect_count,
                ablated_count=ablated_count,
                effect=ablated_count - ect_count,
                residual_contained=len(contained),
                residual_families=dict(sorted(families.items())),
                other_effects=other,
            )
        )
    return tuple(rows)


def _usage(
    policy: str, records: Sequence[DecisionRecord], attempts: Mapping[str, AttemptRecord]
) -> ProviderUsage:
    spent = [attempts[aid] for r in records for aid in r.attempt_ids]
    return ProviderUsage(
        policy=policy,
        model_decisions=sum(1 for r in records if r.attempt_ids),
        attempts=len(spent),
        retries=sum(1 for a in spent if a.attempt_index > 0),
        provider_failures=sum(
            1 for r in records if PolicyReason.PROVIDER_FAILURE.value in r.reason_codes
        ),
        parse_failures=sum(
            1 for r in records if PolicyReason.PARSE_FAILURE.value in r.reason_codes
        ),
        prompt_tokens=sum(a.usage.prompt_tokens or 0 for a in spent),
        output_tokens=sum(a.usage.output_tokens or 0 for a in spent),
        thought_tokens=sum(a.usage.thought_tokens or 0 for a in spent),
        latency_s=sum(a.latency_ms for a in spent) / 1000.0,
        cost_usd=sum(a.cost_usd or 0.0 for a in spent),
    )
