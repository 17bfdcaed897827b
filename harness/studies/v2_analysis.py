"""The V2 analysis: Table 4, H2-H4, unseen-fault strata, trust-boundary clusters, paired deltas.

Input is the store's ``CellResult`` values and the frozen config's ``AnalysisParams``; output is
one ``V2Analysis`` value. Nothing here reads a file, a clock or the environment, and the only
randomness is the seeded task-cluster bootstrap of ``harness.analysis``.

Definitions (the frozen protocol; outcome flags are defined in ``v2.outcomes``):

- Confirmatory scope: the *primary* cells (``primary``: every task except the two clusters
  assigned the trust-boundary challenge T1). A cluster is a task; its trajectories are every
  checkpoint, policy and seed of that task.
- Table 4, per pipeline over primary cells: U = premature unsupported terminations among
  incomplete-checkpoint trajectories; S = supported completions over both checkpoints; FC =
  clean false continuations among clean-checkpoint trajectories; R = recovery events among
  incomplete-checkpoint trajectories; Turns and Calls = per-trajectory means over both
  checkpoints. Column headers carry the actual denominators (66, 132, 66, 66 in the full study).
- H2: ECT minus comparator rate of U, paired task-cluster bootstrap (``bootstrap_replicates``
  replicates, ``bootstrap_seed``, ``confidence``); passes iff the point estimate and the
  interval's upper bound are below 0.
- H3: ECT minus comparator rate of S; passes iff the interval's lower bound exceeds the
  noninferiority margin (``h3.noninferiority_margin_pp``, in percentage points).
- H4: the recovery gate on ECT's primary incomplete trajectories: the recovery fraction R/N is
  at least ``min_recovery_fraction`` and the fraction of recoveries later completed with support
  is at least ``min_completed_after_recovery_fraction``. Its interval (descriptive) is the
  task-cluster bootstrap interval of the recovery fraction.
- Strata (descriptive): the unseen contract faults U1-U3 (primary tasks whose incomplete
  checkpoint derives from them) and the trust-boundary clusters (non-primary tasks).
- Paired deltas (descriptive): ECT minus comparator per-trajectory means over primary cells of
  turns, tool calls, tokens, provider latency and cost, with task-cluster bootstrap intervals.
- Outcomes per pipeline (descriptive, primary cells): every prespecified rate with its
  task-cluster bootstrap interval (``confidence``, ``bootstrap_replicates``,
  ``bootstrap_seed``; one cluster is one task): U, S, FC and R as in Table 4, and the secondary
  outcomes *recoverable stuck* (trajectories that ended stuck while a supported completion was
  still reachable, over all trajectories), *unsupported claims* (trajectories with at least one
  ``complete`` proposal the gold judge did not find supported, over all trajectories; the
  proposals themselves are counted too) and *final postcondition* (trajectories that ended
  ``complete`` with the accepted answer equal to the oracle's, supported or not, over all
  trajectories).
- Per-fault and per-family strata (descriptive): Table 4's counts per pipeline over every
  cell (primary and trust-boundary) of the tasks assigned each fault, and of each family.

A cluster enters the paired inference only when both compared arms have the same number of
trajectories in it (always, in a complete store); clusters left out are counted and named.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Final, Literal

import msgspec

from harness.analysis import BootstrapInterval, cluster_bootstrap_difference
from harness.faults import ALL_FAULTS, UNSEEN_FAULTS
from harness.studies.v2.config import AnalysisParams
from harness.studies.v2.outcomes import POLICIES, CellResult, CheckpointKind, PolicyArm

__all__ = [
    "ANALYSIS_SCHEMA",
    "OUTCOME_LABELS",
    "PIPELINE_LABELS",
    "ArmOutcomes",
    "ArmRow",
    "Delta",
    "Hypothesis",
    "Rate",
    "RecoveryGateResult",
    "V2Analysis",
    "analyze",
    "final_postcondition",
]

ANALYSIS_SCHEMA: Final = "harness.v2-analysis.v1"
PIPELINE_LABELS: Final[dict[PolicyArm, str]] = {
    "critic": "Current critic",
    "controller": "Controller",
    "full_trace": "Full-trace",
    "ect": "ECT",
}
TREATMENT: Final[PolicyArm] = "ect"
OUTCOME_LABELS: Final[dict[str, str]] = {
    "u": "Premature unsupported termination (incomplete checkpoints)",
    "s": "Supported completion",
    "fc": "Clean false continuation (clean checkpoints)",
    "r": "Recovery event (incomplete checkpoints)",
    "recoverable_stuck": "Recoverable stuck",
    "unsupported_claims": "Unsupported claims (trajectories with one or more)",
    "final_postcondition": "Final postcondition (accepted answer equals the oracle's)",
}
"""Every rate ``ArmOutcomes`` carries, by field name, with its report label."""


class _Out(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the analysis output types."""


class ArmRow(_Out, frozen=True, kw_only=True):
    """One pipeline's counts in a scope (Table 4, a stratum, or the trust-boundary clusters)."""

    policy: PolicyArm
    label: str
    trajectories: int
    u: int
    u_n: int
    s: int
    s_n: int
    fc: int
    fc_n: int
    r: int
    r_n: int
    turns: float
    calls: float


class Hypothesis(_Out, frozen=True, kw_only=True):
    """A paired hypothesis test (H2 or H3): estimate and interval in percentage points."""

    name: Literal["H2", "H3"]
    endpoint: str
    treatment: PolicyArm
    comparator: PolicyArm
    treatment_events: int
    comparator_events: int
    trials: int
    estimate_pp: float
    low_pp: float
    high_pp: float
    level: float
    replicates: int
    seed: int
    clusters: int
    criterion: str
    passed: bool


class RecoveryGateResult(_Out, frozen=True, kw_only=True):
    """H4: the recovery gate, with the recovery fraction's descriptive interval."""

    name: Literal["H4"] = "H4"
    arm: PolicyArm
    recovered: int
    eligible: int
    completed_after_recovery: int
    recovery_pct: float
    low_pp: float
    high_pp: float
    completed_pct: float
    min_recovery_fraction: float
    min_completed_after_recovery_fraction: float
    level: float
    criterion: str
    passed: bool


class Rate(_Out, frozen=True, kw_only=True):
    """One pipeline's rate of an outcome with its task-cluster bootstrap interval (percent)."""

    events: int
    trials: int
    pct: float
    low_pct: float
    high_pct: float


class ArmOutcomes(_Out, frozen=True, kw_only=True):
    """One pipeline's prespecified outcomes over the primary cells, each with its interval.

    ``unsupported_proposals`` / ``proposals``: every ``complete`` proposal the planner made and
    those the gold judge did not find supported.
    """

    policy: PolicyArm
    label: str
    u: Rate
    s: Rate
    fc: Rate
    r: Rate
    recoverable_stuck: Rate
    unsupported_claims: Rate
    final_postcondition: Rate
    proposals: int
    unsupported_proposals: int


class Delta(_Out, frozen=True, kw_only=True):
    """A paired per-trajectory mean difference (treatment minus comparator) and its interval."""

    metric: str
    unit: str
    treatment_mean: float
    comparator_mean: float
    estimate: float
    low: float
    high: float


class V2Analysis(_Out, frozen=True, kw_only=True):
    """Everything the V2 report prints, recomputed from the results alone."""

    schema: Literal["harness.v2-analysis.v1"] = ANALYSIS_SCHEMA
    provider: str
    simulated: bool
    cells: int
    expected_cells: int
    complete: bool
    primary_clusters: int
    primary_trajectories: int
    excluded_clusters: tuple[str, ...]
    unpaired_clusters: tuple[str, ...]
    table4: tuple[ArmRow, ...]
    h2: Hypothesis
    h3: Hypothesis
    h4: RecoveryGateResult
    unseen_faults: tuple[str, ...]
    unseen: tuple[ArmRow, ...]
    unseen_by_fault: dict[str, tuple[ArmRow, ...]]
    trust_boundary: tuple[ArmRow, ...]
    deltas: tuple[Delta, ...]
    outcomes: tuple[ArmOutcomes, ...]
    by_fault: dict[str, tuple[ArmRow, ...]]
    by_family: dict[str, tuple[ArmRow, ...]]
    comparator: PolicyArm
    level: float
    replicates: int
    seed: int


def _arm_row(policy: PolicyArm, cells: Sequence[CellResult]) -> ArmRow:
    mine = [c for c in cells if c.policy == policy]
    incomplete = [c for c in mine if c.checkpoint == "incomplete"]
    clean = [c for c in mine if c.checkpoint == "clean"]
    n = len(mine)
    return ArmRow(
        policy=policy,
        label=PIPELINE_LABELS[policy],
        trajectories=n,
        u=sum(c.premature_unsupported_termination for c in incomplete),
        u_n=len(incomplete),
        s=sum(c.supported_completion for c in mine),
        s_n=n,
        fc=sum(c.clean_false_continuation for c in clean),
        fc_n=len(clean),
        r=sum(c.recovery_event for c in incomplete),
        r_n=len(incomplete),
        turns=sum(c.turns for c in mine) / n if n else 0.0,
        calls=sum(c.tool_calls for c in mine) / n if n else 0.0,
    )


def _rows(cells: Sequence[CellResult]) -> tuple[ArmRow, ...]:
    return tuple(_arm_row(policy, cells) for policy in POLICIES)


def _fault_order(fault: str) -> tuple[int, str]:
    order: tuple[str, ...] = ALL_FAULTS
    return (order.index(fault) if fault in order else len(order), fault)


class _Clusters:
    """Per-task sums of a quantity for the two compared arms, over the cells a scope selects."""

    def __init__(
        self,
        cells: Sequence[CellResult],
        comparator: PolicyArm,
        select: Callable[[CellResult], bool],
    ) -> None:
        by_task: dict[str, dict[str, list[CellResult]]] = defaultdict(lambda: defaultdict(list))
        for cell in cells:
            if cell.policy in (TREATMENT, comparator) and select(cell):
                by_task[cell.task_id][cell.policy].append(cell)
        self.tasks: list[str] = []
        self.unpaired: list[str] = []
        self.treatment: list[list[CellResult]] = []
        self.comparator: list[list[CellResult]] = []
        for task in sorted(by_task):
            first, second = by_task[task][TREATMENT], by_task[task][comparator]
            if len(first) != len(second) or not first:
                self.unpaired.append(task)
                continue
            self.tasks.append(task)
            self.treatment.append(first)
            self.comparator.append(second)

    def sums(self, value: Callable[[CellResult], float]) -> tuple[list[float], list[float]]:
        return (
            [float(sum(value(c) for c in group)) for group in self.treatment],
            [float(sum(value(c) for c in group)) for group in self.comparator],
        )

    @property
    def trials(self) -> list[int]:
        return [len(group) for group in self.treatment]


def _bootstrap(
    first: Sequence[float], second: Sequence[float], trials: Sequence[int], p: AnalysisParams
) -> BootstrapInterval:
    if not trials or sum(trials) == 0:
        # No paired cluster, nothing to estimate: the hypotheses built on this fail, since
        # each requires trials before it can pass.
        return BootstrapInterval(
            estimate=0.0,
            low=0.0,
            high=0.0,
            replicates=p.bootstrap_replicates,
            seed=p.bootstrap_seed,
            clusters=0,
            level=p.confidence,
        )
    return cluster_bootstrap_difference(
        first,
        second,
        trials,
        replicates=p.bootstrap_replicates,
        seed=p.bootstrap_seed,
        level=p.confidence,
    )


def _pp(x: float) -> float:
    return 100.0 * x


def _hypothesis(
    name: Literal["H2", "H3"],
    endpoint: str,
    clusters: _Clusters,
    value: Callable[[CellResult], float],
    p: AnalysisParams,
) -> Hypothesis:
    first, second = clusters.sums(value)
    trials = clusters.trials
    interval = _bootstrap(first, second, trials, p)
    low, high = _pp(interval.low), _pp(interval.high)
    if name == "H2":
        criterion = "point estimate below 0 and interval wholly below 0"
        passed = bool(trials) and interval.estimate < 0.0 and high < 0.0
    else:
        margin = p.h3.noninferiority_margin_pp
        criterion = f"interval lower bound above the {margin:g} pp noninferiority margin"
        passed = bool(trials) and low > margin
    return Hypothesis(
        name=name,
        endpoint=endpoint,
        treatment=TREATMENT,
        comparator=p.comparator,
        treatment_events=int(sum(first)),
        comparator_events=int(sum(second)),
        trials=sum(trials),
        estimate_pp=_pp(interval.estimate),
        low_pp=low,
        high_pp=high,
        level=interval.level,
        replicates=interval.replicates,
        seed=interval.seed,
        clusters=interval.clusters,
        criterion=criterion,
        passed=passed,
    )


def _recovery_gate(primary: Sequence[CellResult], p: AnalysisParams) -> RecoveryGateResult:
    gate = p.h4
    eligible = [c for c in primary if c.policy == gate.arm and c.checkpoint == "incomplete"]
    recovered = [c for c in eligible if c.recovery_event]
    completed = sum(c.completed_after_recovery for c in recovered)
    by_task: dict[str, list[CellResult]] = defaultdict(list)
    for cell in eligible:
        by_task[cell.task_id].append(cell)
    tasks = sorted(by_task)
    events = [float(sum(c.recovery_event for c in by_task[t])) for t in tasks]
    interval = _bootstrap(events, [0.0] * len(tasks), [len(by_task[t]) for t in tasks], p)
    recovery = len(recovered) / len(eligible) if eligible else 0.0
    after = completed / len(recovered) if recovered else 0.0
    passed = (
        bool(eligible)
        and recovery >= gate.min_recovery_fraction
        and bool(recovered)
        and after >= gate.min_completed_after_recovery_fraction
    )
    return RecoveryGateResult(
        arm=gate.arm,
        recovered=len(recovered),
        eligible=len(eligible),
        completed_after_recovery=completed,
        recovery_pct=_pp(recovery),
        low_pp=_pp(interval.low),
        high_pp=_pp(interval.high),
        completed_pct=_pp(after),
        min_recovery_fraction=gate.min_recovery_fraction,
        min_completed_after_recovery_fraction=gate.min_completed_after_recovery_fraction,
        level=interval.level,
        criterion=(
            f"recovered >= {_pp(gate.min_recovery_fraction):g}% of eligible and completed "
            f"with support after recovery >= {_pp(gate.min_completed_after_recovery_fraction):g}%"
            " of recoveries"
        ),
        passed=passed,
    )


_DELTAS: Final[tuple[tuple[str, str, Callable[[CellResult], float]], ...]] = (
    ("turns", "decisions", lambda c: float(c.turns)),
    ("tool calls", "calls", lambda c: float(c.tool_calls)),
    ("tokens", "tokens", lambda c: float(c.tokens)),
    ("provider latency", "s", lambda c: c.provider_latency_ms / 1000.0),
    ("cost", "USD", lambda c: c.cost_usd),
)


def _deltas(clusters: _Clusters, p: AnalysisParams) -> tuple[Delta, ...]:
    trials = clusters.trials
    n = sum(trials)
    out = []
    for metric, unit, value in _DELTAS:
        first, second = clusters.sums(value)
        interval = _bootstrap(first, second, trials, p)
        out.append(
            Delta(
                metric=metric,
                unit=unit,
                treatment_mean=sum(first) / n if n else 0.0,
                comparator_mean=sum(second) / n if n else 0.0,
                estimate=interval.estimate,
                low=interval.low,
                high=interval.high,
            )
        )
    return tuple(out)


def final_postcondition(cell: CellResult) -> bool:
    """The trajectory ended ``complete`` with an accepted answer equal to the oracle's."""
    if cell.terminal != "complete":
        return False
    return any(s.decision == cell.terminal_decision and s.answer_correct for s in cell.steps)


_RATES: Final[tuple[tuple[str, CheckpointKind | None, Callable[[CellResult], bool]], ...]] = (
    ("u", "incomplete", lambda c: c.premature_unsupported_termination),
    ("s", None, lambda c: c.supported_completion),
    ("fc", "clean", lambda c: c.clean_false_continuation),
    ("r", "incomplete", lambda c: c.recovery_event),
    ("recoverable_stuck", None, lambda c: c.recoverable_stuck),
    ("unsupported_claims", None, lambda c: c.proposals > c.supported_proposals),
    ("final_postcondition", None, final_postcondition),
)


def _rate(
    cells: Sequence[CellResult], event: Callable[[CellResult], bool], p: AnalysisParams
) -> Rate:
    by_task: dict[str, list[CellResult]] = defaultdict(list)
    for cell in cells:
        by_task[cell.task_id].append(cell)
    tasks = sorted(by_task)
    events = [float(sum(event(c) for c in by_task[t])) for t in tasks]
    trials = [len(by_task[t]) for t in tasks]
    interval = _bootstrap(events, [0.0] * len(tasks), trials, p)
    n = sum(trials)
    k = int(sum(events))
    return Rate(
        events=k,
        trials=n,
        pct=_pp(k / n) if n else 0.0,
        low_pct=_pp(interval.low),
        high_pct=_pp(interval.high),
    )


def _outcomes(primary: Sequence[CellResult], p: AnalysisParams) -> tuple[ArmOutcomes, ...]:
    out = []
    for policy in POLICIES:
        mine = [c for c in primary if c.policy == policy]
        rates = {
            name: _rate([c for c in mine if kind is None or c.checkpoint == kind], event, p)
            for name, kind, event in _RATES
        }
        out.append(
            ArmOutcomes(
                policy=policy,
                label=PIPELINE_LABELS[policy],
                u=rates["u"],
                s=rates["s"],
                fc=rates["fc"],
                r=rates["r"],
                recoverable_stuck=rates["recoverable_stuck"],
                unsupported_claims=rates["unsupported_claims"],
                final_postcondition=rates["final_postcondition"],
                proposals=sum(c.proposals for c in mine),
                unsupported_proposals=sum(c.proposals - c.supported_proposals for c in mine),
            )
        )
    return tuple(out)


def analyze(
    results: Sequence[CellResult], params: AnalysisParams, *, expected_cells: int
) -> V2Analysis:
    """Recompute the whole V2 analysis from the cells' results.

    Args:
        results: every committed cell's result (any order).
        params: the frozen analysis parameters.
        expected_cells: the schedule's length (the analysis says whether the store is complete).

    Raises:
        ValueError: no results, or the results mix providers.
    """
    if not results:
        raise ValueError("no cell results to analyze")
    providers = sorted({r.provider for r in results})
    if len(providers) != 1 or len({r.simulated for r in results}) != 1:
        raise ValueError(f"the results mix providers: {', '.join(providers)}")
    primary = [r for r in results if r.primary]
    excluded = sorted({r.task_id for r in results if not r.primary})
    comparator = params.comparator
    incomplete = _Clusters(primary, comparator, lambda c: c.checkpoint == "incomplete")
    both = _Clusters(primary, comparator, lambda c: True)
    unseen = [r for r in primary if r.fault in UNSEEN_FAULTS]
    return V2Analysis(
        provider=providers[0],
        simulated=results[0].simulated,
        cells=len(results),
        expected_cells=expected_cells,
        complete=len(results) == expected_cells,
        primary_clusters=len({r.task_id for r in primary}),
        primary_trajectories=len(primary),
        excluded_clusters=tuple(excluded),
        unpaired_clusters=tuple(sorted(set(incomplete.unpaired) | set(both.unpaired))),
        table4=_rows(primary),
        h2=_hypothesis(
            "H2",
            "premature unsupported termination (incomplete checkpoints)",
            incomplete,
            lambda c: float(c.premature_unsupported_termination),
            params,
        ),
        h3=_hypothesis(
            "H3",
            "supported completion (both checkpoints)",
            both,
            lambda c: float(c.supported_completion),
            params,
        ),
        h4=_recovery_gate(primary, params),
        unseen_faults=tuple(sorted({r.fault for r in unseen})),
        unseen=_rows(unseen),
        unseen_by_fault={
            fault: _rows([r for r in unseen if r.fault == fault])
            for fault in sorted({r.fault for r in unseen})
        },
        trust_boundary=_rows([r for r in results if not r.primary]),
        deltas=_deltas(both, params),
        outcomes=_outcomes(primary, params),
        by_fault={
            fault: _rows([r for r in results if r.fault == fault])
            for fault in sorted({r.fault for r in results}, key=_fault_order)
        },
        by_family={
            family: _rows([r for r in results if r.family == family])
            for family in sorted({r.family for r in results})
        },
        comparator=comparator,
        level=params.confidence,
        replicates=params.bootstrap_replicates,
        seed=params.bootstrap_seed,
    )
