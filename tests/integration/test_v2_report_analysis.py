"""The V2 analysis reproduces hand-computed Table 4, H2-H4, strata and deltas on a tiny study.

The study is ``v2_report_support``'s: every expected number below was worked out by hand from
its outcome table ``OUTCOMES``. With two clusters, a bootstrap replicate
draws AA, AB, BA or BB, each with probability 1/4, far above the 2.5% tails, so the 95%
percentile interval is exactly [min, max] of the AA and BB values: hand-computable too.
"""

from __future__ import annotations

import pytest
from v2_report_support import OUTCOMES, all_results, make_result, params

from harness.studies.v2.analysis import analyze


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
