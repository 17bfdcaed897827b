"""The static study end to end on the held-out grid: run, records, report, acceptance numbers.

One real run (simulated provider) writes its run store; every test reads it back through the
report code, or recounts the records itself. The paper's deterministic Table 2 rows and H1 are
the acceptance targets; Table 3's design effects (claim coverage, value replay, recovery check)
too. Other ablation effects are measured and pinned as regressions of the pinned benchmark.
"""

from __future__ import annotations

import io
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.benchmark.build import benchmark
from harness.benchmark.manifest import manifest_of
from harness.ect.model import Verdict
from harness.errors import TamperError
from harness.providers import select_provider
from harness.store import read_store
from harness.studies.progress import Progress
from harness.studies.static.analysis import StaticResults, StaticRun, analyze, load_run
from harness.studies.static.records import DecisionRecord, StaticIdentity
from harness.studies.static.report import (
    REPORT_DIR,
    REPORT_FILES,
    render_table2,
    write_report,
)
from harness.studies.static.run import (
    ABLATION_POLICIES,
    MAIN_POLICIES,
    run_static,
)

PAPER_DETERMINISTIC_ROWS = {
    # policy: (U/288, C/36, S/288, F1) - the paper's Table 2.
    "completion_token": (252, 0, 0, ".222"),
    "self_check": (252, 0, 0, ".222"),
    "heuristic": (252, 0, 0, ".222"),
    "critic_core": (252, 0, 36, ".222"),
    "postcondition_oracle": (144, 0, 0, ".500"),
    "ect": (0, 0, 0, "1.000"),
}


PROGRESS = io.StringIO()


def _progress(total: int, done: int, priced: bool) -> Progress:
    # The one progress line both studies draw, off a terminal: a line every 100 snapshots.
    return Progress(PROGRESS, total=total, done=done, live=False, every=100, unit="snapshots")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("static") / "heldout"
    selection = select_provider(
        "simulated", credential_file=None, credential_env=None, base_url=None
    )
    run_static(out, split="heldout", selection=selection, progress=_progress)
    return out


@pytest.fixture(scope="module")
def results(run_dir: Path) -> StaticResults:
    return analyze(load_run(run_dir))


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [d for cell in read_store(run_dir).cells for d in cell.result["decisions"]]


def test_run_writes_one_record_per_policy_and_snapshot(run_dir: Path) -> None:
    view = read_store(run_dir)
    assert view.genesis is not None
    info = msgspec.convert(view.genesis.identity, StaticIdentity, strict=True)
    records = _records(run_dir)
    assert view.report.finalized
    assert view.report.cells == view.report.schedule_rows
    assert len(view.cells) == 324
    lines = PROGRESS.getvalue().splitlines()
    assert [line.split(" | ")[0] for line in lines] == [
        f"[{'#' * (24 * n // 324)}{'.' * (24 - 24 * n // 324)}] {n}/324 snapshots"
        for n in (100, 200, 300, 324)
    ]
    assert lines[-1].split(" | ")[2] == "provider calls 324"  # one simulated call each
    assert len(records) == 324 * 14
    assert [c.row["snapshot_id"] for c in view.cells] == [
        c.result["snapshot_id"] for c in view.cells
    ]
    assert set(view.cells[0].row) == {"snapshot_id", "task_id", "fault", "split"}
    assert info.policies == (*MAIN_POLICIES, *ABLATION_POLICIES)
    assert info.simulated
    assert info.split == "heldout"
    assert sum(len(c.audit) for c in view.cells) == 324
    assert info.manifest_digest == manifest_of(benchmark()).digest
    assert (info.critic_core_seed, info.full_trace_critic_seed) == (1, 2705)
    assert Counter(r["policy"] for r in records) == dict.fromkeys(info.policies, 324)
    assert {r["split"] for r in records} == {"heldout"}
    first = records[0]
    assert set(first) == {
        "attempt_ids",
        "decision",
        "family",
        "fault",
        "gold_decision",
        "policy",
        "reason_codes",
        "schema_version",
        "snapshot_id",
        "source",
        "split",
        "task_id",
        "world_id",
    }
    cited = [a for r in records for a in r["attempt_ids"]]
    assert len(cited) == len(set(cited)) == 324
    assert all(r["policy"] == "full_trace_critic" for r in records if r["attempt_ids"])


def test_heldout_deterministic_rows_reproduce_the_paper(results: StaticResults) -> None:
    assert (results.tasks, results.worlds, results.faults, results.cleans) == (36, 6, 288, 36)
    table = render_table2(results)["md"].splitlines()
    assert table[0] == "| Policy | U/288 | C/36 | S/288 | F1 |"
    by_policy = {row.policy: row for row in results.rows}
    for policy, (unsafe, clean, stuck, f1) in PAPER_DETERMINISTIC_ROWS.items():
        row = by_policy[policy]
        assert (row.unsafe, row.clean_non_complete, row.stuck) == (unsafe, clean, stuck), policy
        assert f"| {row.label} | {unsafe} | {clean} | {stuck} | {f1} |" in table


def test_heldout_h1_reproduces_the_paper(results: StaticResults) -> None:
    h1 = results.h1
    assert (h1.b_ect, h1.b_critic) == (0, 36)
    assert f"{h1.p_value:.5e}" == "2.91038e-11"
    assert h1.p_value == pytest.approx(2 / 2**36, rel=1e-12)
    assert h1.estimate_pp == pytest.approx(-87.5)
    assert (h1.task_low_pp, h1.task_high_pp) == pytest.approx((-87.5, -87.5))
    assert (h1.world_low_pp, h1.world_high_pp) == pytest.approx((-87.5, -87.5))
    assert (h1.tasks, h1.worlds, h1.replicates) == (36, 6, 10_000)
    assert h1.passed
    md = render_table2(results)["md"]
    assert (
        "b_ECT = 0, b_critic = 36, exact McNemar p = 2.91038e-11; ECT-minus-critic-core UCR "
        "-87.50 pp, 95% task-cluster interval [-87.50, -87.50] pp" in md
    )


def test_table3_design_effects_follow(results: StaticResults) -> None:
    rows = {row.ablation: row for row in results.ablations}
    assert (rows["claim_coverage"].target_fault, rows["claim_coverage"].effect) == ("F5", 36)
    assert (rows["value_replay"].target_fault, rows["value_replay"].effect) == ("F6", 36)
    recovery = rows["recovery_check"]
    assert (recovery.target_fault, recovery.endpoint, recovery.effect) == ("F8", "S", 36)
    transform = rows["exact_transform"]
    assert transform.target_fault is None
    assert transform.effect is None
    assert transform.target == "No matched fault"


def test_table3_measured_effects_on_the_pinned_benchmark(results: StaticResults) -> None:
    # Measured, not designed: pinned so that a change of the benchmark or verifier shows up.
    rows = {row.ablation: row for row in results.ablations}
    measured = {name: (row.effect, row.residual_contained) for name, row in rows.items()}
    assert measured == {
        "claim_coverage": (36, 0),
        "task_scope": (12, 24),
        "outcome_validation": (6, 30),  # all-null abstention replays over the nested null
        "ledger_reference": (0, 36),
        "value_replay": (36, 0),
        "exact_transform": (None, None),
        "recovery_check": (36, 0),
    }
    assert rows["claim_coverage"].other_effects == {"F1 U": 36}
    assert rows["ledger_reference"].residual_families == {"REPLAY": 36}
    assert all(not row.other_effects for name, row in rows.items() if name != "claim_coverage")


def test_report_numbers_match_a_plain_recount_of_the_records(
    run_dir: Path, results: StaticResults
) -> None:
    records = _records(run_dir)
    for row in results.rows:
        mine = [r for r in records if r["policy"] == row.policy]
        assert row.unsafe == sum(r["fault"] != "C0" and r["decision"] == "complete" for r in mine)
        assert row.stuck == sum(r["fault"] != "C0" and r["decision"] == "stuck" for r in mine)
        assert row.clean_non_complete == sum(
            r["fault"] == "C0" and r["decision"] != "complete" for r in mine
        )
    for ablation in results.ablations:
        if ablation.target_fault is None:
            continue
        wanted = "complete" if ablation.endpoint == "U" else "stuck"
        counts = Counter(
            r["policy"]
            for r in records
            if r["fault"] == ablation.target_fault and r["decision"] == wanted
        )
        assert ablation.effect == counts[f"ect-no-{ablation.ablation}"] - counts["ect"]


def test_unsupported_claims_accepted_match_a_recount(run_dir: Path, results: StaticResults) -> None:
    records = _records(run_dir)
    claim_faults = {"F1", "F2", "F3", "F4", "F5", "F6", "F7"}
    assert [u.policy for u in results.unsupported_claims] == [r.policy for r in results.rows]
    for u in results.unsupported_claims:
        mine = [r for r in records if r["policy"] == u.policy and r["fault"] in claim_faults]
        accepted = [r for r in mine if r["decision"] == "complete"]
        assert (u.accepted, u.claims) == (len(accepted), len(mine))
        assert u.by_fault == {
            f: sum(r["fault"] == f for r in accepted) for f in sorted(claim_faults)
        }
        assert u.low_pct - 1e-9 <= u.pct <= u.high_pct + 1e-9
    by_policy = {u.policy: u for u in results.unsupported_claims}
    assert by_policy["ect"].accepted == 0
    assert by_policy["critic_core"].accepted == by_policy["critic_core"].claims == 252
    write_report(run_dir)
    text = (run_dir / REPORT_DIR / "endpoints.md").read_text()
    assert (
        "## Unsupported claims accepted (F1-F7 snapshots completed; 95% task-cluster interval)"
        in text
    )
    assert "| ECT | 0/252 | 0.0 | [0.0, 0.0] | 0 | 0 | 0 | 0 | 0 | 0 | 0 |" in text
    page = (run_dir / REPORT_DIR / "report.html").read_text()
    assert "Unsupported claims accepted" in page
    assert "SIMULATED PROVIDER" in page
    assert "PARTIAL" not in page
    assert (run_dir / REPORT_DIR / "ucr.svg").read_bytes().lstrip().startswith(b"<?xml")
    assert (run_dir / REPORT_DIR / "ucr.pdf").read_bytes().startswith(b"%PDF-")


def test_secondary_endpoints_match_a_recount_in_every_breakdown(
    run_dir: Path, results: StaticResults
) -> None:
    records = _records(run_dir)

    def endpoints(mine: list[dict[str, Any]]) -> dict[str, int]:
        fault = [r for r in mine if r["fault"] != "C0"]
        clean = [r for r in mine if r["fault"] == "C0"]
        return {
            "U": sum(r["decision"] == "complete" for r in fault),
            "C": sum(r["decision"] != "complete" for r in clean),
            "S": sum(r["decision"] == "stuck" for r in fault),
            "recoverable stuck": sum(r["decision"] == "stuck" for r in mine if r["fault"] == "F8"),
            "extra calls": sum(r["decision"] == "continue" for r in clean),
        }

    assert [row.policy for row in results.secondary] == [row.policy for row in results.rows]
    for row in results.secondary:
        mine = [r for r in records if r["policy"] == row.policy]
        counts = endpoints(mine)
        assert (row.stuck, row.recoverable_stuck, row.extra_calls) == (
            counts["S"],
            counts["recoverable stuck"],
            counts["extra calls"],
        )
        assert row.other_stuck == counts["S"] - counts["recoverable stuck"]
        assert row.recoverable == sum(r["fault"] == "F8" for r in mine)
        assert row.cleans == sum(r["fault"] == "C0" for r in mine)
        faults = sorted({r["fault"] for r in mine})  # C0 sorts first, then F1-F8
        assert results.endpoints_by_fault[row.policy] == {
            f: endpoints([r for r in mine if r["fault"] == f]) for f in faults
        }
        assert results.endpoints_by_family[row.policy] == {
            f: endpoints([r for r in mine if r["family"] == f])
            for f in sorted({r["family"] for r in mine})
        }
    by_policy = {row.policy: row for row in results.secondary}
    # The critic core stops on every F8 snapshot: all of its S is recoverable stuck.
    assert by_policy["critic_core"].recoverable_stuck == by_policy["critic_core"].stuck == 36
    write_report(run_dir)
    text = (run_dir / REPORT_DIR / "endpoints.md").read_text()
    assert "| Critic core | 36/288 | 36/36 | 0 | 0/36 |" in text
    for name in ("U", "C", "S", "Recoverable stuck", "Extra calls"):
        assert f"## {name} per fault\n" in text
        assert f"## {name} per family\n" in text
    page = (run_dir / REPORT_DIR / "report.html").read_text()
    assert "Secondary endpoints: recoverable stuck and extra calls" in page
    assert "Extra calls per family" in page


def test_simulated_full_trace_row_is_labelled_everywhere(run_dir: Path) -> None:
    write_report(run_dir)
    for name in ("table2.md", "table2.csv", "table2.tex", "endpoints.md"):
        text = (run_dir / REPORT_DIR / name).read_text()
        assert "Full-trace critic (simulated)" in text, name
        assert "| Full-trace critic |" not in text
    table = json.loads((run_dir / REPORT_DIR / "table2.json").read_text())
    assert table["simulated"] is True
    labels = {row["policy"]: row["label"] for row in table["rows"]}
    assert labels["full_trace_critic"] == "Full-trace critic (simulated)"


def test_report_regenerates_byte_identically_from_the_records(run_dir: Path) -> None:
    out = run_dir / REPORT_DIR
    write_report(run_dir)
    first = {name: (out / name).read_bytes() for name in REPORT_FILES}
    assert first["ucr.png"].startswith(b"\x89PNG\r\n\x1a\n")
    for name in REPORT_FILES:
        (out / name).unlink()
    write_report(run_dir)
    assert {name: (out / name).read_bytes() for name in REPORT_FILES} == first


def test_report_recomputes_from_changed_records(run_dir: Path) -> None:
    # The analysis is a function of the records: change three (in memory; the store itself
    # refuses any edit) and every figure follows.
    run = load_run(run_dir)
    flipped_tasks = ["w02-lookup", "w03-top_k", "w05-aggregation"]
    records = tuple(
        msgspec.structs.replace(r, decision=Verdict.COMPLETE, reason_codes=())
        if r.policy == "ect" and r.fault == "F2" and r.task_id in flipped_tasks
        else r
        for r in run.records
    )
    assert all(isinstance(r, DecisionRecord) for r in records)
    results = analyze(StaticRun(**{**msgspec.structs.asdict(run), "records": records}))
    ect = next(row for row in results.rows if row.policy == "ect")
    assert ect.unsafe == 3
    # The three tasks now have an unsafe complete under both policies: no longer discordant.
    assert (results.h1.b_ect, results.h1.b_critic) == (0, 33)
    assert results.h1.p_value == pytest.approx(2 / 2**33, rel=1e-12)
    assert results.h1.estimate_pp == pytest.approx(100 * (3 - 252) / 288)
    f2 = {row.ablation: row for row in results.ablations}["task_scope"]
    assert f2.ect_count == 0  # F4 untouched


def test_an_edited_record_is_refused_with_one_line(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    log = copy / "records.log"
    log.write_bytes(log.read_bytes().replace(b'"decision":"stuck"', b'"decision":"continue"', 1))
    with pytest.raises(TamperError, match=r"fails verification \(tamper, ") as caught:
        load_run(copy)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 3
