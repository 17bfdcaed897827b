"""Every prespecified V2 outcome per pipeline, per-fault and per-family strata, by hand.

The study is ``v2_report_support``'s, with three outcomes edited in: critic's incomplete
``w90-a`` completion has the oracle's answer (unsupported, yet the final postcondition holds),
every supported completion's final answer is correct, and full-trace's clean ``w90-a`` stuck is
recoverable. Two primary clusters: a replicate draws AA, AB, BA or BB, so each 95% interval is
[min, max] of the AA and BB rates.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from v2_report_support import CONFIG_PATH, all_results, params, synthetic_store

from harness.ect import Verdict
from harness.studies.v2.analysis import analyze, final_postcondition
from harness.studies.v2.outcomes import CellResult, StepRecord
from harness.studies.v2.report import build_report


def _edited(result: CellResult) -> CellResult:
    key = (result.task_id, result.checkpoint, result.policy)
    if key == ("w90-a", "clean", "full_trace"):
        return msgspec.structs.replace(result, recoverable_stuck=True)
    if result.terminal != "complete":
        return result
    correct = result.supported_completion or key == ("w90-a", "incomplete", "critic")
    last = StepRecord(
        decision=result.turns,
        action="complete",
        ledger_digest="blake3:" + "0" * 64,
        verdict=Verdict.COMPLETE,
        supported=result.supported_completion,
        answer_correct=correct,
    )
    return msgspec.structs.replace(result, steps=(*result.steps[:-1], last))


def _results() -> list[CellResult]:
    return [_edited(r) for r in all_results()]


def _rates(name: str) -> list[tuple[str, int, int, float, float, float]]:
    a = analyze(_results(), params(), expected_cells=24)
    out: list[tuple[str, int, int, float, float, float]] = []
    for o in a.outcomes:
        r = getattr(o, name)
        out.append((o.policy, r.events, r.trials, r.pct, r.low_pct, r.high_pct))
    return out


def test_final_postcondition_is_the_accepted_answer_being_right() -> None:
    by_key = {(r.task_id, r.checkpoint, r.policy): r for r in _results()}
    assert final_postcondition(by_key[("w90-a", "incomplete", "critic")])  # unsupported, right
    assert not final_postcondition(by_key[("w90-b", "incomplete", "critic")])  # wrong answer
    assert not final_postcondition(by_key[("w90-a", "clean", "full_trace")])  # stuck


def test_v2_outcomes_recoverable_stuck_by_hand() -> None:
    assert _rates("recoverable_stuck") == [
        ("critic", 0, 4, 0.0, 0.0, 0.0),
        ("controller", 0, 4, 0.0, 0.0, 0.0),
        ("full_trace", 1, 4, 25.0, 0.0, 50.0),  # a: 1/2, b: 0/2
        ("ect", 0, 4, 0.0, 0.0, 0.0),
    ]


def test_v2_outcomes_unsupported_claims_by_hand() -> None:
    assert _rates("unsupported_claims") == [
        ("critic", 2, 4, 50.0, 50.0, 50.0),
        ("controller", 2, 4, 50.0, 50.0, 50.0),
        ("full_trace", 1, 4, 25.0, 0.0, 50.0),
        ("ect", 0, 4, 0.0, 0.0, 0.0),
    ]
    a = analyze(_results(), params(), expected_cells=24)
    assert [(o.unsupported_proposals, o.proposals) for o in a.outcomes] == [
        (2, 4),
        (2, 4),
        (1, 2),
        (0, 3),
    ]


def test_v2_outcomes_final_postcondition_by_hand() -> None:
    assert _rates("final_postcondition") == [
        ("critic", 3, 4, 75.0, 50.0, 100.0),  # a: clean + lucky incomplete 2/2, b: 1/2
        ("controller", 2, 4, 50.0, 50.0, 50.0),
        ("full_trace", 1, 4, 25.0, 0.0, 50.0),
        ("ect", 3, 4, 75.0, 50.0, 100.0),
    ]


def test_v2_outcomes_table4_rates_carry_intervals() -> None:
    # U for the critic: a 1/1, b 1/1; S for ECT: a 2/2, b 1/2.
    assert _rates("u")[0] == ("critic", 2, 2, 100.0, 100.0, 100.0)
    assert _rates("s")[3] == ("ect", 3, 4, 75.0, 50.0, 100.0)


def test_v2_per_fault_and_family_strata_cover_every_cell() -> None:
    a = analyze(_results(), params(), expected_cells=24)
    assert list(a.by_fault) == ["F1", "U1", "T1"]  # the faults' canonical order
    assert list(a.by_family) == ["a", "b", "t"]
    t1 = {row.policy: row for row in a.by_fault["T1"]}
    assert (t1["critic"].u, t1["critic"].u_n, t1["ect"].s, t1["ect"].s_n) == (1, 1, 2, 2)
    assert sum(row.trajectories for rows in a.by_fault.values() for row in rows) == 24


def test_v2_report_prints_outcomes_and_strata(tmp_path: Path) -> None:
    store = synthetic_store(tmp_path / "run", results=_results())
    files = build_report(store, CONFIG_PATH).files
    text = files["report.md"].decode()
    assert "## Outcomes per pipeline (primary cells; 95% task-cluster intervals)" in text
    assert "| Recoverable stuck | 0/4 (0.0% [0.0, 0.0]) | 0/4 (0.0% [0.0, 0.0]) | " in text
    assert "1/4 (25.0% [0.0, 50.0]) | 0/4 (0.0% [0.0, 0.0]) |" in text
    assert "| F1 | ECT | 2 | 0/1 | 2/2 | 0/1 | 1/1 | 2.00 | 0.50 |" in text
    assert "## Per-family strata (descriptive)" in text
    # The synthetic store binds no identity: its results name the simulated provider.
    assert "model simulated; endpoint none; planner none; credential none;" in text
    pilot = (
        "PILOT: 24 of the 576 rows of the frozen schedule; not the study. A pilot runs a subset "
        "of the schedule; no hypothesis verdict."
    )
    assert f"**{pilot}**" in text
    page = files["report.html"].decode()
    assert f'<p class="banner" role="note">{pilot}</p>' in page
    assert page.count('<details class="cell"') == 24
    assert "Recoverable stuck" in page
    # Table 4 on the page carries each rate's interval: ECT's S is 3/4, interval [50, 100].
    assert '<td class="num">3 (75.0% [50.0, 100.0])</td>' in page
