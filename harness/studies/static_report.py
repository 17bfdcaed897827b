"""The static study's report: every endpoint, H1, Table 2 and Table 3, from the run's records.

``load_run`` reads a run directory and refuses anything that is not a complete, untouched run
(run.json present, file digests equal, one record per policy and snapshot, consistent labels,
every cited provider attempt journaled). ``analyse`` recomputes everything from the records:

- per policy: U (unsafe ``complete`` on fault snapshots), C (clean snapshots not completed),
  S (``stuck`` on fault snapshots), macro-F1 over {complete, not complete}, the UCR with a
  task-cluster bootstrap interval, and which kind of rule decided;
- breakdowns by fault and by task family; ECT's reason families per fault (localisation);
- unsupported claims accepted: every F1-F7 snapshot carries a completion claim its evidence
  does not support (F8's agent has not answered), so a policy that completes one accepts an
  unsupported claim; per policy, the count over those snapshots with a task-cluster interval;
  provider requests, attempts, retries, failures, tokens, latency and cost per policy;
- H1: per task, "any unsafe complete among its faults" for ECT and the critic core; exact
  two-sided McNemar on the discordant tasks; the paired UCR difference with a task-cluster
  bootstrap and a world-cluster sensitivity bootstrap (all faults and both policies kept per
  resampled cluster). H1 passes iff the estimate < 0, p < .05 and the task interval's upper
  end < 0;
- Table 3: each single-check ablation's effect on its matched fault (ablated minus full ECT),
  the residual containment by other checks, and effects on other faults.

Renderers produce Markdown, CSV, LaTeX, JSON and one self-contained ``report.html``;
``write_report`` writes them and the figure (PNG, SVG, PDF) into the run directory. With the
simulated provider the full-trace critic row is labelled "(simulated)" everywhere: it is a
deterministic permissive reviewer, not the paper's Gemini arm.
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import numpy as np

from harness.analysis import (
    BootstrapInterval,
    cluster_bootstrap_difference,
    macro_f1,
    mcnemar_exact,
)
from harness.canonical import canonical_bytes
from harness.ect.model import Verdict
from harness.ect.reasons import ReasonCode, family_of
from harness.errors import RunRecordsError
from harness.extras import extra_installed
from harness.faults import FAULTS, STATIC_FAULTS
from harness.log import get_logger
from harness.policies import Ablation, PolicyReason, attempt_id
from harness.providers.audit import AttemptRecord
from harness.studies._static_files import (
    ATTEMPTS_FILE,
    DECISIONS_FILE,
    RUN_FILE,
    JournalLine,
    file_digest,
)
from harness.studies.static import (
    ABLATION_POLICIES,
    ABLATION_TARGETS,
    MAIN_POLICIES,
    POLICY_LABELS,
    DecisionRecord,
    RunInfo,
)

_log = get_logger("harness.studies.static")

__all__ = [
    "REPLICATES",
    "FIGURE_FILES",
    "REPORT_FILES",
    "TASK_BOOTSTRAP_SEED",
    "UNSUPPORTED_BOOTSTRAP_SEED",
    "UCR_BOOTSTRAP_SEED",
    "WORLD_BOOTSTRAP_SEED",
    "AblationRow",
    "H1Result",
    "PolicyRow",
    "ProviderUsage",
    "StaticResults",
    "StaticRun",
    "UnsupportedClaims",
    "analyse",
    "h1_line",
    "label_of",
    "load_run",
    "render_endpoints",
    "render_html",
    "render_table2",
    "render_table3",
    "write_report",
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

REPORT_FILES: Final = (
    "table2.md",
    "table2.csv",
    "table2.tex",
    "table2.json",
    "table3.md",
    "table3.csv",
    "table3.tex",
    "table3.json",
    "endpoints.md",
    "endpoints.json",
    "report.html",
    "ucr.png",
    "ucr.svg",
    "ucr.pdf",
)
FIGURE_FILES: Final = ("ucr.png", "ucr.svg", "ucr.pdf")
"""Written only with the [plots] extra installed."""
_CLAIM_FAULTS: Final = ("F1", "F2", "F3", "F4", "F5", "F6", "F7")
"""Fault snapshots whose agent claims completion without support (F8's has not answered)."""

_CLEAN: Final = "C0"
_DASH: Final = "\u2013"  # the en dash the paper's tables use for "not applicable"
_ENDPOINTS: Final[tuple[Literal["U", "S"], ...]] = ("U", "S")
_VERIFIER_CODES: Final = frozenset(code.value for code in ReasonCode)
_ABLATION_LABELS: Final = {
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
    """A finished, checked run: run.json, the decision records and the attempt records by id."""

    info: RunInfo
    records: tuple[DecisionRecord, ...]
    attempts: dict[str, AttemptRecord]


def _read(run_dir: Path, name: str) -> bytes:
    try:
        return (run_dir / name).read_bytes()
    except FileNotFoundError as e:
        if name == RUN_FILE:
            raise RunRecordsError(
                f"{str(run_dir)!r} has no {RUN_FILE}: not a finished static run"
            ) from e
        raise RunRecordsError(f"{str(run_dir)!r} has no {name}") from e
    except OSError as e:
        raise RunRecordsError(f"cannot read {name} in {str(run_dir)!r}: {e.strerror}") from e


def _lines(data: bytes, name: str, decoder: msgspec.json.Decoder[Any]) -> list[Any]:
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            out.append(decoder.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise RunRecordsError(f"{name} line {number}: {e}") from e
    return out


def load_run(run_dir: Path) -> StaticRun:
    """Read and check a run directory.

    Raises:
        RunRecordsError: naming the first thing that is missing, malformed or inconsistent.
    """
    if not run_dir.is_dir():
        raise RunRecordsError(f"no run directory {str(run_dir)!r}")
    try:
        info = msgspec.json.decode(_read(run_dir, RUN_FILE), type=RunInfo)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise RunRecordsError(f"{RUN_FILE} in {str(run_dir)!r} is malformed: {e}") from e
    expected_files = {DECISIONS_FILE, ATTEMPTS_FILE}
    if set(info.files) != expected_files:
        raise RunRecordsError(f"{RUN_FILE} must list exactly {sorted(expected_files)}")
    data = {}
    for name in sorted(expected_files):
        data[name] = _read(run_dir, name)
        if file_digest(data[name]) != info.files[name]:
            raise RunRecordsError(
                f"{name} in {str(run_dir)!r} does not match the digest in {RUN_FILE} "
                "(edited or truncated)"
            )
    records = tuple(
        _lines(data[DECISIONS_FILE], DECISIONS_FILE, msgspec.json.Decoder(DecisionRecord))
    )
    journal = _lines(data[ATTEMPTS_FILE], ATTEMPTS_FILE, msgspec.json.Decoder(JournalLine))
    attempts = _attempts(journal)
    _check(info, records, attempts)
    return StaticRun(info=info, records=records, attempts=attempts)


def _attempts(journal: Sequence[JournalLine]) -> dict[str, AttemptRecord]:
    begun: Counter[tuple[str, str, int, str]] = Counter()
    out: dict[str, AttemptRecord] = {}
    for number, line in enumerate(journal, start=1):
        item = line.begin if line.begin is not None else line.end
        assert item is not None
        key = (item.cell_id, item.prompt_id, item.attempt_index, item.request_hash)
        if line.begin is not None:
            begun[key] += 1
        else:
            assert line.end is not None
            if begun[key] < 1:
                raise RunRecordsError(f"{ATTEMPTS_FILE} line {number}: attempt ended unbegun")
            begun[key] -= 1
            out[attempt_id(line.end)] = line.end
    if any(begun.values()):
        raise RunRecordsError(f"{ATTEMPTS_FILE}: an attempt was begun and never ended")
    return out


def _check(
    info: RunInfo, records: Sequence[DecisionRecord], attempts: Mapping[str, AttemptRecord]
) -> None:
    wanted = (*MAIN_POLICIES, *ABLATION_POLICIES)
    if info.policies != wanted:
        raise RunRecordsError(f"{RUN_FILE} lists policies {list(info.policies)}, not the study's")
    if len(records) != info.records:
        raise RunRecordsError(
            f"{DECISIONS_FILE} holds {len(records)} records, {RUN_FILE} says {info.records}"
        )
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
        if r.gold_decision != ("complete" if r.fault == _CLEAN else "continue"):
            raise RunRecordsError(f"{r.snapshot_id} has gold {r.gold_decision} for {r.fault}")
        label = (r.task_id, r.world_id, r.family, r.fault, r.gold_decision)
        if labels.setdefault(r.snapshot_id, label) != label:
            raise RunRecordsError(f"records disagree on the labels of {r.snapshot_id}")
        per_policy[r.policy] += 1
        for aid in r.attempt_ids:
            if aid not in attempts:
                raise RunRecordsError(f"{r.policy} on {r.snapshot_id} cites unknown attempt {aid}")
    if len(labels) != info.snapshots or any(per_policy[p] != info.snapshots for p in wanted):
        raise RunRecordsError(
            f"every policy must decide each of the {info.snapshots} snapshots exactly once"
        )
    cited = {aid for r in records for aid in r.attempt_ids}
    if cited != set(attempts) or len(cited) != info.attempts:
        raise RunRecordsError(
            f"{ATTEMPTS_FILE} holds {len(attempts)} attempts, the records cite {len(cited)}, "
            f"{RUN_FILE} says {info.attempts}"
        )
    for record in attempts.values():
        if record.simulated != info.simulated:
            raise RunRecordsError(f"attempt {record.cell_id} disagrees with run.json on simulated")


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


def _is_fault(r: DecisionRecord) -> bool:
    return r.fault != _CLEAN


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


def analyse(run: StaticRun) -> StaticResults:
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
                for fault in (_CLEAN, *STATIC_FAULTS)
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
            for fault in (_CLEAN, *STATIC_FAULTS)
        },
        usage=tuple(_usage(policy, by_policy[policy], run.attempts) for policy in MAIN_POLICIES),
        ucr_replicates=REPLICATES,
        ucr_seed=UCR_BOOTSTRAP_SEED,
        unsupported_claims=tuple(
            _unsupported(policy, by_policy[policy], tasks, run.info.simulated)
            for policy in MAIN_POLICIES
        ),
    )


def _unsupported(
    policy: str, records: Sequence[DecisionRecord], tasks: Sequence[str], simulated: bool
) -> UnsupportedClaims:
    claimed = [r for r in records if r.fault in _CLAIM_FAULTS]
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
            f: sum(1 for r in claimed if r.fault == f and _complete(r)) for f in _CLAIM_FAULTS
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
        for fault in (_CLEAN, *STATIC_FAULTS):
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
                    check=_ABLATION_LABELS[ablation],
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
                check=_ABLATION_LABELS[ablation],
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


# ---------------------------------------------------------------------------------------------
# Rendering


def _f1(value: float) -> str:
    text = f"{value:.3f}"
    return text[1:] if text.startswith("0.") else text


def _pp(value: float) -> str:
    return f"{value:.2f}"


def h1_line(results: StaticResults) -> str:
    """The H1 sentence: b counts, exact p, the paired difference and both intervals."""
    h = results.h1
    verdict = "passed" if h.passed else "failed"
    return (
        f"H1 (ECT vs critic core, {h.tasks} task clusters): b_ECT = {h.b_ect}, "
        f"b_critic = {h.b_critic}, exact McNemar p = {h.p_value:.5e}; ECT-minus-critic-core UCR "
        f"{_pp(h.estimate_pp)} pp, 95% task-cluster interval [{_pp(h.task_low_pp)}, "
        f"{_pp(h.task_high_pp)}] pp ({h.replicates:,} replicates); {h.worlds}-world "
        f"sensitivity interval [{_pp(h.world_low_pp)}, {_pp(h.world_high_pp)}] pp; "
        f"H1 {verdict}."
    )


def _notes(results: StaticResults) -> list[str]:
    notes = [
        "Postcondition oracle: non-deployable reference (it sees gold answers).",
        "Critic core: every decision is a deterministic fast-path decision, not an LLM judgement.",
    ]
    if results.simulated:
        notes.append(
            "Full-trace critic (simulated): verdicts from the deterministic simulated provider "
            "(a permissive reviewer, not an LLM); these are not the paper's Gemini numbers."
        )
    else:
        notes.append(f"Full-trace critic: {results.model}.")
    return notes


def _table2_cells(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    header = [
        "Policy",
        f"U/{results.faults}",
        f"C/{results.cleans}",
        f"S/{results.faults}",
        "F1",
    ]
    body = [
        [row.label, str(row.unsafe), str(row.clean_non_complete), str(row.stuck), _f1(row.macro_f1)]
        for row in results.rows
    ]
    return header, body


def _effect(row: AblationRow) -> str:
    return _DASH if row.effect is None else f"{row.effect:+d} {row.endpoint}"


def _residual(row: AblationRow) -> str:
    if row.residual_contained is None:
        return _DASH
    families = ", ".join(f"{k} {v}" for k, v in row.residual_families.items())
    text = f"{row.residual_contained}/{row.tasks} still contained"
    return f"{text} ({families})" if families else text


def _others(row: AblationRow) -> str:
    if not row.other_effects:
        return "none"
    return ", ".join(
        f"{key.split()[0]} {value:+d} {key.split()[1]}" for key, value in row.other_effects.items()
    )


def _table3_cells(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    header = [
        "Check removed",
        "Target fault",
        f"Effect/{results.tasks}",
        "Residual containment",
        "Other faults",
    ]
    body = [[r.check, r.target, _effect(r), _residual(r), _others(r)] for r in results.ablations]
    return header, body


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]], numeric: int) -> str:
    align = ["---"] * (len(header) - numeric) + ["---:"] * numeric
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def _csv(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(body)
    return buffer.getvalue()


_TEX: Final = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", _DASH: "--", "$": r"\$"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def _latex(header: Sequence[str], body: Sequence[Sequence[str]], spec: str, caption: str) -> str:
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(_tex(h) for h in header) + r" \\",
        r"\midrule",
        *(" & ".join(_tex(c) for c in row) + r" \\" for row in body),
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{_tex(caption)}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _split_name(results: StaticResults) -> str:
    return "Held-out" if results.split == "heldout" else "Development"


def render_table2(results: StaticResults) -> dict[str, str]:
    """Table 2 as ``{"md", "csv", "tex", "json"}`` texts (Markdown ends with H1 and notes)."""
    header, body = _table2_cells(results)
    caption = (
        f"{_split_name(results)} static evaluation. U: unsafe complete; C: clean non-complete; "
        "S: stuck."
    )
    md = _markdown(header, body, numeric=4)
    md += "\n" + h1_line(results) + "\n\n" + "\n".join(f"- {n}" for n in _notes(results)) + "\n"
    payload = {
        "caption": caption,
        "columns": header,
        "rows": [msgspec.to_builtins(r) for r in results.rows],
        "h1": msgspec.to_builtins(results.h1),
        "h1_line": h1_line(results),
        "notes": _notes(results),
        "simulated": results.simulated,
        "split": results.split,
    }
    return {
        "md": md,
        "csv": _csv(header, body),
        "tex": _latex(header, body, "lrrrr", caption + " " + h1_line(results)),
        "json": _json(payload),
    }


def render_table3(results: StaticResults) -> dict[str, str]:
    """Table 3 as ``{"md", "csv", "tex", "json"}`` texts."""
    header, body = _table3_cells(results)
    caption = (
        "Single-check ablations. Effects are ablation-minus-ECT counts on the matched fault "
        "(U unsafe complete, S stuck); residual containment by other checks is retained. A zero "
        "count does not establish that a check is unnecessary."
    )
    payload = {
        "caption": caption,
        "columns": header,
        "rows": [msgspec.to_builtins(r) for r in results.ablations],
        "split": results.split,
    }
    return {
        "md": _markdown(header, body, numeric=0) + "\n" + caption + "\n",
        "csv": _csv(header, body),
        "tex": _latex(header, body, "lllll", caption),
        "json": _json(payload),
    }


def _json(obj: Any) -> str:
    return (msgspec.json.format(canonical_bytes(obj), indent=2) + b"\n").decode("utf-8")


def render_endpoints(results: StaticResults) -> dict[str, str]:
    """Secondary endpoints: by fault, by family, ECT localisation, decided-by, provider use."""
    faults = (_CLEAN, *STATIC_FAULTS)
    labels = {row.policy: row.label for row in results.rows}
    labels |= {
        p: f"ECT without {_ABLATION_LABELS[a].lower()}"
        for a, p in zip(Ablation, ABLATION_POLICIES, strict=True)
    }
    sections = [f"# Static study endpoints ({results.split}, {results.tasks} tasks)\n"]
    for verdict, title in (("complete", "Complete"), ("stuck", "Stuck")):
        body = [
            [labels[p], *(str(results.by_fault[p][f][verdict]) for f in faults)]
            for p in results.by_fault
        ]
        sections.append(
            f"## {title} decisions per fault (C0 = supported clean snapshot)\n\n"
            + _markdown(["Policy", *faults], body, numeric=len(faults))
        )
    families = sorted({f for counts in results.by_family.values() for f in counts})
    body = [
        [labels[p], *(str(results.by_family[p].get(f, 0)) for f in families)]
        for p in results.by_family
    ]
    sections.append(
        "## Unsafe completes per task family\n\n"
        + _markdown(["Policy", *families], body, numeric=len(families))
    )
    body = [
        [f, ", ".join(f"{k} {v}" for k, v in results.localisation[f].items()) or "none"]
        for f in faults
    ]
    sections.append(
        "## ECT reason families per fault (snapshots in which each family fired)\n\n"
        + _markdown(["Fault", "Reason families"], body, numeric=0)
    )
    body = [
        [row.label, ", ".join(f"{k} {v}" for k, v in row.decided_by.items())]
        for row in results.rows
    ]
    sections.append("## Decided by\n\n" + _markdown(["Policy", "Sources"], body, numeric=0))
    head, body = unsupported_table(results)
    sections.append(
        "## Unsupported claims accepted (F1-F7 snapshots completed; 95% task-cluster interval)\n\n"
        + _markdown(head, body, numeric=len(head) - 1)
    )
    head = [
        "Policy",
        "Model decisions",
        "Attempts",
        "Retries",
        "Provider failures",
        "Parse failures",
        "Prompt tokens",
        "Output tokens",
        "Latency (s)",
        "Cost (USD)",
    ]
    body = [
        [
            labels[u.policy],
            str(u.model_decisions),
            str(u.attempts),
            str(u.retries),
            str(u.provider_failures),
            str(u.parse_failures),
            str(u.prompt_tokens),
            str(u.output_tokens + u.thought_tokens),
            f"{u.latency_s:.2f}",
            f"{u.cost_usd:.5f}",
        ]
        for u in results.usage
    ]
    sections.append("## Provider use\n\n" + _markdown(head, body, numeric=len(head) - 1))
    sections.append("\n".join(f"- {n}" for n in _notes(results)) + "\n")
    payload = {
        "by_family": results.by_family,
        "by_fault": results.by_fault,
        "localisation": results.localisation,
        "rows": [msgspec.to_builtins(r) for r in results.rows],
        "ucr_replicates": results.ucr_replicates,
        "ucr_seed": results.ucr_seed,
        "unsupported_claims": [msgspec.to_builtins(u) for u in results.unsupported_claims],
        "unsupported_seed": UNSUPPORTED_BOOTSTRAP_SEED,
        "usage": [msgspec.to_builtins(u) for u in results.usage],
    }
    return {"md": "\n".join(sections), "json": _json(payload)}


def unsupported_table(results: StaticResults) -> tuple[list[str], list[list[str]]]:
    """Unsupported claims accepted per policy: overall with its interval, then per fault."""
    head = ["Policy", "Accepted", "Rate (%)", "Interval (%)", *_CLAIM_FAULTS]
    body = [
        [
            u.label,
            f"{u.accepted}/{u.claims}",
            f"{u.pct:.1f}",
            f"[{u.low_pct:.1f}, {u.high_pct:.1f}]",
            *(str(u.by_fault.get(f, 0)) for f in _CLAIM_FAULTS),
        ]
        for u in results.unsupported_claims
    ]
    return head, body


def provider_text(results: StaticResults) -> str:
    """Who produced the model-path data: the provider and model, and whether it is simulated."""
    if results.simulated:
        return (
            f"Provider: simulated (deterministic, not a language model); model: {results.model}; "
            "SIMULATED DATA for every model-path policy"
        )
    return f"Provider: gemini; model: {results.model}"


def figure_caption(results: StaticResults) -> str:
    """The static figure's caption."""
    return (
        f"Unsafe completion rate per policy on {results.faults} fault snapshots of "
        f"{results.tasks} tasks ({_split_name(results).lower()} grid); whiskers are 95% "
        f"task-cluster bootstrap intervals ({results.ucr_replicates:,} replicates, seed "
        f"{results.ucr_seed}); labels give unsafe completes/fault snapshots. "
        f"{provider_text(results)}."
    )


def render_html(results: StaticResults, png: bytes | None) -> bytes:
    """``report.html``: Table 2, H1, Table 3, the endpoints and the figure on one page."""
    from harness.studies import _html

    header, body = _table2_cells(results)
    t3_head, t3_body = _table3_cells(results)
    faults = (_CLEAN, *STATIC_FAULTS)
    labels = {row.policy: row.label for row in results.rows}
    labels |= {
        p: f"ECT without {_ABLATION_LABELS[a].lower()}"
        for a, p in zip(Ablation, ABLATION_POLICIES, strict=True)
    }
    by_fault = [
        [labels[p], v, *(str(results.by_fault[p][f][v]) for f in faults)]
        for p in results.by_fault
        for v in ("complete", "stuck")
    ]
    families = sorted({f for counts in results.by_family.values() for f in counts})
    by_family = [
        [labels[p], *(str(results.by_family[p].get(f, 0)) for f in families)]
        for p in results.by_family
    ]
    localisation = [
        [f, ", ".join(f"{k} {v}" for k, v in results.localisation[f].items()) or "none"]
        for f in faults
    ]
    ucr = [
        [row.label, f"{row.unsafe}/{row.faults}", f"{100 * row.ucr:.1f}",
         f"[{100 * row.ucr_low:.1f}, {100 * row.ucr_high:.1f}]"]
        for row in results.rows
    ]  # fmt: skip
    sections = [
        _html.section(
            "table2",
            "Table 2",
            _html.table(header, body, highlight=[r.policy == "ect" for r in results.rows])
            + _html.paragraph(h1_line(results))
            + "".join(_html.paragraph(n) for n in _notes(results)),
        ),
        _html.section(
            "ucr",
            "Unsafe completion rate with 95% task-cluster intervals",
            _html.table(["Policy", "Unsafe", "UCR (%)", "Interval (%)"], ucr),
        ),
        _html.section(
            "unsupported",
            "Unsupported claims accepted",
            _html.table(*unsupported_table(results))
            + _html.paragraph(
                "Every F1-F7 snapshot carries a completion claim its evidence does not "
                "support; a policy accepts it by completing. F8's agent has not answered."
            ),
        ),
    ]
    if png is not None:
        sections.append(
            _html.section(
                "figure",
                "Figure",
                _html.figure(
                    png,
                    alt="Bar chart of the unsafe completion rate per policy with interval whiskers",
                    caption=figure_caption(results),
                )
                + _html.paragraph("The same figure as vector graphics: ucr.svg, ucr.pdf."),
            )
        )
    else:
        sections.append(
            _html.section(
                "figure",
                "Figure",
                _html.paragraph(
                    "No figure: the report was made without the [plots] extra (matplotlib)."
                ),
            )
        )
    sections += [
        _html.section("table3", "Table 3: single-check ablations", _html.table(t3_head, t3_body)),
        _html.section(
            "faults",
            "Decisions per fault",
            _html.table(["Policy", "Decision", *faults], by_fault, numeric_from=2),
        ),
        _html.section(
            "families",
            "Unsafe completes per task family",
            _html.table(["Policy", *families], by_family),
        ),
        _html.section(
            "localisation",
            "ECT reason families per fault",
            _html.table(["Fault", "Reason families"], localisation, numeric_from=2),
        ),
    ]
    banners = []
    if results.simulated:
        banners.append(
            "SIMULATED PROVIDER: model-path verdicts come from the deterministic simulated "
            "provider, not from a language model; these are not the paper's Gemini numbers."
        )
    return _html.page(
        title=f"Static study ({_split_name(results).lower()} grid): Tables 2 and 3, H1",
        banners=banners,
        meta=[provider_text(results), f"{results.tasks} tasks, {results.worlds} worlds, "
              f"{results.faults} fault and {results.cleans} clean snapshots."],
        sections=sections,
    )  # fmt: skip


def write_report(run_dir: Path) -> StaticResults:
    """Load and check ``run_dir``, analyse it, and write every table and the figure into it.

    Returns:
        The results (the caller prints Table 2 and the H1 line).

    Raises:
        RunRecordsError: when the run directory is not a complete, untouched static run, or a
            report file cannot be written.
    """
    from harness.studies._static_figure import render_figure  # matplotlib only when writing

    results = analyse(load_run(run_dir))
    texts: dict[str, bytes] = {}
    for stem, rendered in (
        ("table2", render_table2(results)),
        ("table3", render_table3(results)),
        ("endpoints", render_endpoints(results)),
    ):
        for ext, text in rendered.items():
            texts[f"{stem}.{ext}"] = text.encode("utf-8")
    if extra_installed("matplotlib"):
        texts.update(render_figure(results))
    else:
        _log.warning(
            "static.report.no_figure", hint="install 'ect-harness[plots]' for ucr.png/.svg/.pdf"
        )
        for name in FIGURE_FILES:
            (run_dir / name).unlink(missing_ok=True)  # never leave a figure of older results
    texts["report.html"] = render_html(results, texts.get("ucr.png"))
    for name, data in texts.items():
        try:
            tmp = run_dir / (name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(run_dir / name)
        except OSError as e:
            raise RunRecordsError(f"cannot write {name} in {str(run_dir)!r}: {e.strerror}") from e
    return results
