"""``harness v2 run|resume|status``: the full simulated study, refusals and exit codes.

The full run (the session's ``full_study``, shared with the other slow tests) is real:
preflight (lock of this tree, schedule, store, credential input, generation config, sandbox
probes), 576 cells with every tool call in a sandboxed child, fsynced commits, the manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from conftest import FullStudy

from harness.canonical import canonical_bytes
from harness.cli import main
from harness.lock import project_root, write_lock
from harness.store import RunStore, VerifyStatus, read_store, verify_store
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.schedule import canonical_schedule

FULL = 576


def _fresh_lock(directory: Path) -> Path:
    """The lock of this tree, written right before use (preflight's lock check passes)."""
    path = directory / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    return _fresh_lock(tmp_path)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _error(result: Any) -> str:
    """The error line: the last line of stderr (log lines from preflight may precede it)."""
    lines: list[str] = result.stderr.splitlines()
    assert lines, result.output
    assert "Traceback" not in result.stderr
    return lines[-1]


def _results(store: Path) -> list[bytes]:
    return [canonical_bytes(msgspec.convert(c.result, CellResult)) for c in read_store(store).cells]


@pytest.mark.slow
def test_v2_cli_run_executes_the_whole_simulated_study(full_study: FullStudy) -> None:
    store, result = full_study.store, full_study.done
    assert result.returncode == 0, result.stderr
    assert f"cells: {FULL}/{FULL} committed, {FULL} this session" in result.stdout
    assert "manifest: blake3:" in result.stdout
    assert "SIMULATED" in result.stdout
    assert f"{FULL}/{FULL} cells" in result.stderr  # the progress line
    report = verify_store(store)
    assert report.status is VerifyStatus.OK
    assert report.finalized
    assert report.cells == FULL
    cells = read_store(store).cells
    assert [c.row for c in cells] == canonical_schedule()
    first = cells[0]
    assert len(first.blobs) > len(first.attempts)  # its responses and the preflight report


@pytest.mark.slow
def test_v2_cli_status_summarizes_the_store(full_study: FullStudy) -> None:
    store = full_study.store
    result = _invoke("v2", "status", str(store))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("provider: simulated (SIMULATED, not a language model); model ")
    assert lines[2].startswith("Environment: ")
    assert lines[4].startswith(f"cells: {FULL}/{FULL} committed; finalized, manifest blake3:")
    assert [line.split()[0] for line in lines[-4:]] == ["critic", "controller", "full_trace", "ect"]
    ect = lines[-1].split()
    assert ect[1] == "0/66"  # ECT: no premature unsupported termination on primary cells
    doc = json.loads(_invoke("v2", "status", "--json", str(store)).stdout)
    assert doc["simulated"] is True
    assert doc["manifest"] == verify_store(store).manifest_digest
    assert doc["cells"] == FULL
    assert [p["policy"] for p in doc["pipelines"]] == ["critic", "controller", "full_trace", "ect"]
    assert all(p["U_of"] == 66 and p["S_of"] == 132 for p in doc["pipelines"])


@pytest.mark.slow
def test_v2_cli_resume_after_a_torn_first_record_reproduces_the_run(
    tmp_path: Path, lock: Path, full_study: FullStudy
) -> None:
    done = full_study.store
    store = tmp_path / "store"
    RunStore.create(store, lock.read_bytes(), canonical_schedule()).close()
    first_cell = (done / "records.log").read_bytes().split(b"\n")[1]
    with (store / "records.log").open("ab") as f:
        f.write(first_cell[:1000])  # a writer killed in the middle of its first append
    assert verify_store(store).status is VerifyStatus.TORN
    result = _invoke("v2", "resume", str(store), "--lock", str(lock))
    assert result.exit_code == 0, result.output
    assert f"cells: {FULL}/{FULL} committed, {FULL} this session" in result.stdout
    assert _results(store) == _results(done)


def test_v2_cli_run_refuses_a_store_that_exists(tmp_path: Path, lock: Path) -> None:
    store = tmp_path / "store"
    RunStore.create(store, lock.read_bytes(), canonical_schedule()).close()
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock))
    assert result.exit_code == 2
    assert _error(result) == (
        f"error: {store} already holds a run store with 0 committed cells; "
        f"continue it with `harness v2 resume {store} --lock {lock}`"
    )


def test_v2_cli_preflight_blocks_a_lock_that_is_not_this_tree(tmp_path: Path) -> None:
    lock = tmp_path / "lock.json"
    lock.write_bytes(b'{"schema": "not a lock"}')
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock))
    assert result.exit_code == 3
    error = _error(result)
    assert error.startswith("error: preflight failed (")
    assert "lock: " in error
    assert not store.exists()


def test_v2_cli_missing_lock_is_one_line(tmp_path: Path) -> None:
    result = _invoke("v2", "run", "--store", str(tmp_path / "s"), "--lock", str(tmp_path / "no"))
    assert result.exit_code == 2
    assert _error(result).startswith("error: cannot read the study lock ")
    assert _error(result).endswith("write it with `harness lock`")


def test_v2_cli_resume_needs_a_store(tmp_path: Path, lock: Path) -> None:
    result = _invoke("v2", "resume", str(tmp_path / "none"), "--lock", str(lock))
    assert result.exit_code == 2
    assert _error(result) == f"error: no store at {tmp_path / 'none'}"


def test_v2_cli_status_of_a_missing_store(tmp_path: Path) -> None:
    result = _invoke("v2", "status", str(tmp_path / "none"))
    assert result.exit_code == 2
    assert _error(result) == f"error: no store at {tmp_path / 'none'}"


def test_v2_cli_refuses_credential_options_with_the_simulated_provider(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("k\n")
    result = _invoke("v2", "run", "--credential-file", str(key))
    assert result.exit_code == 2
    assert "applies only to --provider gemini" in _error(result)
