"""Crash states and durability failures: every one recovers or stops the writer cleanly.

The crash states of one append (nothing, a prefix, zeros, garbage, reordered blocks, the whole
line without HEAD) are written into real files; resume must cut a torn tail into ``evidence/``,
keep every acknowledged record, and continue at the right row. Failing fsync, ENOSPC and short
writes are injected through the store's ``FileOps`` seam (the one place the writer touches the
file system); a real full tmpfs is used too when this process may mount one.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import (
    DurabilityError,
    FsyncError,
    NoSpaceError,
    ShortWriteError,
    StoreNotFoundError,
    WriterStoppedError,
)
from harness.store import (
    FileOps,
    Head,
    RunStore,
    VerifyCode,
    VerifyStatus,
    finalize_store,
    read_store,
    verify_store,
)

LOCK = b"study lock for crash tests\n"
ROWS = [{"cell": i, "task": f"T{i // 2}"} for i in range(6)]


def do_cell(writer: RunStore, row: int) -> str:
    """One cell as the study runs it: journal, call (a blob), journal, commit."""
    key = writer.journal_begin({"role": "planner", "cell": row})
    blob = writer.put_blob(f"raw response for cell {row}".encode())
    writer.journal_end(key, {"status": "ok"}, blobs=[blob])
    return writer.commit_cell(row, {"row": row, "value": row * 1.25}, [{"response": blob}])


def record_hashes(root: Path) -> list[str]:
    lines = (root / "records.log").read_bytes().splitlines(keepends=True)
    return ["blake3:" + line[:64].decode() for line in lines if line.endswith(b"\n")]


def head_bytes(count: int, record_hash: str) -> bytes:
    body = canonical_bytes(Head(count=count, head=record_hash))
    return digest_bytes(Domain.STORE_HEAD, body)[7:].encode() + b" " + body + b"\n"


def crashed_during_append(root: Path) -> tuple[list[str], bytes]:
    """A store whose 4th record append was interrupted; the acknowledged hashes and the line."""
    with RunStore.create(root, LOCK, ROWS) as writer:
        acknowledged = [do_cell(writer, row) for row in range(4)]
    log = root / "records.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))
    (root / "HEAD").write_bytes(head_bytes(4, acknowledged[2]))
    return acknowledged[:3], lines[-1]


def _states(line: bytes) -> dict[str, bytes]:
    rng = random.Random(7)
    blocks = [line[i : i + 96] for i in range(0, len(line), 96)]
    reordered = blocks[1:] + blocks[:1]
    return {
        "nothing": b"",
        "prefix-1": line[:1],
        "prefix-hash-only": line[:64],
        "prefix-half": line[: len(line) // 2],
        "prefix-all-but-newline": line[:-1],
        "zeros": b"\x00" * len(line),
        "zeros-page": b"\x00" * 4096,
        "garbage": bytes(rng.randrange(256) for _ in range(len(line))),
        "reordered-blocks": b"".join(reordered),
        "hole-then-tail": b"\x00" * 96 + line[96:],
    }


@pytest.mark.parametrize("state", sorted(_states(b"x" * 400)))
def test_store_crash_state_of_one_append_recovers(tmp_path: Path, state: str) -> None:
    root = tmp_path / "run"
    acknowledged, line = crashed_during_append(root)
    tail = _states(line)[state]
    with (root / "records.log").open("ab") as f:
        f.write(tail)
    before = verify_store(root)
    assert before.records == 4
    assert before.status is (VerifyStatus.OK if not tail else VerifyStatus.TORN), before.reason

    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    with resumed.writer as writer:
        assert resumed.next_row_index == 3
        # The 4th cell's attempt was journaled before the crash: it is reported, not forgotten.
        assert [o.attempt for o in resumed.orphaned_attempts] == [{"role": "planner", "cell": 3}]
        assert record_hashes(root)[1:] == acknowledged
        do_cell(writer, 3)
    evidence = sorted((root / "evidence").iterdir()) if tail else []
    assert [p.read_bytes() for p in evidence] == ([tail] if tail else [])
    after = verify_store(root)
    assert (after.status, after.records) == (VerifyStatus.OK, 5)
    cell = read_store(root).cells[3]
    assert [(a.orphaned, a.end_seq is not None) for a in cell.attempts] == [
        (True, True),
        (False, True),
    ]


def test_store_every_prefix_of_an_append_is_the_previous_prefix(tmp_path: Path) -> None:
    root = tmp_path / "run"
    _, line = crashed_during_append(root)
    log = root / "records.log"
    base = log.read_bytes()
    for length in range(len(line)):
        log.write_bytes(base + line[:length])
        report = verify_store(root)
        assert report.records == 4, length
        assert report.status is (VerifyStatus.OK if length == 0 else VerifyStatus.TORN), length
    for length in range(1, len(line), 97):
        case = tmp_path / f"case-{length}"
        shutil.copytree(root, case)
        (case / "records.log").write_bytes(base + line[:length])
        with RunStore.open_for_resume(case, LOCK, ROWS).writer as writer:
            assert writer.next_row_index == 3
        assert verify_store(case).status is VerifyStatus.OK


def test_store_whole_record_without_head_is_kept_and_head_advanced(tmp_path: Path) -> None:
    root = tmp_path / "run"
    acknowledged, line = crashed_during_append(root)
    with (root / "records.log").open("ab") as f:
        f.write(line)
    assert verify_store(root).code is VerifyCode.HEAD_LAGS
    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    with resumed.writer as writer:
        assert resumed.next_row_index == 4
        assert resumed.orphaned_attempts == ()
        do_cell(writer, 4)
    report = verify_store(root)
    assert (report.status, report.records) == (VerifyStatus.OK, 6)
    assert record_hashes(root)[1:4] == acknowledged


@pytest.mark.parametrize("state", ["prefix", "zeros", "garbage"])
def test_store_crash_state_of_a_journal_append_recovers(tmp_path: Path, state: str) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        do_cell(writer, 0)
    journal = root / "journal.log"
    intact = len(journal.read_bytes())
    last = journal.read_bytes().splitlines(keepends=True)[-1]
    tail = {"prefix": last[:50], "zeros": b"\x00" * 200, "garbage": bytes(range(200))}[state]
    with journal.open("ab") as f:
        f.write(tail)
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TORN, VerifyCode.JOURNAL_TORN_TAIL)
    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    with resumed.writer as writer:
        # An entry that never became durable was never acknowledged: no call followed it.
        assert resumed.orphaned_attempts == ()
        do_cell(writer, 1)
    assert verify_store(root).status is VerifyStatus.OK
    assert (root / "evidence" / f"journal.log.torn-at-{intact}").read_bytes() == tail


def test_store_leftover_temp_files_are_ignored_then_removed(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        do_cell(writer, 0)
    (root / "HEAD.tmp").write_bytes(b"half a HEAD")
    (root / "blobs" / ".tmp-abc").write_bytes(b"half a blob")
    assert verify_store(root).status is VerifyStatus.OK
    with RunStore.open_for_resume(root, LOCK, ROWS).writer:
        pass
    assert not (root / "HEAD.tmp").exists()
    assert not (root / "blobs" / ".tmp-abc").exists()


def test_store_interrupted_create_leaves_no_store_and_is_cleaned(tmp_path: Path) -> None:
    partial = tmp_path / ".run.partial-x1"
    partial.mkdir()
    (partial / "records.log").write_bytes(b"\x00" * 10)
    (partial / "writer.lock").write_bytes(b"")
    with pytest.raises(StoreNotFoundError):
        verify_store(tmp_path / "run")
    with RunStore.create(tmp_path / "run", LOCK, ROWS):
        pass
    assert not partial.exists()
    assert verify_store(tmp_path / "run").status is VerifyStatus.OK


def test_store_repeated_crashes_before_a_commit_bind_every_orphan(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        do_cell(writer, 0)
        writer.journal_begin({"try": 1})
    for attempt in (2, 3):
        resumed = RunStore.open_for_resume(root, LOCK, ROWS)
        assert [o.attempt["try"] for o in resumed.orphaned_attempts] == list(range(1, attempt))
        resumed.writer.journal_begin({"try": attempt})
        resumed.writer.close()
    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    with resumed.writer as writer:
        assert len(resumed.orphaned_attempts) == 3
        do_cell(writer, 1)
    cell = read_store(root).cells[1]
    assert [a.orphaned for a in cell.attempts] == [True, True, True, False]
    assert verify_store(root).status is VerifyStatus.OK


# --- injected failures ------------------------------------------------------------------------


class FailingOps(FileOps):
    """Real file operations that fail once, on the ``at``-th armed call of ``call``.

    ``write`` failures first write part of the data for real, as a full disk or an interrupted
    write would. Every call after the failure is recorded, to prove the writer retried nothing.
    """

    def __init__(self, call: str, at: int, code: int = errno.EIO, *, short: bool = False) -> None:
        self.call, self.at, self.code, self.short = call, at, code, short
        self.armed = False
        self.count = 0
        self.failed = False
        self.after: list[str] = []

    def _hit(self, name: str) -> bool:
        if self.failed:
            self.after.append(name)
        if not self.armed or name != self.call or self.failed:
            return False
        self.count += 1
        if self.count == self.at:
            self.failed = True
            return True
        return False

    def fsync(self, fd: int) -> None:
        if self._hit("fsync"):
            raise OSError(self.code, os.strerror(self.code))
        super().fsync(fd)

    def write(self, fd: int, data: bytes) -> int:
        if self._hit("write"):
            written = super().write(fd, data[: len(data) // 2])
            if self.short:
                return written
            raise OSError(self.code, os.strerror(self.code))
        return super().write(fd, data)


# One cell's fsyncs, in order: journal begin; blob file; blob directory; journal end; record;
# HEAD temp file; directory after the HEAD rename.
FSYNCS_PER_CELL = 7


@pytest.mark.parametrize("at", range(1, FSYNCS_PER_CELL + 1))
def test_store_failed_fsync_stops_the_writer_and_resume_recovers(tmp_path: Path, at: int) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        first = do_cell(writer, 0)
    ops = FailingOps("fsync", at)
    resumed = RunStore.open_for_resume(root, LOCK, ROWS, ops=ops)
    writer = resumed.writer
    ops.armed = True
    with pytest.raises(FsyncError, match=r"fsync of .* failed: Input/output error"):
        do_cell(writer, 1)
    assert ops.count == at
    for call in (
        lambda: writer.journal_begin({"again": True}),
        lambda: writer.put_blob(b"x"),
        lambda: writer.commit_cell(1, {}, []),
    ):
        with pytest.raises(WriterStoppedError, match="stopped after a durability failure"):
            call()
    assert ops.after == []  # nothing retried after the failure
    writer.close()

    again = RunStore.open_for_resume(root, LOCK, ROWS)
    with again.writer as second:
        # Before the record write, cell 1 is not committed; from it on, its record is kept.
        assert again.next_row_index == (1 if at <= 4 else 2)
        assert len(again.orphaned_attempts) == (1 if at <= 4 else 0)
        if at <= 4:
            assert (again.orphaned_attempts[0].outcome is not None) == (at == 4)
        for row in range(again.next_row_index, len(ROWS)):
            do_cell(second, row)
    assert record_hashes(root)[1] == first
    assert verify_store(root).status is VerifyStatus.OK
    finalize_store(root, len(ROWS))


@pytest.mark.parametrize(
    ("at", "short", "error"),
    [
        (1, False, NoSpaceError),  # journal begin
        (4, False, NoSpaceError),  # record append
        (5, False, NoSpaceError),  # HEAD temp file
        (4, True, ShortWriteError),  # record append, short
        (3, True, ShortWriteError),  # journal end, short
    ],
    ids=["enospc-journal", "enospc-record", "enospc-head", "short-record", "short-journal"],
)
def test_store_enospc_and_short_write_stop_the_writer_and_resume_recovers(
    tmp_path: Path, at: int, short: bool, error: type[DurabilityError]
) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        first = do_cell(writer, 0)
    ops = FailingOps("write", at, errno.ENOSPC, short=short)
    resumed = RunStore.open_for_resume(root, LOCK, ROWS, ops=ops)
    ops.armed = True
    # Writes of one cell, in order: journal begin, blob, journal end, record, HEAD temp.
    with pytest.raises(error):
        do_cell(resumed.writer, 1)
    with pytest.raises(WriterStoppedError):
        resumed.writer.commit_cell(1, {}, [])
    assert ops.after == []
    resumed.writer.close()
    assert verify_store(root).status is not VerifyStatus.TAMPER
    again = RunStore.open_for_resume(root, LOCK, ROWS)
    with again.writer as second:
        for row in range(again.next_row_index, len(ROWS)):
            do_cell(second, row)
    assert record_hashes(root)[1] == first
    assert verify_store(root).status is VerifyStatus.OK


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB tmpfs, mounted for the test (needs root; skipped otherwise)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_store_real_full_filesystem_stops_the_writer(tiny_fs: Path, tmp_path: Path) -> None:
    root = tiny_fs / "run"
    rows = [{"cell": i} for i in range(200)]
    acknowledged: list[str] = []

    def fill(writer: RunStore) -> None:
        for row in range(200):
            acknowledged.append(writer.commit_cell(row, {"pad": "x" * 6000}, []))

    with RunStore.create(root, LOCK, rows) as writer:
        with pytest.raises((NoSpaceError, ShortWriteError)):
            fill(writer)
        with pytest.raises(WriterStoppedError):
            writer.commit_cell(len(acknowledged), {}, [])
    assert len(acknowledged) > 5
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert verify_store(copy).status is not VerifyStatus.TAMPER
    resumed = RunStore.open_for_resume(copy, LOCK, rows)
    with resumed.writer:
        assert resumed.next_row_index >= len(acknowledged)
    assert record_hashes(copy)[1 : len(acknowledged) + 1] == acknowledged
    assert verify_store(copy).status is VerifyStatus.OK


class NoSwapOps(FileOps):
    """A file system that cannot swap names atomically: HEAD is replaced by plain rename."""

    def exchange(self, src: Path, dst: Path) -> bool:
        return False


def test_store_head_replace_falls_back_to_rename_without_atomic_swap(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS, ops=NoSwapOps()) as writer:
        for row in range(3):
            do_cell(writer, row)
        assert not (root / "HEAD.tmp").exists()
    assert verify_store(root).status is VerifyStatus.OK


def test_store_head_swap_keeps_the_previous_head_under_the_temp_name(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        first = writer.head
        do_cell(writer, 0)
        do_cell(writer, 1)
    if not (root / "HEAD.tmp").exists():
        pytest.skip("this file system cannot swap names atomically")
    previous = (root / "HEAD.tmp").read_bytes()
    # The temp name holds the HEAD before the last commit; nothing reads it.
    assert head_bytes(2, record_hashes(root)[1]) == previous
    assert record_hashes(root)[0] == first
    assert verify_store(root).status is VerifyStatus.OK
