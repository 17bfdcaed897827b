"""``harness v2 compare STORE_A STORE_B``: two runs of the V2 protocol side by side.

Two stores of different identities (another model, another endpoint, your own planner plug-in)
ran the same frozen schedule. This prints each store's identity and Table 4, and, per pipeline,
the paired differences A minus B of the four Table 4 rates (U on incomplete checkpoints, S over
both, FC on clean checkpoints, R on incomplete), each with a task-cluster bootstrap interval
(``harness.analysis.cluster_bootstrap_difference``, the frozen replicates, seed and level of the
study config): a resampled task keeps all of its cells of both stores together.

Only cells committed in both stores are paired (a pilot is paired with the same cells of a full
run, its rows being the full schedule's; a partial store is compared on what it has,
and says so). Each store is verified and its config binding checked exactly as ``v2 report``
does; nothing is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from harness.analysis import cluster_bootstrap_difference
from harness.environment import describe_store, differences, session_environments
from harness.errors import StudyReportError
from harness.store import StoreView
from harness.studies.v2.analysis import PIPELINE_LABELS, ArmRow, analyze
from harness.studies.v2.config import AnalysisParams
from harness.studies.v2.outcomes import POLICIES, CellResult, PolicyArm
from harness.studies.v2.report import bound_config, load_run, store_provider

__all__ = ["Comparison", "PairedRate", "StoreSide", "compare_stores", "render_comparison"]

_RATES: Final[
    tuple[tuple[str, Callable[[CellResult], bool], Callable[[CellResult], bool]], ...]
] = (
    ("U", lambda c: c.checkpoint == "incomplete", lambda c: c.premature_unsupported_termination),
    ("S", lambda c: True, lambda c: c.supported_completion),
    ("FC", lambda c: c.checkpoint == "clean", lambda c: c.clean_false_continuation),
    ("R", lambda c: c.checkpoint == "incomplete", lambda c: c.recovery_event),
)


class StoreSide(msgspec.Struct, frozen=True, kw_only=True):
    """One store of a comparison: where, who ran it, how far, and its Table 4."""

    store: str
    provider: str
    environment: str
    not_frozen_study: str
    cells: int
    schedule_rows: int
    table4: tuple[ArmRow, ...]


class PairedRate(msgspec.Struct, frozen=True, kw_only=True):
    """One pipeline's rate in both stores and the paired difference A - B (percentage points)."""

    policy: PolicyArm
    label: str
    rate: str
    trials: int
    a_pct: float
    b_pct: float
    delta_pp: float
    low_pp: float
    high_pp: float
    clusters: int


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Both stores and the paired differences, with the interval's parameters."""

    a: StoreSide
    b: StoreSide
    paired_cells: int
    level: float
    replicates: int
    seed: int
    deltas: tuple[PairedRate, ...]
    environment_differences: tuple[str, ...]


def _side(
    root: Path, view: StoreView, results: Sequence[CellResult], params: AnalysisParams
) -> StoreSide:
    provider, not_frozen = store_provider(view, root)
    analysis = analyze(results, params, expected_cells=view.report.schedule_rows)
    return StoreSide(
        store=str(root),
        provider=provider or analysis.provider,
        environment=describe_store(view),
        not_frozen_study=not_frozen,
        cells=view.report.cells,
        schedule_rows=view.report.schedule_rows,
        table4=analysis.table4,
    )


def _paired(
    a: dict[str, CellResult], b: dict[str, CellResult], params: AnalysisParams
) -> list[PairedRate]:
    out = []
    for policy in POLICIES:
        for name, select, event in _RATES:
            by_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
            for cell_id, mine in a.items():
                theirs = b[cell_id]
                if mine.policy != policy or not mine.primary or not select(mine):
                    continue
                sums = by_task[mine.task_id]
                sums[0] += float(event(mine))
                sums[1] += float(event(theirs))
                sums[2] += 1.0
            tasks = sorted(by_task)
            first = [by_task[t][0] for t in tasks]
            second = [by_task[t][1] for t in tasks]
            trials = [by_task[t][2] for t in tasks]
            n = int(sum(trials))
            if n == 0:
                continue
            interval = cluster_bootstrap_difference(
                first,
                second,
                trials,
                replicates=params.bootstrap_replicates,
                seed=params.bootstrap_seed,
                level=params.confidence,
            )
            out.append(
                PairedRate(
                    policy=policy,
                    label=PIPELINE_LABELS[policy],
                    rate=name,
                    trials=n,
                    a_pct=100.0 * sum(first) / n,
                    b_pct=100.0 * sum(second) / n,
                    delta_pp=100.0 * interval.estimate,
                    low_pp=100.0 * interval.low,
                    high_pp=100.0 * interval.high,
                    clusters=interval.clusters,
                )
            )
    return out


def _environment_differences(a: StoreView, b: StoreView) -> tuple[str, ...]:
    """How the environments of the two stores' first sessions differ (B's named against A's)."""
    first_a = session_environments(a.genesis, a.journal)
    first_b = session_environments(b.genesis, b.journal)
    if not first_a or not first_b:
        missing = " and ".join(n for n, f in (("A", first_a), ("B", first_b)) if not f)
        return (f"the environment of {missing} is not recorded",)
    return tuple(
        differences(first_a[0].environment, first_b[0].environment, "in A", here_word="in B")
    )


def compare_stores(a_root: Path, b_root: Path, config_path: Path) -> Comparison:
    """Compare two V2 stores (see the module docstring).

    Raises:
        StoreNotFoundError: a store is missing.
        StudyReportError: a store does not verify or holds no cell, the config is not the one
            a store is locked to, the stores ran different schedules, or no cell is in both.
    """
    a_view, a_results = load_run(a_root)
    b_view, b_results = load_run(b_root)
    config, _ = bound_config(a_root, config_path)
    bound_config(b_root, config_path)  # the same frozen config binds both stores
    params = config.analysis
    pilot = a_view.pilot is not None or b_view.pilot is not None
    if a_view.report.schedule_digest != b_view.report.schedule_digest and not pilot:
        raise StudyReportError(
            f"stores {a_root} and {b_root} ran different schedules "
            f"({a_view.report.schedule_digest} and {b_view.report.schedule_digest}): "
            "nothing to pair"
        )
    a_cells = {r.cell_id: r for r in a_results}
    b_cells = {r.cell_id: r for r in b_results}
    common = sorted(set(a_cells) & set(b_cells))
    if pilot:
        # A pilot binds a subset of the schedule: its cells pair with the same rows of the
        # other store, and only when each common cell's row is byte for byte the same.
        a_rows = {str(c.row.get("cell_id")): c.row for c in a_view.cells}
        b_rows = {str(c.row.get("cell_id")): c.row for c in b_view.cells}
        differ = [c for c in common if a_rows.get(c) != b_rows.get(c)]
        if differ:
            raise StudyReportError(
                f"stores {a_root} and {b_root} hold cell {differ[0]} with different schedule "
                "rows: nothing to pair"
            )
    if not common:
        raise StudyReportError(f"stores {a_root} and {b_root} have no committed cell in common")
    return Comparison(
        a=_side(a_root, a_view, a_results, params),
        b=_side(b_root, b_view, b_results, params),
        paired_cells=len(common),
        level=params.confidence,
        replicates=params.bootstrap_replicates,
        seed=params.bootstrap_seed,
        deltas=tuple(
            _paired({c: a_cells[c] for c in common}, {c: b_cells[c] for c in common}, params)
        ),
        environment_differences=_environment_differences(a_view, b_view),
    )


def _table(side: StoreSide) -> list[str]:
    first = side.table4[0]
    lines = [
        f"| Pipeline | U/{first.u_n} | S/{first.s_n} | FC/{first.fc_n} | R/{first.r_n} | Turns "
        "| Calls |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in side.table4:
        lines.append(
            f"| {row.label} | {row.u} | {row.s} | {row.fc} | {row.r} | {row.turns:.2f} "
            f"| {row.calls:.2f} |"
        )
    return lines


def render_comparison(c: Comparison) -> str:
    """The comparison as Markdown."""
    out = ["# V2 closed loop: two runs side by side", ""]
    for name, side in (("A", c.a), ("B", c.b)):
        done = "complete" if side.cells == side.schedule_rows else "PARTIAL"
        out += [
            f"## {name}: {side.provider}",
            "",
            f"Store {side.store}: {side.cells}/{side.schedule_rows} cells ({done}).",
            "",
            f"{side.environment}.",
            "",
        ]
        if side.not_frozen_study:
            out += [f"**{side.not_frozen_study}**", ""]
        out += [*_table(side), ""]
    if c.environment_differences:
        out += [
            "**The two stores were produced in different environments:** "
            + "; ".join(c.environment_differences)
            + ".",
            "",
        ]
    else:
        out += ["Both stores were produced in the same environment.", ""]
    out += [
        f"## Paired differences A - B by pipeline ({c.paired_cells} cells in both stores)",
        "",
        f"Percentage points; {int(c.level * 100)}% task-cluster bootstrap intervals "
        f"({c.replicates} replicates, seed {c.seed}). U: premature unsupported termination "
        "(incomplete), S: supported completion, FC: clean false continuation (clean), "
        "R: recovery event (incomplete).",
        "",
        "| Pipeline | Rate | Trials | A % | B % | A - B (pp) | Interval | Clusters |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for d in c.deltas:
        out.append(
            f"| {d.label} | {d.rate} | {d.trials} | {d.a_pct:.1f} | {d.b_pct:.1f} "
            f"| {d.delta_pp:+.1f} | [{d.low_pp:+.1f}, {d.high_pp:+.1f}] | {d.clusters} |"
        )
    return "\n".join(out) + "\n"
