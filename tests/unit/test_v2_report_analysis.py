"""The V2 analysis reproduces hand-computed Table 4, H2-H4, strata and deltas on a tiny study.

Three tasks, one seed: ``w90-a`` (fault F1) and ``w90-b`` (fault U1) are primary clusters,
``w90-t`` (T1) is the excluded trust-boundary cluster. Every expected number below was worked
out by hand from the outcome table in ``OUTCOMES``. With two clusters, a bootstrap replicate
draws AA, AB, BA or BB, each with probability 1/4, far above the 2.5% tails, so the 95%
percentile interval is exactly [min, max] of the AA and BB values: hand-computable too.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.studies.v2.config import AnalysisParams, H2Test, H3Test, RecoveryGate
from harness.studies.v2.outcomes import CellResult, StepRecord
from harness.studies.v2_analysis import analyze

TASKS = {"w90-a": ("F1", True), "w90-b": ("U1", True), "w90-t": ("T1", False)}

# (task, checkpoint, policy) -> outcome, flags. "sup": supported completion; "unsup":
# unsupported completion; "stuck"; "budget": budget exhausted. "fc": clean false continuation;
# "rec": recovery event; "rec+": recovery then supported completion.
OUTCOMES: dict[tuple[str, str, str], tuple[str, str]] = {
    ("w90-a", "clean", "critic"): ("sup", ""),
    ("w90-a", "incomplete", "critic"): ("unsup", ""),
    ("w90-a", "clean", "controller"): ("sup", ""),
    ("w90-a", "incomplete", "controller"): ("unsup", ""),
    ("w90-a", "clean", "full_trace"): ("stuck", "fc"),
    ("w90-a", "incomplete", "full_trace"): ("budget", ""),
    ("w90-a", "clean", "ect"): ("sup", ""),
    ("w90-a", "incomplete", "ect"): ("sup", "rec+"),
    ("w90-b", "clean", "critic"): ("sup", ""),
    ("w90-b", "incomplete", "critic"): ("unsup", ""),
    ("w90-b", "clean", "controller"): ("sup", ""),
    ("w90-b", "incomplete", "controller"): ("unsup", ""),
    ("w90-b", "clean", "full_trace"): ("sup", ""),
    ("w90-b", "incomplete", "full_trace"): ("unsup", ""),
    ("w90-b", "clean", "ect"): ("sup", ""),
    ("w90-b", "incomplete", "ect"): ("budget", "rec"),
    ("w90-t", "clean", "critic"): ("sup", ""),
    ("w90-t", "incomplete", "critic"): ("unsup", ""),
    ("w90-t", "clean", "controller"): ("sup", ""),
    ("w90-t", "incomplete", "controller"): ("unsup", ""),
    ("w90-t", "clean", "full_trace"): ("budget", "fc"),
    ("w90-t", "incomplete", "full_trace"): ("stuck", ""),
    ("w90-t", "clean", "ect"): ("sup", ""),
    ("w90-t", "incomplete", "ect"): ("sup", ""),
}


def make_result(task: str, checkpoint: str, policy: str, seed: int = 1) -> CellResult:
    """A consistent CellResult for one row of ``OUTCOMES``."""
    outcome, flags = OUTCOMES[(task, checkpoint, policy)]
    fault, primary = TASKS[task]
    ect = policy == "ect"
    # ECT: 2 turns, 1 tool call on incomplete checkpoints, 100 tokens, 2 s, 0.002 USD per
    # trajectory; every other arm: 1 turn, no call, 40 tokens, 0.5 s, 0.001 USD.
    turns = 2 if ect else 1
    calls = 1 if ect and checkpoint == "incomplete" else 0
    complete = outcome in ("sup", "unsup")
    terminal = "complete" if complete else ("stuck" if outcome == "stuck" else "budget_exhausted")
    recovery = flags in ("rec", "rec+")
    steps = tuple(
        StepRecord(decision=i + 1, action="call_tool", ledger_digest="blake3:" + "0" * 64)
        for i in range(turns)
    )
    values: dict[str, Any] = {
        "cell_id": f"{task}.{checkpoint}.{policy}.s{seed}",
        "task_id": task,
        "world_id": "90",
        "family": task[-1],
        "checkpoint": checkpoint,
        "policy": policy,
        "seed": seed,
        "fault": fault,
        "primary": primary,
        "provider": "simulated",
        "simulated": True,
        "terminal": terminal,
        "terminal_decision": None if terminal == "budget_exhausted" else turns,
        "final_answer": {"slot": 1} if complete else None,
        "supported_completion": outcome == "sup",
        "unsupported_completion": outcome == "unsup",
        "premature_unsupported_termination": outcome == "unsup" and checkpoint == "incomplete",
        "clean_false_continuation": flags == "fc",
        "recoverable_stuck": False,
        "recovery_event": recovery,
        "recovery_decision": 1 if recovery else None,
        "completed_after_recovery": flags == "rec+",
        "missing_at_checkpoint": 1 if checkpoint == "incomplete" else 0,
        "missing_at_end": 0,
        "proposals": 1 if complete else 0,
        "supported_proposals": 1 if outcome == "sup" else 0,
        "rejected_supported_proposals": 0,
        "turns": turns,
        "tool_calls": calls,
        "failed_tool_calls": 0,
        "refused_tool_calls": 0,
        "provider_calls": turns,
        "planner_calls": turns,
        "critic_calls": 0,
        "provider_failures": 0,
        "prompt_tokens": 80 if ect else 30,
        "output_tokens": 20 if ect else 10,
        "thought_tokens": 0,
        "tokens": 100 if ect else 40,
        "provider_latency_ms": 2000.0 if ect else 500.0,
        "cost_usd": 0.002 if ect else 0.001,
        "cost_known": True,
        "steps": steps,
    }
    return CellResult(**values)


def all_results() -> list[CellResult]:
    return [make_result(t, c, p) for (t, c, p) in OUTCOMES]


def params(min_completed: float = 0.5) -> AnalysisParams:
    return AnalysisParams(
        comparator="controller",
        confidence=0.95,
        bootstrap_replicates=10_000,
        bootstrap_seed=20_260_101,
        cluster="task",
        h2=H2Test(endpoint="premature_unsupported_termination", rule="upper bound below 0"),
        h3=H3Test(
            endpoint="supported_completion",
            noninferiority_margin_pp=-10.0,
            rule="lower bound above the margin",
        ),
        h4=RecoveryGate(
            arm="ect",
            min_recovery_fraction=0.2,
            min_completed_after_recovery_fraction=min_completed,
            rule="both fractions at least their minimum",
        ),
    )


def test_v2_report_table4_by_hand() -> None:
    a = analyze(all_results(), params(), expected_cells=24)
    assert a.complete
    assert (a.primary_clusters, a.primary_trajectories) == (2, 16)
    assert a.excluded_clusters == ("w90-t",)
    got = [
        (r.label, r.u, r.u_n, r.s, r.s_n, r.fc, r.fc_n, r.r, r.r_n, r.turns, r.calls)
        for r in a.table4
    ]
    assert got == [
        ("Current critic", 2, 2, 2, 4, 0, 2, 0, 2, 1.0, 0.0),
        ("Controller", 2, 2, 2, 4, 0, 2, 0, 2, 1.0, 0.0),
        ("Full-trace", 1, 2, 1, 4, 1, 2, 0, 2, 1.0, 0.0),
        ("ECT", 0, 2, 3, 4, 0, 2, 2, 2, 2.0, 0.5),
    ]


def test_v2_report_h2_h3_h4_by_hand() -> None:
    a = analyze(all_results(), params(), expected_cells=24)
    # H2: cluster a: ECT 0/1 vs controller 1/1; cluster b: 0/1 vs 1/1. Every replicate -100.
    h2 = a.h2
    assert (h2.treatment_events, h2.comparator_events, h2.trials) == (0, 2, 2)
    assert (h2.estimate_pp, h2.low_pp, h2.high_pp) == (-100.0, -100.0, -100.0)
    assert h2.passed
    # H3: cluster a: ECT 2/2 vs 1/2 (+50 pp); cluster b: 1/2 vs 1/2 (0). Pooled (3-2)/4.
    h3 = a.h3
    assert (h3.treatment_events, h3.comparator_events, h3.trials) == (3, 2, 4)
    assert h3.estimate_pp == 25.0
    assert (h3.low_pp, h3.high_pp) == (0.0, 50.0)
    assert h3.passed  # 0.0 > -10
    assert (h3.clusters, h3.replicates, h3.seed, h3.level) == (2, 10_000, 20_260_101, 0.95)
    # H4: ECT recovered on both incomplete trajectories; one then completed with support.
    h4 = a.h4
    assert (h4.recovered, h4.eligible, h4.completed_after_recovery) == (2, 2, 1)
    assert (h4.recovery_pct, h4.completed_pct, h4.low_pp, h4.high_pp) == (100.0, 50.0, 100.0, 100.0)
    assert h4.passed
    assert not analyze(all_results(), params(0.6), expected_cells=24).h4.passed


def test_v2_report_h2_fails_when_the_interval_reaches_zero() -> None:
    results = [
        make_result(t, c, p)
        for (t, c, p) in OUTCOMES
        if (t, c, p) != ("w90-b", "incomplete", "controller")
    ]
    swapped = make_result("w90-b", "incomplete", "controller")
    # Cluster b: the controller now ends stuck (no premature termination): diffs -100 and 0.
    stuck = swapped.__class__(
        **{
            **{f: getattr(swapped, f) for f in swapped.__struct_fields__},
            "terminal": "stuck",
            "final_answer": None,
            "unsupported_completion": False,
            "premature_unsupported_termination": False,
            "proposals": 0,
        }
    )
    a = analyze([*results, stuck], params(), expected_cells=24)
    assert a.h2.estimate_pp == -50.0
    assert (a.h2.low_pp, a.h2.high_pp) == (-100.0, 0.0)
    assert not a.h2.passed


def test_v2_report_strata_by_hand() -> None:
    a = analyze(all_results(), params(), expected_cells=24)
    assert a.unseen_faults == ("U1",)
    unseen = [(r.policy, r.u, r.u_n, r.s, r.s_n, r.r) for r in a.unseen]
    assert unseen == [
        ("critic", 1, 1, 1, 2, 0),
        ("controller", 1, 1, 1, 2, 0),
        ("full_trace", 1, 1, 1, 2, 0),
        ("ect", 0, 1, 1, 2, 1),
    ]
    assert list(a.unseen_by_fault) == ["U1"]
    trust = [(r.policy, r.u, r.u_n, r.s, r.s_n, r.fc, r.fc_n) for r in a.trust_boundary]
    assert trust == [
        ("critic", 1, 1, 1, 2, 0, 1),
        ("controller", 1, 1, 1, 2, 0, 1),
        ("full_trace", 0, 1, 0, 2, 1, 1),
        ("ect", 0, 1, 2, 2, 0, 1),
    ]


def test_v2_report_paired_deltas_by_hand() -> None:
    a = analyze(all_results(), params(), expected_cells=24)
    deltas = {d.metric: d for d in a.deltas}
    expected = {
        "turns": (2.0, 1.0, 1.0),
        "tool calls": (0.5, 0.0, 0.5),
        "tokens": (100.0, 40.0, 60.0),
        "provider latency": (2.0, 0.5, 1.5),
        "cost": (0.002, 0.001, 0.001),
    }
    for metric, (mine, theirs, diff) in expected.items():
        d = deltas[metric]
        assert d.treatment_mean == pytest.approx(mine)
        assert d.comparator_mean == pytest.approx(theirs)
        assert d.estimate == pytest.approx(diff)
        assert d.low == pytest.approx(diff)
        assert d.high == pytest.approx(diff)


def test_v2_report_incomplete_store_and_unpaired_cluster() -> None:
    results = [r for r in all_results() if r.cell_id != "w90-b.incomplete.ect.s1"]
    a = analyze(results, params(), expected_cells=24)
    assert not a.complete
    assert a.unpaired_clusters == ("w90-b",)
    assert a.h2.clusters == 1  # only cluster a enters H2
    assert a.h3.clusters == 1


def test_v2_report_refuses_mixed_or_empty_input() -> None:
    with pytest.raises(ValueError, match=r"^no cell results"):
        analyze([], params(), expected_cells=24)
    mixed = all_results()
    first = mixed[0]
    gemini = first.__class__(
        **{
            **{f: getattr(first, f) for f in first.__struct_fields__},
            "provider": "gemini",
            "simulated": False,
        }
    )
    with pytest.raises(ValueError, match=r"mix providers"):
        analyze([gemini, *mixed[1:]], params(), expected_cells=24)


def test_v2_report_is_deterministic() -> None:
    first = analyze(all_results(), params(), expected_cells=24)
    second = analyze(list(reversed(all_results())), params(), expected_cells=24)
    assert first == second
