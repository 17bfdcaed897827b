"""``v2 report`` over real stores: Table 4 as in the paper, H2-H4 lines, every file, bindings."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from v2_report_support import CONFIG_PATH, all_results, synthetic_store

from harness.cli import main
from harness.errors import StudyReportError
from harness.store import RunStore
from harness.studies.v2.report import REPORT_FILES, ReportDocument, build_report, render_files

PILOT_NOTE = "not evaluated: PILOT: 24 of the 576 rows of the frozen schedule; not the study"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_store(tmp_path_factory.mktemp("v2") / "run")


def _as_full_study(document: ReportDocument) -> ReportDocument:
    """The synthetic store's document as if its 24 rows were the whole frozen schedule: how a
    finalized full store's verdicts are worded (a real one takes a 576-cell run)."""
    run = document.store.run
    assert run is not None
    full = msgspec.structs.replace(
        run, pilot="", partial=False, state="complete: 24 of 24 cells, finalized"
    )
    store = msgspec.structs.replace(document.store, run=full, run_line=full.line(), pilot="")
    return msgspec.structs.replace(document, pilot=False, partial=False, store=store)


def test_v2_report_of_a_subset_store_gives_no_verdict_in_any_file(store: Path) -> None:
    files = build_report(store, CONFIG_PATH).files
    text = files["report.md"].decode()
    assert f"H2, H3, H4: {PILOT_NOTE}." in text.splitlines()
    assert not any(line.startswith(("H2 ", "H3 ", "H4 ")) for line in text.splitlines())
    for name in ("report.md", "report.html", "hypotheses.csv", "analysis.json", "table4.csv"):
        assert b"PASS" not in files[name], name
        assert b"FAIL" not in files[name], name
    hypotheses = list(csv.DictReader(io.StringIO(files["hypotheses.csv"].decode())))
    assert [(h["hypothesis"], h["passed"], h["criterion"]) for h in hypotheses] == [
        ("H2-H4", "", PILOT_NOTE)
    ]
    analysis = json.loads(files["analysis.json"])["analysis"]
    for name in ("h2", "h3", "h4"):
        assert "passed" not in analysis[name]
        assert analysis[name]["verdict"] == PILOT_NOTE


def test_v2_report_markdown_table4_and_hypothesis_lines(store: Path) -> None:
    document = _as_full_study(build_report(store, CONFIG_PATH).document)
    text = render_files(document)["report.md"].decode()
    lines = text.splitlines()
    start = lines.index(
        "| Pipeline | U/2 | S/4 | FC/2 | R/2 | Turns | Calls | Transport | Rate limit | Auth "
        "| Server | Unusable |"
    )
    assert lines[start + 1] == "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    assert lines[start + 2 : start + 6] == [
        "| Current critic | 2 | 2 | 0 | 0 | 1.00 | 0.00 | 0 | 0 | 0 | 0 | 0 |",
        "| Controller | 2 | 2 | 0 | 0 | 1.00 | 0.00 | 0 | 0 | 0 | 0 | 0 |",
        "| Full-trace | 1 | 1 | 1 | 0 | 1.00 | 0.00 | 0 | 0 | 0 | 0 | 0 |",
        "| ECT | 0 | 3 | 0 | 2 | 2.00 | 0.50 | 0 | 0 | 0 | 0 | 0 |",
    ]
    # The synthetic cells record no provider attempt: no call, no failure, no banner.
    assert "Provider calls: 0 calls (0 attempts) included 0 retries (0 successful) and 0 " in text
    assert "INFRASTRUCTURE FAILURES" not in text
    h2 = next(line for line in lines if line.startswith("H2 "))
    assert "difference -100.00 pp, 95% task-cluster interval [-100.00, -100.00] pp" in h2
    assert h2.endswith("PASS (point estimate below 0 and interval wholly below 0)")
    h3 = next(line for line in lines if line.startswith("H3 "))
    assert "3/4 vs 2/4, difference 25.00 pp" in h3
    assert "[0.00, 50.00] pp" in h3
    assert "PASS" in h3
    h4 = next(line for line in lines if line.startswith("H4 "))
    # The frozen gate: >= 10% recovered and >= 75% of those completed; here 2/2 and 1/2.
    assert "2/2 recovered (100.00%" in h4
    assert "1/2 then completed with support (50.00%); FAIL" in h4
    # Named first, also for a store without a bound identity (named by its results).
    assert lines[2] == (
        "Run: provider simulated (SIMULATED, not a language model); model simulated; endpoint "
        "none; planner none; credential none; complete: 24 of 24 cells, finalized."
    )
    assert "SIMULATED PROVIDER" in lines[4]
    assert "## Unseen-fault strata (U1; descriptive)" in lines
    assert any(line.startswith("## Trust-boundary clusters") for line in lines)
    assert "| turns (decisions) | 2.000 | 1.000 | 1.000 | [1.000, 1.000] |" in lines


def test_v2_report_csv_tex_json_png(store: Path) -> None:
    files = render_files(_as_full_study(build_report(store, CONFIG_PATH).document))
    assert sorted(files) == sorted([*REPORT_FILES, "report-manifest.json"])
    rows = list(csv.reader(io.StringIO(files["table4.csv"].decode())))
    identity = ["provider", "model", "endpoint", "planner", "credential", "state"]
    failures = ["Transport", "Rate limit", "Auth", "Server", "Unusable"]
    assert rows[0] == [
        "Pipeline", "U/2", "S/4", "FC/2", "R/2", "Turns", "Calls", *failures, *identity,
    ]  # fmt: skip
    assert rows[4] == [
        "ECT", "0", "3", "0", "2", "2.00", "0.50", "0", "0", "0", "0", "0",
        "simulated", "simulated", "none", "none", "none", "complete: 24 of 24 cells, finalized",
    ]  # fmt: skip
    hypotheses = list(csv.DictReader(io.StringIO(files["hypotheses.csv"].decode())))
    assert [(h["hypothesis"], h["passed"]) for h in hypotheses] == [
        ("H2", "true"),
        ("H3", "true"),
        ("H4", "false"),
    ]
    tex = files["table4.tex"].decode()
    assert "ECT & 0 & 3 & 0 & 2 & 2.00 & 0.50 & 0 & 0 & 0 & 0 & 0 \\\\" in tex
    assert "Run: provider simulated (SIMULATED, not a language model)" in tex
    document = json.loads(files["analysis.json"])
    assert document["analysis"]["simulated"] is True
    assert document["analysis"]["h3"]["estimate_pp"] == 25.0
    assert document["store"]["cells"] == 24
    assert files["figure.png"].startswith(b"\x89PNG\r\n\x1a\n")
    manifest = json.loads(files["report-manifest.json"])
    assert sorted(manifest["files"]) == sorted(REPORT_FILES)


def test_v2_report_is_byte_deterministic(store: Path) -> None:
    assert build_report(store, CONFIG_PATH).files == build_report(store, CONFIG_PATH).files


def test_v2_report_refuses_a_config_the_lock_does_not_cover(store: Path, tmp_path: Path) -> None:
    other = tmp_path / "v2-config.json"
    document = msgspec.json.decode(CONFIG_PATH.read_bytes())
    document["analysis"]["bootstrap_seed"] += 1
    other.write_bytes(msgspec.json.encode(document))
    with pytest.raises(StudyReportError, match=r"is not the one store .* is locked to"):
        build_report(store, other)


def test_v2_report_refuses_a_store_not_bound_to_a_study_lock(tmp_path: Path) -> None:
    result = all_results()[0]
    with RunStore.create(tmp_path / "run", b"not a lock\n", [{"cell_id": result.cell_id}]) as w:
        w.commit_cell(0, msgspec.to_builtins(result), [])
    with pytest.raises(StudyReportError, match=r"is not bound to a V2 study lock"):
        build_report(tmp_path / "run", CONFIG_PATH)


def test_v2_report_refuses_a_tampered_store(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(store, copy)
    records = copy / "records.log"
    records.write_bytes(records.read_bytes().replace(b'"tokens":100', b'"tokens":101', 1))
    with pytest.raises(StudyReportError, match=r"fails verification \(RECORD_HASH_MISMATCH\)"):
        build_report(copy, CONFIG_PATH)


def test_v2_report_refuses_results_that_are_not_v2_results(tmp_path: Path) -> None:
    from harness.lock import build_lock, encode_lock

    with RunStore.create(tmp_path / "run", encode_lock(build_lock()), [{"cell_id": "x"}]) as w:
        w.commit_cell(0, {"cell_id": "x", "outcome": "fine"}, [])
    with pytest.raises(StudyReportError, match=r"record 1 \(row 0\) is not a V2 cell result"):
        build_report(tmp_path / "run", CONFIG_PATH)


def test_v2_report_cli_prints_table4_and_writes_files(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["v2", "report", str(store), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "| ECT | 0 | 3 | 0 | 2 | 2.00 | 0.50 |" in result.stdout
    assert f"wrote 10 files to {out}" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([*REPORT_FILES, "report-manifest.json"])
    assert (out / "table4.csv").read_bytes() == (store / "report" / "table4.csv").read_bytes()
