"""Replay: a real (small) V2 run re-runs identically offline; tampered tables and results fail.

The store comes from the real V2 scheduler (simulated provider, real sandbox) over the first
eight rows of the canonical schedule. Replay runs in-process here and, once, as a real child
process in a fresh network namespace with every credential variable removed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from v2_report_support import CONFIG_PATH, real_store

from harness.cli import main
from harness.lock import build_lock, encode_lock
from harness.store import RunStore, read_blob, read_store
from harness.studies._replay import offline
from harness.studies.v2.replay import render_replay, replay_store

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return real_store(tmp_path_factory.mktemp("replay") / "run")


@pytest.fixture
def copy(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(run, target)
    return target


def test_replay_reproduces_every_cell_and_table(run: Path) -> None:
    report = replay_store(run, CONFIG_PATH)
    assert report.ok, render_replay(report)
    assert (report.cells, report.cells_replayed, report.cells_identical) == (8, 8, 8)
    view = read_store(run)
    attempts = sum(len(record.audit) for record in view.cells)
    assert report.attempts_served == attempts > 0
    turns = sum(record.result["turns"] for record in view.cells)
    assert report.decisions_replayed == turns
    assert report.policy_decisions_replayed > 0
    assert report.tables_compared == (
        "report.md",
        "table4.csv",
        "table4.tex",
        "hypotheses.csv",
        "analysis.json",
        "report.html",
        "figure.png",
        "figure.svg",
        "figure.pdf",
        "report-manifest.json",
    )
    assert report.mismatches == report.table_mismatches == report.not_replayable == ()
    assert render_replay(report).endswith("replay passed")


@pytest.mark.parametrize(
    "name", ["table4.csv", "report.md", "figure.png", "figure.svg", "figure.pdf", "report.html"]
)
def test_replay_detects_a_tampered_table(copy: Path, name: str) -> None:
    path = copy / "report" / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    report = replay_store(copy, CONFIG_PATH)
    assert not report.ok
    assert report.table_mismatches == (f"{name}: the stored file differs from the regenerated one",)
    assert report.mismatches == ()  # the cells themselves still replay


def test_replay_detects_a_missing_table(copy: Path) -> None:
    (copy / "report" / "table4.tex").unlink()
    report = replay_store(copy, CONFIG_PATH)
    assert report.table_mismatches == (f"table4.tex: not in {copy / 'report'}",)


def test_replay_without_a_report_compares_the_decisions_and_says_so(copy: Path) -> None:
    shutil.rmtree(copy / "report")
    report = replay_store(copy, CONFIG_PATH)
    assert report.ok, render_replay(report)
    assert report.cells_identical == 8
    assert report.tables_compared == report.table_mismatches == ()
    assert report.no_report == (
        f"no report in {copy / 'report'} to compare yet (write one with `harness v2 report {copy}`)"
    )
    assert render_replay(report).endswith(
        f"tables: not compared: {report.no_report}\n"
        "replay passed (decisions only: no report compared)"
    )
    # An empty report folder is a report with every file missing, not "no report".
    (copy / "report").mkdir()
    assert not replay_store(copy, CONFIG_PATH).ok


def _rebuild(source: Path, target: Path, change: dict[int, dict[str, object]]) -> None:
    """A new, valid store with ``source``'s cells and blobs, some results changed."""
    view = read_store(source)
    rows = [record.row for record in view.cells]
    with RunStore.create(target, encode_lock(build_lock()), rows) as writer:
        for record in view.cells:
            for blob in record.blobs:
                writer.put_blob(read_blob(source, blob))
            result = {**record.result, **change.get(record.row_index, {})}
            writer.commit_cell(record.row_index, result, list(record.audit), blobs=record.blobs)
    shutil.copytree(source / "report", target / "report")


def test_replay_detects_a_result_the_trajectory_does_not_give(run: Path, tmp_path: Path) -> None:
    target = tmp_path / "forged"
    stored = read_store(run).cells[1].result
    _rebuild(run, target, {1: {"missing_at_end": stored["missing_at_end"] + 1}})
    report = replay_store(target, CONFIG_PATH)
    assert not report.ok
    row = read_store(run).cells[1].row
    assert report.mismatches == (
        f"row 1 ({row['cell_id']}): result differs: missing_at_end is "
        f"{stored['missing_at_end']}, the store records {stored['missing_at_end'] + 1}",
    )
    assert report.cells_identical == 7


def test_replay_offline_guard_refuses_connections() -> None:
    with offline(), pytest.raises(OSError, match=r"^network access is refused during replay$"):
        socket.create_connection(("127.0.0.1", 9))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass  # restored after the block
    finally:
        listener.close()


def test_replay_cli_exit_codes(copy: Path) -> None:
    runner = CliRunner(env={"GEMINI_API_KEY": "AIza" + "k" * 35})
    result = runner.invoke(main, ["replay", str(copy)])
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("replay passed")
    (copy / "report" / "hypotheses.csv").write_text("forged\n")
    result = runner.invoke(main, ["replay", str(copy)])
    assert result.exit_code == 3
    assert "TABLE: hypotheses.csv: the stored file differs" in result.stdout


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_replay_runs_without_network_or_credential_in_a_child(run: Path) -> None:
    probe = subprocess.run(["unshare", "-rn", "true"], check=False, capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user and network namespaces are not available here")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("GOOGLE_", "GEMINI_"))}
    harness = Path(sys.executable).with_name("harness")
    done = subprocess.run(
        ["unshare", "-rn", str(harness), "replay", str(run), "--json"],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report = msgspec.json.decode(done.stdout)
    assert report["cells_identical"] == 8


def test_replay_reports_a_recorded_sandbox_failure_as_not_replayable(
    run: Path, tmp_path: Path
) -> None:
    view = read_store(run)
    index, step = next(
        (record.row_index, i)
        for record in view.cells
        for i, s in enumerate(record.result["steps"])
        if s["action"] == "call_tool" and s.get("call_outcome") == "ok"
    )
    steps = [dict(s) for s in view.cells[index].result["steps"]]
    steps[step]["sandbox_outcome"] = "timeout"
    target = tmp_path / "failed"
    _rebuild(run, target, {index: {"steps": steps}})
    report = replay_store(target, CONFIG_PATH)
    row = view.cells[index].row
    decision = steps[step]["decision"]
    assert report.not_replayable == (
        f"row {index} ({row['cell_id']}): decision {decision}: the sandboxed call ended "
        "timeout, whose message the result does not record",
    )
    assert report.cells_replayed == 7
