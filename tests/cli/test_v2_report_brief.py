"""``harness v2 report --brief``: the first screen of ``scripts/run`` (Table 4, H2-H4, the page).

A real simulated pilot, then the report: every file is written, and only Table 4, the hypotheses
section and the line naming ``report.html`` are printed, not the whole report.md.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.cli.v2_report import brief_report
from harness.lock import project_root, write_lock


def test_brief_report_prints_table4_hypotheses_and_the_page(tmp_path: Path) -> None:
    lock = tmp_path / "lock.json"
    write_lock(lock, project_root())
    store = tmp_path / "store"
    runner = CliRunner()
    ran = runner.invoke(
        main, ["v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "8"]
    )
    assert ran.exit_code == 0, ran.output
    result = runner.invoke(main, ["v2", "report", "--brief", str(store)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "## Table 4"
    assert "## Hypotheses" in lines
    assert "H2, H3, H4: not evaluated: PILOT: 8 of 576 cells (--limit 8); not the study." in lines
    assert not any("PASS" in line for line in lines)  # a pilot carries no verdict
    assert lines[-1] == f"open {store / 'report' / 'report.html'}"
    assert not any(line.startswith("## Unseen-fault strata") for line in lines)
    whole = (store / "report" / "report.md").read_text()
    assert len(lines) < len(whole.splitlines()) / 3
    assert (store / "report" / "report.html").is_file()


def test_brief_report_cuts_at_the_next_section() -> None:
    text = "# T\n\nintro\n\n## Table 4\n\n| a |\n\n## Hypotheses\n\nH2 passed.\n\n## Other\n\nx\n"
    assert brief_report(text) == "## Table 4\n\n| a |\n\n## Hypotheses\n\nH2 passed.\n"
    assert brief_report("no sections\n") == "no sections\n"
