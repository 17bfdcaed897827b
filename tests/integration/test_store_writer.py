"""The writer's contract: what a record binds and refuses, resume, finalize, preflight."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import (
    AttemptStateError,
    CommitOrderError,
    FinalizeError,
    LockMismatchError,
    RecordInvalidError,
    ScheduleMismatchError,
    StoreExistsError,
    StoreFinalizedError,
    StoreNotFoundError,
    TamperError,
)
from harness.store import (
    CellRecord,
    RunStore,
    StoreState,
    VerifyCode,
    VerifyStatus,
    check_store_for_run,
    finalize_store,
    lock_digest,
    read_blob,
    read_store,
    row_digest,
    schedule_bytes,
    schedule_digest,
    verify_store,
)

LOCK = b"study lock for writer tests\n"
ROWS: list[dict[str, Any]] = [{"cell": i, "task": f"T{i}", "seed": 1} for i in range(4)]


class Result(msgspec.Struct, forbid_unknown_fields=True):
    outcome: str
    turns: int


class Attempt(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    tokens: int


@pytest.fixture
def writer(tmp_path: Path) -> Any:
    with RunStore.create(tmp_path / "run", LOCK, ROWS) as w:
        yield w


def log_bytes(root: Path) -> bytes:
    return (root / "records.log").read_bytes()


# --- what a record binds ----------------------------------------------------------------------


def test_store_genesis_binds_lock_and_schedule_digests(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", LOCK, ROWS) as w:
        assert (w.lock_digest, w.schedule_digest) == (lock_digest(LOCK), schedule_digest(ROWS))
    view = read_store(tmp_path / "run")
    assert view.genesis is not None
    assert view.genesis.lock_digest == digest_bytes(Domain.LOCK, LOCK)
    assert view.genesis.schedule_digest == digest_bytes(Domain.SCHEDULE, canonical_bytes(ROWS))
    assert view.genesis.schedule_rows == 4
    assert (tmp_path / "run" / "study.lock").read_bytes() == LOCK
    assert (tmp_path / "run" / "schedule.json").read_bytes() == schedule_bytes(ROWS)


def test_store_cell_record_binds_row_result_audit_attempts_and_previous_hash(
    writer: RunStore,
) -> None:
    genesis_hash = writer.head
    key = writer.journal_begin({"role": "planner", "request": "blake3:" + "a" * 64})
    blob = writer.put_blob(b'{"candidates": []}')
    writer.journal_end(key, {"status": "ok", "tokens": 12}, blobs=[blob])
    digest = writer.commit_cell(0, {"outcome": "complete"}, [{"role": "planner", "raw": blob}])
    view = read_store(writer.root)
    (cell,) = view.cells
    assert isinstance(cell, CellRecord)
    assert (cell.seq, cell.prev, cell.row_index) == (1, genesis_hash, 0)
    assert cell.row == ROWS[0]
    assert cell.row_digest == row_digest(ROWS[0])
    assert cell.result == {"outcome": "complete"}
    assert cell.audit == ({"role": "planner", "raw": blob},)
    assert cell.blobs == (blob,)
    (attempt,) = cell.attempts
    assert (attempt.begin_seq, attempt.end_seq, attempt.orphaned) == (key, key + 1, False)
    assert cell.journal.count == 3  # session, begin, end
    assert digest == view.report.head == writer.head
    assert read_blob(writer.root, blob) == b'{"candidates": []}'


def test_store_same_inputs_give_the_same_bytes(tmp_path: Path) -> None:
    def run(root: Path) -> dict[str, bytes]:
        with RunStore.create(root, LOCK, ROWS) as w:
            for row in range(4):
                key = w.journal_begin({"row": row})
                w.journal_end(key, {"ok": True}, blobs=[w.put_blob(bytes([row]) * 10)])
                w.commit_cell(row, {"value": row / 3}, [{"row": row}])
        finalize_store(root)
        return {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "writer.lock"
        }

    assert run(tmp_path / "a") == run(tmp_path / "b")


def test_store_blob_is_content_addressed_and_idempotent(writer: RunStore) -> None:
    first = writer.put_blob(b"raw")
    assert first == digest_bytes(Domain.BLOB, b"raw")
    assert writer.put_blob(bytearray(b"raw")) == first
    assert [p.name for p in (writer.root / "blobs").iterdir()] == [first[7:]]


def test_store_blob_over_the_readers_bound_is_refused_before_writing(writer: RunStore) -> None:
    from harness.store._files import MAX_BLOB

    at_bound = bytes(MAX_BLOB)
    with pytest.raises(RecordInvalidError, match=f"over the store's bound of {MAX_BLOB}"):
        writer.put_blob(at_bound + b"\0")
    assert list((writer.root / "blobs").iterdir()) == []  # no blob, no temporary file
    digest = writer.put_blob(memoryview(at_bound))  # the bound itself is still a blob
    del at_bound
    assert len(read_blob(writer.root, digest)) == MAX_BLOB
    writer.journal_begin({"row": 0})  # the writer goes on


def test_store_corrupt_existing_blob_is_refused(writer: RunStore) -> None:
    digest = digest_bytes(Domain.BLOB, b"raw")
    (writer.root / "blobs" / digest[7:]).write_bytes(b"not raw")
    with pytest.raises(TamperError, match="is corrupt"):
        writer.put_blob(b"raw")
    with pytest.raises(TamperError, match="does not hash to its name"):
        read_blob(writer.root, digest)


# --- refusals at commit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "audit", "match"),
    [
        ({"x": math.nan}, [], r"^result: non-finite number nan at `\$\.x`$"),
        ({"x": [1.0, math.inf]}, [], r"^result: non-finite number inf at `\$\.x\[1\]`$"),
        ({}, [{"latency": -math.inf}], r"^audit\[0\]: non-finite number -inf at `\$\.latency`$"),
        ({"x": b"raw"}, [], r"^result: bytes at `\$\.x` is not a JSON value$"),
        ({"x": {1, 2}}, [], r"^result: set at `\$\.x` is not a JSON value$"),
        ({1: "a"}, [], r"^result: non-string key 1 at `\$`$"),
        ([1, 2], [], r"^result must be a JSON object, got list$"),
        ({}, {"role": "x"}, r"^the audit group must be a list of attempt objects$"),
        ({}, ["attempt"], r"^audit\[0\] must be a JSON object, got str$"),
    ],
    ids=[
        "nan",
        "inf-in-list",
        "neg-inf-in-audit",
        "bytes",
        "set",
        "int-key",
        "result-not-object",
        "audit-not-list",
        "attempt-not-object",
    ],
)
def test_store_commit_refuses_non_json_content(
    writer: RunStore, result: Any, audit: Any, match: str
) -> None:
    before = log_bytes(writer.root)
    with pytest.raises(RecordInvalidError, match=match):
        writer.commit_cell(0, result, audit)
    assert log_bytes(writer.root) == before  # no partial record
    writer.commit_cell(0, {"x": 1.5}, [])  # the writer is still usable


def test_store_commit_refuses_unknown_fields_when_types_are_given(tmp_path: Path) -> None:
    with RunStore.create(
        tmp_path / "run", LOCK, ROWS, result_type=Result, attempt_type=Attempt
    ) as w:
        with pytest.raises(RecordInvalidError, match=r"unknown field `gold`"):
            w.commit_cell(0, {"outcome": "complete", "turns": 2, "gold": 7}, [])
        with pytest.raises(RecordInvalidError, match=r"^audit\[1\]: .*unknown field `key`"):
            w.commit_cell(
                0,
                Result(outcome="complete", turns=2),
                [{"role": "planner", "tokens": 3}, {"role": "critic", "tokens": 1, "key": "x"}],
            )
        with pytest.raises(RecordInvalidError, match=r"Expected `int`, got `str`"):
            w.commit_cell(0, {"outcome": "complete", "turns": "two"}, [])
        w.commit_cell(0, Result(outcome="complete", turns=2), [Attempt(role="planner", tokens=3)])
    assert read_store(tmp_path / "run").cells[0].result == {"outcome": "complete", "turns": 2}


def test_store_journal_refuses_non_finite_numbers(writer: RunStore) -> None:
    with pytest.raises(RecordInvalidError, match=r"^attempt: non-finite"):
        writer.journal_begin({"temperature": math.nan})
    key = writer.journal_begin({"temperature": 0.2})
    with pytest.raises(RecordInvalidError, match=r"^outcome: non-finite"):
        writer.journal_end(key, {"cost": math.inf})


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (
            [{"cell": 0}, {"cell": 1}],
            r"^cell for schedule row 1 is out of order: the next row is 0",
        ),
        (
            [{"cell": 0}, {"cell": 0}],
            r"^cell for schedule row 0 is out of order: the next row is 1",
        ),
    ],
    ids=["skip", "repeat"],
)
def test_store_commit_never_skips_or_repeats(
    writer: RunStore, rows: list[dict[str, int]], match: str
) -> None:
    if rows[0] == rows[1]:
        writer.commit_cell(0, {}, [])
    with pytest.raises(CommitOrderError, match=match):
        writer.commit_cell(rows[1]["cell"], {}, [])


def test_store_commit_after_the_last_row_is_refused(writer: RunStore) -> None:
    for row in range(4):
        writer.commit_cell(row, {}, [])
    with pytest.raises(CommitOrderError, match=r"^all 4 schedule rows are committed"):
        writer.commit_cell(4, {}, [])


def test_store_attempt_misuse_is_refused(writer: RunStore) -> None:
    with pytest.raises(AttemptStateError, match="attempt 99 is not open"):
        writer.journal_end(99, {})
    key = writer.journal_begin({"role": "planner"})
    with pytest.raises(AttemptStateError, match=r"begun but not ended"):
        writer.commit_cell(0, {}, [])
    writer.journal_end(key, {"status": "ok"})
    with pytest.raises(AttemptStateError, match=f"attempt {key} is not open"):
        writer.journal_end(key, {"status": "ok"})
    with pytest.raises(RecordInvalidError, match="was never stored"):
        writer.commit_cell(0, {}, [], blobs=["blake3:" + "0" * 64])
    with pytest.raises(RecordInvalidError, match="is not a blob digest"):
        writer.commit_cell(0, {}, [], blobs=["sha256:00"])
    writer.commit_cell(0, {}, [])
    # The writer is still open: a reader sees its committed prefix as in progress.
    assert verify_store(writer.root).status is VerifyStatus.IN_PROGRESS
    writer.close()
    assert verify_store(writer.root).status is VerifyStatus.OK


# --- create and resume ------------------------------------------------------------------------


def test_store_create_refuses_an_existing_store_but_accepts_an_empty_dir(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", LOCK, ROWS):
        pass
    with pytest.raises(StoreExistsError, match="already exists; resume it"):
        RunStore.create(tmp_path / "run", LOCK, ROWS)
    (tmp_path / "empty").mkdir()
    with RunStore.create(tmp_path / "empty", LOCK, ROWS):
        pass
    assert verify_store(tmp_path / "empty").status is VerifyStatus.OK


@pytest.mark.parametrize(
    ("lock", "rows", "match"),
    [
        (b"", ROWS, r"^the study lock is empty$"),
        (LOCK, [], r"^the schedule has no rows$"),
        (LOCK, [{"x": math.nan}], r"^schedule row 0: non-finite number nan"),
        (LOCK, "rows", r"^the schedule must be a sequence of row objects$"),
    ],
    ids=["empty-lock", "empty-schedule", "nan-row", "not-a-sequence"],
)
def test_store_create_refuses_bad_inputs(
    tmp_path: Path, lock: bytes, rows: Any, match: str
) -> None:
    with pytest.raises(RecordInvalidError, match=match):
        RunStore.create(tmp_path / "run", lock, rows)
    assert not (tmp_path / "run").exists()


def test_store_resume_continues_at_the_next_row(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        w.commit_cell(0, {"n": 0}, [])
        w.commit_cell(1, {"n": 1}, [])
    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    with resumed.writer as w:
        assert (resumed.next_row_index, w.next_row_index, resumed.orphaned_attempts) == (2, 2, ())
        with pytest.raises(CommitOrderError):
            w.commit_cell(1, {"n": 1}, [])
        w.commit_cell(2, {"n": 2}, [])
    assert [c.row_index for c in read_store(root).cells] == [0, 1, 2]


def test_store_resume_refuses_another_lock_or_schedule(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        w.commit_cell(0, {}, [])
    with pytest.raises(LockMismatchError, match=r"is bound to lock blake3:"):
        RunStore.open_for_resume(root, b"other lock", ROWS)
    with pytest.raises(ScheduleMismatchError, match=r"\(4 rows\), not blake3:\w+ \(3 rows\)"):
        RunStore.open_for_resume(root, LOCK, ROWS[:3])
    reordered = [ROWS[1], ROWS[0], *ROWS[2:]]
    with pytest.raises(ScheduleMismatchError):
        RunStore.open_for_resume(root, LOCK, reordered)


def test_store_resume_refuses_tamper_and_finalized_and_missing(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with pytest.raises(StoreNotFoundError, match=r"^no store at"):
        RunStore.open_for_resume(root, LOCK, ROWS)
    root.mkdir()
    with pytest.raises(StoreNotFoundError, match=r"is not a run store"):
        RunStore.open_for_resume(root, LOCK, ROWS)
    with pytest.raises(StoreNotFoundError, match=r"is not a run store"):
        finalize_store(root)
    assert list(root.iterdir()) == []  # refusing left nothing behind (no lock file)
    root.rmdir()
    with RunStore.create(root, LOCK, ROWS[:1]) as w:
        w.commit_cell(0, {}, [])
    finalize_store(root)
    with pytest.raises(StoreFinalizedError, match="is finalized"):
        RunStore.open_for_resume(root, LOCK, ROWS[:1])
    (root / "MANIFEST").unlink()
    (root / "HEAD").write_bytes(b"x")
    with pytest.raises(TamperError, match=r"\(HEAD_MALFORMED\).*resume refused$"):
        RunStore.open_for_resume(root, LOCK, ROWS[:1])


# --- finalize ---------------------------------------------------------------------------------


def test_store_finalize_refuses_an_incomplete_store(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        w.commit_cell(0, {}, [])
    with pytest.raises(
        FinalizeError, match=r"holds 1 of 4 cells; continue it with its study's resume "
    ):
        finalize_store(root)
    assert not (root / "MANIFEST").exists()


def test_store_finalize_checks_the_expected_cell_count(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        for row in range(4):
            w.commit_cell(row, {}, [])
    with pytest.raises(FinalizeError, match=r"^expected 576 cells, but store .* 4 rows$"):
        finalize_store(root, 576)
    digest = finalize_store(root, 4)
    assert finalize_store(root, 4) == digest  # idempotent
    report = verify_store(root)
    assert report.manifest_digest == digest
    line = (root / "MANIFEST").read_bytes()
    assert digest == digest_bytes(Domain.STORE_MANIFEST, line[65:-1])


def test_store_finalize_refuses_a_torn_store(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:1]) as w:
        w.commit_cell(0, {}, [])
    with (root / "records.log").open("ab") as f:
        f.write(b"\x00\x00")
    with pytest.raises(FinalizeError, match=r"RECORDS_TORN_TAIL.*resume it before finalizing$"):
        finalize_store(root)


def test_store_manifest_pins_counts_and_unbound_attempts(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:2]) as w:
        key = w.journal_begin({"role": "planner"})
        w.journal_end(key, {"status": "ok"}, blobs=[w.put_blob(b"r0")])
        w.commit_cell(0, {}, [{"role": "planner"}])
        w.journal_begin({"role": "critic"})
    resumed = RunStore.open_for_resume(root, LOCK, ROWS[:2])
    with resumed.writer as w:
        w.commit_cell(1, {}, [])
        stray = w.journal_begin({"role": "planner", "after": "last cell"})
        w.journal_end(stray, {"status": "ok"})
    finalize_store(root)
    manifest = read_store(root).manifest
    assert manifest is not None
    assert (manifest.cells, manifest.audit_groups, manifest.records) == (2, 2, 3)
    assert (manifest.attempts, manifest.orphaned_attempts, manifest.blobs) == (2, 1, 1)
    assert manifest.unbound_attempts == (stray,)


# --- preflight --------------------------------------------------------------------------------


def test_store_preflight_check(tmp_path: Path) -> None:
    digests = {"lock_digest": lock_digest(LOCK), "schedule_digest": schedule_digest(ROWS)}
    root = tmp_path / "run"
    check = check_store_for_run(root, **digests)
    assert (check.state, bool(check), check.reason) == (StoreState.NEW, True, "new store")
    root.mkdir()
    assert check_store_for_run(root, **digests).state is StoreState.NEW
    root.rmdir()
    with RunStore.create(root, LOCK, ROWS) as w:
        w.commit_cell(0, {}, [])
    check = check_store_for_run(root, **digests)
    assert (check.state, check.cells) == (StoreState.PREFIX, 1)
    assert check.reason.endswith("verified prefix of 1/4 cells bound to this lock and schedule")

    other = {"lock_digest": lock_digest(b"x"), "schedule_digest": digests["schedule_digest"]}
    check = check_store_for_run(root, **other)
    assert not check
    assert (
        check.reason
        == f"{root} is bound to lock {digests['lock_digest']}, not {other['lock_digest']}"
    )
    check = check_store_for_run(
        root, lock_digest=digests["lock_digest"], schedule_digest="blake3:0"
    )
    assert "is bound to schedule" in check.reason

    with (root / "records.log").open("ab") as f:
        f.write(b"\x00")
    check = check_store_for_run(root, **digests)
    assert check.state is StoreState.PREFIX
    assert check.reason.endswith("; resume repairs RECORDS_TORN_TAIL")

    (root / "records.log").write_bytes(b"")
    check = check_store_for_run(root, **digests)
    assert check.state is StoreState.UNUSABLE
    assert "fails verification (HEAD_AHEAD)" in check.reason

    (tmp_path / "file").write_bytes(b"")
    assert check_store_for_run(tmp_path / "file", **digests).state is StoreState.UNUSABLE


def test_store_preflight_refuses_a_finalized_store(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:1]) as w:
        w.commit_cell(0, {}, [])
    finalize_store(root)
    check = check_store_for_run(
        root, lock_digest=lock_digest(LOCK), schedule_digest=schedule_digest(ROWS[:1])
    )
    assert (check.state, check.reason) == (
        StoreState.UNUSABLE,
        f"{root} is finalized; it takes no more records",
    )
    assert verify_store(root).code is VerifyCode.OK


def test_a_write_holding_the_runs_key_is_refused_with_nothing_written(tmp_path: Path) -> None:
    from harness.errors import KeyInStoreError, WriterStoppedError
    from harness.providers.credentials import KeyScan

    key = "ect-local-7Hq2Zp9Lw4Xv"
    escaped = "\\u0065" + key[1:]  # the key, its first letter JSON-escaped
    with RunStore.create(tmp_path / "run", LOCK, ROWS) as w:
        w.refuse(KeyScan(key).found_in)
        w.commit_cell(0, {"said": "nothing secret"}, [])  # clean writes go on
        before = {p.name: p.read_bytes() for p in w.root.iterdir() if p.is_file()}
        with pytest.raises(KeyInStoreError, match=r"^the run's API key was about to be written"):
            w.put_blob(b'{"id": "' + escaped.encode() + b'"}')
        with pytest.raises(WriterStoppedError):
            w.commit_cell(1, {"said": key}, [])
        after = {p.name: p.read_bytes() for p in w.root.iterdir() if p.is_file()}
        assert after == before
        assert list((w.root / "blobs").iterdir()) == []
    with RunStore.create(tmp_path / "run2", LOCK, ROWS) as w:
        w.refuse(KeyScan(key).found_in)
        with pytest.raises(KeyInStoreError, match=r"records.log"):
            w.commit_cell(0, {"said": f"the key is {escaped}"}, [])
    assert verify_store(tmp_path / "run2").cells == 0
    assert key.encode() not in b"".join(
        p.read_bytes() for p in (tmp_path / "run2").rglob("*") if p.is_file()
    )
