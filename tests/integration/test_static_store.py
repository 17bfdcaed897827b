"""The static study on the run store: verify, audit and replay as for V2; tamper; kill; resume.

Real stores, real fsync, real subprocesses: a dev-split run (108 snapshots, simulated provider)
is verified (exit 0), audited (0) and replayed offline (0); a tampered record, blob or journal
entry makes verify exit 3 and report and replay refuse; a run killed with SIGKILL mid-way
verifies as torn or not finalized, and ``harness static resume`` finishes it with results and
report files byte-identical to the uninterrupted run's. Resume refuses what contradicts the
store in one line.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.canonical import canonical_bytes
from harness.cli import main
from harness.store import RunStore, read_store
from harness.studies.report_manifest import REPORT_MANIFEST
from harness.studies.runs import list_runs
from harness.studies.static.report import REPORT_DIR, REPORT_FILES

STATIC = ["static", "run", "--split", "dev", "--out"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("static-store") / "dev"
    runner = CliRunner()
    assert runner.invoke(main, [*STATIC, str(out)]).exit_code == 0
    assert runner.invoke(main, ["static", "report", str(out)]).exit_code == 0
    return out


def _results(store: Path) -> list[bytes]:
    return [canonical_bytes(cell.result) for cell in read_store(store).cells]


def _report(store: Path) -> dict[str, bytes]:
    return {name: (store / REPORT_DIR / name).read_bytes() for name in REPORT_FILES}


def test_verify_audit_and_replay_pass_on_a_static_store(reference: Path) -> None:
    runner = CliRunner()
    verified = runner.invoke(main, ["store", "verify", str(reference)])
    assert verified.exit_code == 0, verified.output
    assert "109 records (108 cells) verified, finalized" in verified.stdout
    audited = runner.invoke(main, ["audit", str(reference)])
    assert audited.exit_code == 0, audited.output
    assert "\nstudy: static\n" in audited.stdout
    assert "attempts: 108 journaled, 108 ended, 108 bound to their cells" in audited.stdout
    replayed = runner.invoke(main, ["replay", str(reference)])
    assert replayed.exit_code == 0, replayed.output
    assert "snapshots: 108/108 replayed identically" in replayed.stdout
    assert "decisions: 1512 policy decisions recomputed; 108 recorded provider attempts" in (
        replayed.stdout
    )
    assert "tables: 15/15 regenerated files equal the stored ones" in replayed.stdout
    assert replayed.stdout.endswith("replay passed\n")


def test_replay_fails_when_a_report_file_differs(reference: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    table = copy / REPORT_DIR / "table2.md"
    table.write_bytes(table.read_bytes().replace(b"| ECT | 0 |", b"| ECT | 1 |"))
    replayed = CliRunner().invoke(main, ["replay", str(copy)])
    assert replayed.exit_code == 3
    assert "TABLE: table2.md: the stored file differs from the regenerated one" in replayed.stdout


def test_replay_without_a_report_compares_the_decisions_and_says_so(
    reference: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    shutil.rmtree(copy / REPORT_DIR)
    replayed = CliRunner().invoke(main, ["replay", str(copy)])
    assert replayed.exit_code == 0, replayed.output
    assert "snapshots: 108/108 replayed identically" in replayed.stdout
    assert (
        f"tables: not compared: no report in {copy / REPORT_DIR} to compare yet (write one "
        f"with `harness static report {copy}`)\n"
    ) in replayed.stdout
    assert replayed.stdout.endswith("replay passed (decisions only: no report compared)\n")
    # A report folder the user names must be there: its absence is a failure.
    named = CliRunner().invoke(main, ["replay", str(copy), "--report", str(tmp_path / "none")])
    assert named.exit_code == 3, named.output
    assert f"TABLE: table2.md: not in {tmp_path / 'none'}" in named.stdout


def _tamper_record(store: Path) -> None:
    log = store / "records.log"
    log.write_bytes(log.read_bytes().replace(b'"decision":"stuck"', b'"decision":"complete"', 1))


def _tamper_blob(store: Path) -> None:
    blob = sorted((store / "blobs").iterdir())[0]
    blob.write_bytes(blob.read_bytes() + b" ")


def _tamper_journal(store: Path) -> None:
    log = store / "journal.log"
    data = log.read_bytes()
    at = data.index(b'"simulated"')
    log.write_bytes(data[:at] + b'"Simulated"' + data[at + len(b'"simulated"') :])


def _tamper_lock_copy(store: Path) -> None:
    lock = store / "study.lock"
    lock.write_bytes(lock.read_bytes() + b" ")


@pytest.mark.parametrize(
    "tamper", [_tamper_record, _tamper_blob, _tamper_journal, _tamper_lock_copy]
)
def test_tamper_is_caught_and_report_and_replay_refuse(
    reference: Path, tmp_path: Path, tamper: object
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    assert callable(tamper)
    tamper(copy)
    runner = CliRunner()
    assert runner.invoke(main, ["store", "verify", str(copy)]).exit_code == 3
    before = _report(copy)
    report = runner.invoke(main, ["static", "report", str(copy)])
    assert report.exit_code == 3
    assert report.stdout == ""
    assert report.stderr.startswith("error: store ")
    assert "fails verification (tamper, " in report.stderr
    assert report.stderr.count("\n") == 1
    assert _report(copy) == before  # nothing rewritten
    assert runner.invoke(main, ["replay", str(copy)]).exit_code == 3
    assert runner.invoke(main, ["audit", str(copy)]).exit_code == 3
    (copy / "MANIFEST").unlink()  # unfinalized: resume would write if it accepted the store
    resumed = runner.invoke(main, ["static", "resume", str(copy)])
    assert resumed.exit_code == 3, resumed.output
    assert resumed.stderr.count("\n") == 1


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _started(store: Path, records: int, output: int) -> subprocess.Popen[bytes]:
    """A real `harness static run` into ``store``, returned once ``records`` lines are written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "-q", *STATIC, str(store)],
        stdout=output,
        stderr=output,
    )
    deadline = time.monotonic() + 120
    while _lines(store / "records.log") < records and process.poll() is None:
        assert time.monotonic() < deadline, "the run committed nothing in time"
        time.sleep(0.005)
    return process


def test_kill_9_mid_run_then_resume_gives_the_uninterrupted_results(
    reference: Path, tmp_path: Path
) -> None:
    store = tmp_path / "killed"
    process = _started(store, 30, subprocess.DEVNULL)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    runner = CliRunner()
    verified = runner.invoke(main, ["store", "verify", str(store)])
    assert verified.exit_code in (1, 4), verified.output
    assert len(read_store(store).cells) < 108
    (listed,) = list_runs(tmp_path)
    assert (listed.study, listed.state, listed.expected) == ("static", "interrupted", 108)
    partial = runner.invoke(main, ["static", "report", str(store)])
    assert partial.exit_code == 0, partial.output
    assert partial.stdout.startswith("PARTIAL: the store is not finalized; only ")
    for name in ("table2.md", "endpoints.md", "report.html"):
        assert "PARTIAL: the store is not finalized" in (store / REPORT_DIR / name).read_text()
    # Every file carries the partial state (CSV column, TeX caption, figure) and no H1 verdict.
    done = len(read_store(store).cells)
    manifest = json.loads((store / REPORT_DIR / REPORT_MANIFEST).read_bytes())
    assert (manifest["schema"], manifest["partial"]) == ("harness.static-report-manifest.v1", True)
    written = sorted(p.name for p in (store / REPORT_DIR).iterdir() if p.name != REPORT_MANIFEST)
    assert (manifest["store"]["cells"], sorted(manifest["files"])) == (done, written)
    shutil.copytree(store / REPORT_DIR, tmp_path / "partial-report")
    for path in sorted((store / REPORT_DIR).iterdir()):
        if path.name == REPORT_MANIFEST:
            continue
        data = path.read_bytes()
        assert f"PARTIAL: {done} of 108 snapshots, not finalized".encode() in data, path.name
        assert b"H1 passed" not in data, path.name
        assert b"H1 failed" not in data, path.name
    assert f"H1 (ECT vs critic core): not evaluated: {done} of 108 snapshots." in partial.stdout
    resumed = runner.invoke(main, ["static", "resume", str(store)])
    assert resumed.exit_code == 0, resumed.output
    assert "108/108 snapshots committed" in resumed.stdout
    assert not (store / REPORT_DIR).exists()  # the partial report is stale: removed
    assert runner.invoke(main, ["store", "verify", str(store)]).exit_code == 0
    assert _results(store) == _results(reference)
    assert runner.invoke(main, ["static", "report", str(store)]).exit_code == 0
    assert _report(store) == _report(reference)
    assert runner.invoke(main, ["audit", str(store)]).exit_code == 0
    assert runner.invoke(main, ["replay", str(store)]).exit_code == 0
    # The partial report, kept aside, is stale now: replay says so from its manifest.
    stale = runner.invoke(
        main, ["replay", str(store), "--report", str(tmp_path / "partial-report")]
    )
    assert stale.exit_code == 3, stale.output
    assert f"tables: report is stale (made at {done} cells)" in stale.stdout
    assert f"TABLE: report is stale (made at {done} cells; the store holds 108)" in stale.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_cleanly_and_resume_finishes(
    reference: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    store = tmp_path / "stopped"
    process = _started(store, 20, subprocess.PIPE)
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    lines = err.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: stopped by {sig.name} after ")
    assert lines[0].endswith(f"continue with `harness static resume {store}`")
    verified = CliRunner().invoke(main, ["store", "verify", str(store)])
    assert verified.exit_code == 4, verified.output  # clean stop: not finalized, not torn
    resumed = CliRunner().invoke(main, ["static", "resume", str(store)])
    assert resumed.exit_code == 0, resumed.output
    assert _results(store) == _results(reference)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_further_signals_while_stopping_are_noted_not_fatal(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """GNU timeout sends its signal twice, an impatient user presses Ctrl-C again: the run
    still ends with its one stop line and exit 130."""
    store = tmp_path / "stopped"
    process = _started(store, 20, subprocess.PIPE)
    for _ in range(6):  # the first stops the run; the others land while it winds down
        if process.poll() is not None:
            break
        process.send_signal(sig)
        time.sleep(0.02)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    lines = err.decode().splitlines()
    assert lines[-1].startswith(f"error: stopped by {sig.name} after ")
    assert lines[-1].endswith(f"continue with `harness static resume {store}`")
    note = "harness: already stopping; the run ends at its next safe point"
    assert set(lines[:-1]) <= {note}
    assert CliRunner().invoke(main, ["store", "verify", str(store)]).exit_code == 4


def test_resume_of_a_finalized_store_writes_nothing(reference: Path) -> None:
    before = (reference / "records.log").read_bytes(), (reference / "journal.log").read_bytes()
    result = CliRunner().invoke(main, ["static", "resume", str(reference)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("complete: 108 snapshots, manifest blake3:")
    after = (reference / "records.log").read_bytes(), (reference / "journal.log").read_bytes()
    assert after == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--provider", "gemini", "--credential-env", "K"],
            r"^error: store .* was run with provider simulated; --provider gemini contradicts "
            r"it \(resume takes the provider from the store\)\n$",
        ),
        (["--planner", "x:y"], r"^error: store .* was run with no planner plug-in; --planner "),
        (["--model", "m"], r"^error: store .* was run with no --model; --model m contradicts it"),
        (
            ["--provider-base-url", "http://127.0.0.1:1/"],
            r"^error: store .* was run with the simulated provider, which has no endpoint; "
            r"--provider-base-url http://127.0.0.1:1/ contradicts it\n$",
        ),
        (
            ["--no-credential"],
            r"^error: store .* was run with .*; --no-credential applies only to an openai store",
        ),
    ],
    ids=["provider", "planner", "model", "base-url", "no-credential"],
)
def test_resume_refuses_contradicting_flags_in_one_line(
    reference: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    (copy / "MANIFEST").unlink()  # an unfinalized store: resume would write
    before = (copy / "records.log").read_bytes()
    result = CliRunner().invoke(main, ["static", "resume", str(copy), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert re.match(message, result.stderr), result.stderr
    assert (copy / "records.log").read_bytes() == before


def test_resume_and_audit_tell_the_study_from_the_genesis(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["static", "resume", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
    assert missing.stderr == f"error: no store at {tmp_path / 'nowhere'}\n"
    v2_like = tmp_path / "v2"
    RunStore.create(v2_like, b"lock", [{"cell_id": "a"}]).close()
    refused = runner.invoke(main, ["static", "resume", str(v2_like)])
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"error: {v2_like} is not a static study store (its genesis names no study)\n"
    )
    other = tmp_path / "other"
    RunStore.create(other, b"lock", [{"cell_id": "a"}], identity={"study": "other"}).close()
    for command in (["audit", str(other)], ["replay", str(other)]):
        result = runner.invoke(main, command)
        assert result.exit_code == 2
        assert result.stderr == (
            f"error: {other} is neither a V2 nor a static study store (its genesis names "
            "study 'other')\n"
        )


def test_resume_refuses_another_lock_or_generation_config(reference: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    (copy / "MANIFEST").unlink()
    other_lock = tmp_path / "other-lock.json"
    other_lock.write_bytes(b'{"another": "lock"}')
    result = runner.invoke(main, ["static", "resume", str(copy), "--lock", str(other_lock)])
    assert result.exit_code == 2, result.output
    assert re.fullmatch(
        r"error: store .* is bound to lock blake3:\w+, not blake3:\w+\n", result.stderr
    )
    view = read_store(reference)
    assert view.genesis is not None
    identity = dict(view.genesis.identity)
    identity["provider"] = {
        **identity["provider"],
        "generation_config_digest": "blake3:" + "0" * 64,
    }
    rows = [cell.row for cell in view.cells]
    changed = tmp_path / "changed"
    RunStore.create(
        changed, (reference / "study.lock").read_bytes(), rows, identity=identity
    ).close()
    result = runner.invoke(main, ["static", "resume", str(changed)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: store {changed} was run with generation config ")
    assert result.stderr.count("\n") == 1
    assert len(read_store(changed).cells) == 0


def test_v2_commands_name_a_static_store_in_one_line(reference: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    for command, said in (
        (["v2", "report", str(reference), "--out", str(tmp_path / "r")], "harness static report"),
        (["v2", "status", str(reference)], "harness static report|resume"),
        (["v2", "resume", str(reference)], "harness static report|resume"),
        (["v2", "cells", str(reference)], "harness static report|resume"),
        (["v2", "show", str(reference), "w02-lookup"], "harness static report|resume"),
        (["export", str(reference), str(tmp_path / "x")], "export bundles V2 stores only"),
    ):
        result = runner.invoke(main, command)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"error: {reference} is a static study store: ")
        assert said in result.stderr
        assert result.stderr.count("\n") == 1
    assert not (tmp_path / "r").exists()
    assert not (tmp_path / "x").exists()
