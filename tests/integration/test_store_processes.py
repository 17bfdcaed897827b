"""Real writer processes: kill -9 at random points, a second writer, a death mid-attempt.

The writer runs in a child process (the same script a study would run, reduced to the store
calls) and prints ``ACK <row> <hash>`` only after ``commit_cell`` returned. The parent kills it
with SIGKILL at seeded random moments, checks that every acknowledged record is intact, and
resumes. Kill points are drawn from a seeded ``random.Random`` and the seed is printed.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import WriterLockedError
from harness.store import (
    RunStore,
    StoreState,
    VerifyStatus,
    check_store_for_run,
    finalize_store,
    lock_digest,
    read_store,
    schedule_digest,
    verify_store,
)

REPO = Path(__file__).resolve().parents[2]
LOCK = b"study lock for process tests\n"

WRITER = """
import sys
import time
from pathlib import Path
from harness.store import RunStore

root, rows_n, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = b"study lock for process tests\\n"
rows = [{"cell": i} for i in range(rows_n)]
if root.exists():
    writer, start, orphans = RunStore.open_for_resume(root, lock, rows)
else:
    writer, start, orphans = RunStore.create(root, lock, rows), 0, ()
print(f"START {start} {len(orphans)}", flush=True)
if mode == "hold":
    sys.stdin.read()
    sys.exit(0)
if mode == "begin":
    writer.journal_begin({"role": "planner", "cell": start})
    print("BEGUN", flush=True)
    sys.stdin.read()
    sys.exit(0)
for row in range(start, rows_n):
    key = writer.journal_begin({"role": "planner", "cell": row})
    blob = writer.put_blob(f"response {row}".encode())
    writer.journal_end(key, {"status": "ok"}, blobs=[blob])
    digest = writer.commit_cell(row, {"row": row, "value": row * 0.5}, [{"blob": blob}])
    print(f"ACK {row} {digest}", flush=True)
writer.close()
print("DONE", flush=True)
"""


def spawn(root: Path, rows: int, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(rows), mode],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def wait_for(proc: subprocess.Popen[str], word: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(word), line
    return line


def record_hashes(root: Path) -> list[str]:
    lines = (root / "records.log").read_bytes().splitlines(keepends=True)
    return ["blake3:" + line[:64].decode() for line in lines if line.endswith(b"\n")]


def test_store_repeated_kill_9_loses_no_acknowledged_record(tmp_path: Path) -> None:
    seed = 20260530
    print(f"kill-point seed: {seed}")
    rng = random.Random(seed)
    # Enough rows that the twelve kills always land before the schedule is finished: a kill
    # after up to 0.35 s commits at most ~100 rows, one after START at most ~20, so the kills
    # use fewer than 600 rows even on a fast disk. (With 300 rows a fast run could finish
    # before the twelfth kill.)
    root, rows = tmp_path / "run", 1000
    acknowledged: dict[int, str] = {}
    kills = 0
    states: list[str] = []
    done = False
    while not done:
        proc = spawn(root, rows, "run")
        out: list[str] = []
        if kills < 12:
            if kills % 3 == 0:
                # Anywhere from interpreter start-up through create/resume into the cells.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=rng.uniform(0.0, 0.35))
            else:
                # Inside the cell loop: a few commits after resume, at a random instant.
                out.append(wait_for(proc, "START").strip())
                time.sleep(rng.uniform(0.0, 0.03))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        rest, _ = proc.communicate()
        out.extend(rest.splitlines())
        done = "DONE" in out
        if out and out[0].startswith("START"):
            # Resume continues exactly after the last committed record.
            assert int(out[0].split()[1]) >= len(acknowledged)
        for line in out:
            if line.startswith("ACK"):
                _, row_text, digest = line.split()
                assert int(row_text) not in acknowledged  # never repeated
                acknowledged[int(row_text)] = digest
        if not root.exists():
            continue  # killed before the store was published
        report = verify_store(root)
        assert report.status is not VerifyStatus.TAMPER, (kills, report.reason)
        states.append(str(report.code))
        assert report.cells >= len(acknowledged)
        hashes = record_hashes(root)
        for row, digest in acknowledged.items():
            assert hashes[row + 1] == digest, (kills, row)
    assert kills == 12
    print(f"states seen after each kill: {states}")
    view = read_store(root)
    assert view.report.status is VerifyStatus.OK
    assert [cell.row_index for cell in view.cells] == list(range(rows))
    assert [cell.result for cell in view.cells] == [
        {"row": row, "value": row * 0.5} for row in range(rows)
    ]
    # A kill between commit_cell's return and the ACK print leaves a committed, unacknowledged
    # cell: it is kept (never re-run), so acknowledged rows are a subset of committed ones.
    assert set(acknowledged) <= set(range(rows))
    assert len(acknowledged) >= rows - kills
    finalize_store(root, rows)


def test_store_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    root, rows = tmp_path / "run", 3
    holder = spawn(root, rows, "hold")
    try:
        wait_for(holder, "START")
        pattern = rf"^store .* is held by another writer: pid {holder.pid} on host "
        with pytest.raises(WriterLockedError, match=pattern):
            RunStore.open_for_resume(root, LOCK, [{"cell": i} for i in range(rows)])
        with pytest.raises(WriterLockedError, match=pattern):
            finalize_store(root)
        check = check_store_for_run(
            root,
            lock_digest=lock_digest(LOCK),
            schedule_digest=schedule_digest([{"cell": i} for i in range(rows)]),
        )
        assert check.state is StoreState.UNUSABLE
        assert f"pid {holder.pid}" in check.reason
    finally:
        holder.communicate("")
    assert holder.returncode == 0
    # Once the holder is gone, the lock is free again.
    with RunStore.open_for_resume(root, LOCK, [{"cell": i} for i in range(rows)]).writer:
        pass


def test_store_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "run"
    rows = [{"cell": 0}]
    with (
        RunStore.create(root, LOCK, rows),
        pytest.raises(WriterLockedError, match=rf"pid {os.getpid()} on host"),
    ):
        RunStore.open_for_resume(root, LOCK, rows)


def test_store_attempt_of_a_killed_writer_is_reported_and_bound(tmp_path: Path) -> None:
    root, rows = tmp_path / "run", 2
    proc = spawn(root, rows, "begin")
    wait_for(proc, "START")
    wait_for(proc, "BEGUN")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert verify_store(root).pending_attempts == 1
    schedule = [{"cell": i} for i in range(rows)]
    resumed = RunStore.open_for_resume(root, LOCK, schedule)
    with resumed.writer as writer:
        assert resumed.next_row_index == 0
        assert [(o.attempt, o.outcome) for o in resumed.orphaned_attempts] == [
            ({"role": "planner", "cell": 0}, None)
        ]
        writer.commit_cell(0, {"row": 0}, [])
    cell = read_store(root).cells[0]
    assert len(cell.attempts) == 1
    assert cell.attempts[0].orphaned
    assert cell.attempts[0].end_seq is None
    assert verify_store(root).status is VerifyStatus.OK
