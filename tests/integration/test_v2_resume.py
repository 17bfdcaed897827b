"""Stopping and resuming the V2 run: kill -9, SIGTERM, genesis only, a torn first record.

A real driver process (``v2_support.py``) runs a prefix of the canonical schedule with the real
sandbox and store; the tests kill it and resume. The simulated provider is deterministic, so a
resumed store must hold byte-identical cell results to an uninterrupted run, each row once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from v2_support import reduced, run_into

from harness.canonical import canonical_bytes
from harness.sandbox import open_backend
from harness.store import RunStore, SessionEntry, VerifyStatus, read_store, verify_store
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.schedule import plain_rows

ROWS = 48  # seed 1 of world 10: 6 tasks x 2 checkpoints x 4 pipelines
DRIVER = Path(__file__).resolve().parent / "v2_support.py"
TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "lock.json"
    path.write_bytes(b'{"lock": "opaque test lock"}')
    return path


@pytest.fixture(scope="module")
def tools() -> SandboxTools:
    return SandboxTools(open_backend(), timeout_s=20.0)


@pytest.fixture(scope="module")
def reference_store(tmp_path_factory: pytest.TempPathFactory, lock: Path, tools: Any) -> Path:
    store = tmp_path_factory.mktemp("ref") / "store"
    report = run_into(store, reduced(ROWS), lock.read_bytes(), resume=False, tools=tools)
    assert report.complete
    assert _stored(store) == [canonical_bytes(r) for r in report.results]
    return store


@pytest.fixture(scope="module")
def reference(reference_store: Path) -> list[bytes]:
    return _stored(reference_store)


def _stored(store: Path) -> list[bytes]:
    view = read_store(store)
    assert [c.row_index for c in view.cells] == list(range(len(view.cells)))
    return [canonical_bytes(msgspec.convert(c.result, CellResult)) for c in view.cells]


def _records(store: Path) -> int:
    try:
        return (store / "records.log").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _start(mode: str, store: Path, lock: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    log = store.parent / f"driver-{mode}.log"
    with log.open("ab") as out:  # a file, not a pipe: a killed child leaves nothing unread
        return subprocess.Popen(
            [sys.executable, str(DRIVER), mode, str(store), str(lock), str(ROWS)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _log(store: Path, mode: str) -> str:
    return (store.parent / f"driver-{mode}.log").read_text()


def _stop_after(process: subprocess.Popen[bytes], store: Path, records: int, sig: int) -> None:
    """Send ``sig`` once the store holds ``records`` records (or fail if the run ends first)."""
    deadline = time.monotonic() + TIMEOUT_S
    while _records(store) < records:
        if process.poll() is not None:
            pytest.fail(f"the driver ended before {records} records")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the driver made no progress")
        time.sleep(0.005)
    process.send_signal(sig)


def _sessions(store: Path) -> list[int]:
    return [e.records for e in read_store(store).journal if isinstance(e, SessionEntry)]


def test_v2_kill_9_twice_then_resume_gives_the_uninterrupted_results(
    tmp_path: Path, lock: Path, tools: Any, reference: list[bytes]
) -> None:
    store = tmp_path / "store"
    process = _start("create", store, lock)
    _stop_after(process, store, 10, signal.SIGKILL)
    assert process.wait(TIMEOUT_S) == -signal.SIGKILL
    first = verify_store(store)
    assert first.status is not VerifyStatus.TAMPER
    assert 9 <= first.cells < ROWS
    # A second writer resumes in a new process and is killed again.
    process = _start("resume", store, lock)
    _stop_after(process, store, first.cells + 16, signal.SIGKILL)
    assert process.wait(TIMEOUT_S) == -signal.SIGKILL
    second = verify_store(store)
    assert second.status is not VerifyStatus.TAMPER
    assert second.cells >= first.cells + 15
    report = run_into(store, reduced(ROWS), lock.read_bytes(), resume=True, tools=tools)
    # The last session ran exactly the rows the verified prefix lacked: none twice.
    assert report.committed == ROWS - second.cells
    assert report.complete
    assert _stored(store) == reference
    sessions = _sessions(store)
    assert sessions[0] == 1  # genesis only
    assert sessions[-1] == second.cells + 1
    assert verify_store(store)
    orphaned = sum(a.orphaned for c in read_store(store).cells for a in c.attempts)
    assert orphaned <= 2  # at most the attempts of the two cells in flight at the kills


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_v2_signal_stops_cleanly_after_journaling_and_resume_finishes(
    tmp_path: Path, lock: Path, tools: Any, reference: list[bytes], sig: signal.Signals
) -> None:
    store = tmp_path / "store"
    process = _start("create", store, lock)
    _stop_after(process, store, 8, sig)
    assert process.wait(TIMEOUT_S) == 130
    assert f"stopped {sig.name}" in _log(store, "create")
    stopped = verify_store(store)
    assert stopped.status is VerifyStatus.OK  # a clean stop leaves no torn tail
    assert 7 <= stopped.cells < ROWS
    report = run_into(store, reduced(ROWS), lock.read_bytes(), resume=True, tools=tools)
    assert report.committed == ROWS - stopped.cells
    assert _stored(store) == reference


def test_v2_resume_of_a_store_with_only_its_genesis(
    tmp_path: Path, lock: Path, tools: Any, reference: list[bytes]
) -> None:
    store = tmp_path / "store"
    RunStore.create(store, lock.read_bytes(), plain_rows(reduced(ROWS))).close()
    assert verify_store(store).cells == 0
    report = run_into(store, reduced(ROWS), lock.read_bytes(), resume=True, tools=tools)
    assert report.committed == ROWS
    assert _stored(store) == reference


def test_v2_resume_of_a_torn_first_record(
    tmp_path: Path, lock: Path, tools: Any, reference_store: Path, reference: list[bytes]
) -> None:
    store = tmp_path / "store"
    RunStore.create(store, lock.read_bytes(), plain_rows(reduced(ROWS))).close()
    # Same lock and rows give the same genesis, so the reference's first cell record is the
    # record this store's writer would append: a crash left half of it on disk.
    genesis, first_cell = (reference_store / "records.log").read_bytes().split(b"\n")[:2]
    assert (store / "records.log").read_bytes() == genesis + b"\n"
    with (store / "records.log").open("ab") as f:
        f.write(first_cell[: len(first_cell) // 2])
    torn = verify_store(store)
    assert torn.status is VerifyStatus.TORN
    assert torn.cells == 0
    report = run_into(store, reduced(ROWS), lock.read_bytes(), resume=True, tools=tools)
    assert report.committed == ROWS
    assert _stored(store) == reference
    assert any((store / "evidence").iterdir())  # the cut bytes are kept
