"""Verification of run stores on disk: truncation, flips, tails, reordering, HEAD, manifest.

Each test builds a small real store in tmp_path (real files, real fsync), damages its bytes the
way a crash or a tamperer would, and checks the status, the valid prefix and the reason code.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import msgspec
import pytest

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.store import (
    Head,
    RunStore,
    VerifyCode,
    VerifyStatus,
    finalize_store,
    verify_store,
)

LOCK = b"study lock for store tests\n"
ROWS = [{"cell": i, "policy": ["ect", "critic"][i % 2], "seed": i % 3 + 1} for i in range(8)]


def build(root: Path, cells: int, *, rows: int | None = None, finalize: bool = False) -> None:
    """A store of ``cells`` committed cells, each with one journaled attempt and one blob."""
    schedule = ROWS[: cells if rows is None else rows]
    with RunStore.create(root, LOCK, schedule) as writer:
        for i in range(cells):
            key = writer.journal_begin({"role": "planner", "cell": i})
            blob = writer.put_blob(f"raw response {i}".encode())
            writer.journal_end(key, {"status": "ok", "tokens": 10 + i}, blobs=[blob])
            writer.commit_cell(
                i, {"answer": i * 0.5, "complete": i % 2 == 0}, [{"attempt": 0, "raw": blob}]
            )
    if finalize:
        finalize_store(root)


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def head_bytes(count: int, record_hash: str) -> bytes:
    """HEAD as an attacker (or a test) would write it, built from the public format."""
    body = canonical_bytes(Head(count=count, head=record_hash))
    return digest_bytes(Domain.STORE_HEAD, body)[7:].encode() + b" " + body + b"\n"


def record_hash(line: bytes) -> str:
    return "blake3:" + line[:64].decode()


def rehashed(body: bytes) -> bytes:
    return digest_bytes(Domain.STORE_RECORD, body)[7:].encode() + b" " + body + b"\n"


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sealed") / "run"
    build(root, 3, finalize=True)
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    build(root, 4, rows=6)
    return root


def test_store_intact_verifies_ok(store: Path) -> None:
    report = verify_store(store)
    assert report.status is VerifyStatus.OK
    assert report.code is VerifyCode.NOT_FINALIZED  # intact, but nothing pins its end
    assert (report.records, report.cells, report.head_claimed) == (5, 4, 5)
    assert report.torn_bytes == report.journal_torn_bytes == report.pending_attempts == 0
    assert report.head == record_hash(lines_of((store / "records.log").read_bytes())[-1])
    assert report.lock_digest == digest_bytes(Domain.LOCK, LOCK)
    assert bool(report)


def test_store_log_is_one_line_per_record_readable_by_standard_tools(store: Path) -> None:
    for line in lines_of((store / "records.log").read_bytes()):
        hex_part, body = line[:64], line[65:-1]
        assert line[64:65] == b" "
        assert "blake3:" + hex_part.decode() == digest_bytes(Domain.STORE_RECORD, body)
        assert isinstance(msgspec.json.decode(body), dict)


def test_store_truncation_at_every_offset_yields_longest_valid_prefix(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 3)
    log = root / "records.log"
    data = log.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    heads = {n: head_bytes(n, record_hash(data[s:e])) for n, (s, e) in _spans(ends)}
    original_head = (root / "HEAD").read_bytes()
    for offset in range(len(data), -1, -1):
        log.write_bytes(data[:offset])
        complete = sum(1 for end in ends if end <= offset)
        # HEAD as written (claims every record): any cut is caught.
        (root / "HEAD").write_bytes(original_head)
        report = verify_store(root)
        assert report.records == complete, offset
        expected = VerifyStatus.OK if offset == len(data) else VerifyStatus.TAMPER
        assert report.status is expected, (offset, report.reason)
        # HEAD claiming exactly the complete records: a partial line is a torn tail.
        if complete >= 1:
            (root / "HEAD").write_bytes(heads[complete])
            report = verify_store(root)
            assert report.records == complete, offset
            at_boundary = offset in ends
            assert report.status is (VerifyStatus.OK if at_boundary else VerifyStatus.TORN)
            assert report.torn_bytes == offset - ends[complete - 1]


def _spans(ends: list[int]) -> list[tuple[int, tuple[int, int]]]:
    starts = [0, *ends[:-1]]
    return [(i + 1, (s, e)) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]


def _flip_each_byte(root: Path, path: Path, masks: list[int]) -> list[int]:
    """Flip every byte of ``path``; return the offsets verify did not reject.

    The bit flipped cycles with the offset (``masks[offset % len(masks)]``), so every bit
    position is exercised across neighbouring bytes.
    """
    data = path.read_bytes()
    missed: list[int] = []
    for offset in range(len(data)):
        for mask in [masks[offset % len(masks)]]:
            damaged = bytearray(data)
            damaged[offset] ^= mask
            path.write_bytes(bytes(damaged))
            if verify_store(root).status is not VerifyStatus.TAMPER:
                missed.append(offset)
    path.write_bytes(data)
    return missed


def test_store_every_single_byte_flip_in_the_record_log_is_tamper(sealed: Path) -> None:
    assert _flip_each_byte(sealed, sealed / "records.log", [1 << bit for bit in range(8)]) == []
    assert verify_store(sealed).status is VerifyStatus.OK


@pytest.mark.parametrize(
    "name", ["journal.log", "HEAD", "MANIFEST", "study.lock", "schedule.json", "blob"]
)
def test_store_every_single_byte_flip_in_other_files_is_tamper(sealed: Path, name: str) -> None:
    path = next((sealed / "blobs").iterdir()) if name == "blob" else sealed / name
    assert _flip_each_byte(sealed, path, [1 << bit for bit in range(8)]) == []
    assert verify_store(sealed).status is VerifyStatus.OK


def _next_line(tmp_path: Path) -> tuple[Path, bytes]:
    """A store caught while appending its 4th record, and the exact line being appended.

    The 4th cell's attempts are already journaled (they precede the record), so they are
    pending in the journal, exactly as at the moment of a crash.
    """
    root = tmp_path / "run"
    build(root, 4)
    log = root / "records.log"
    lines = lines_of(log.read_bytes())
    log.write_bytes(b"".join(lines[:-1]))
    (root / "HEAD").write_bytes(head_bytes(4, record_hash(lines[-2])))
    return root, lines[-1]


def _tails(line: bytes) -> dict[str, bytes]:
    rng = random.Random(2705)
    blocks = [line[i : i + 64] for i in range(0, len(line), 64)]
    shuffled = blocks[:]
    while shuffled == blocks:
        rng.shuffle(shuffled)
    return {
        "zeros-1": b"\x00",
        "zeros-record-length": b"\x00" * len(line),
        "zeros-page": b"\x00" * 4096,
        "garbage": bytes(rng.randrange(256) for _ in range(len(line))),
        "garbage-with-newlines": b"\n".join(
            bytes(rng.randrange(256) for _ in range(40)) for _ in range(5)
        ),
        "prefix-half": line[: len(line) // 2],
        "prefix-without-newline": line[:-1],
        "reordered-blocks": b"".join(shuffled),
        "zeros-then-suffix": b"\x00" * 64 + line[64:],
        "newline-only": b"\n",
    }


@pytest.mark.parametrize("kind", sorted(_tails(b"x" * 300)))
def test_store_bad_tail_not_claimed_by_head_is_torn(tmp_path: Path, kind: str) -> None:
    root, line = _next_line(tmp_path)
    tail = _tails(line)[kind]
    with (root / "records.log").open("ab") as f:
        f.write(tail)
    report = verify_store(root)
    assert report.status is VerifyStatus.TORN, report.reason
    assert report.code is VerifyCode.RECORDS_TORN_TAIL
    assert (report.records, report.torn_bytes) == (4, len(tail))


def test_store_bad_tail_followed_by_a_valid_record_is_tamper(tmp_path: Path) -> None:
    root, _ = _next_line(tmp_path)
    log = root / "records.log"
    lines = lines_of(log.read_bytes())
    log.write_bytes(b"".join(lines) + b"\x00" * 10 + b"\n" + lines[-1])
    report = verify_store(root)
    assert report.status is VerifyStatus.TAMPER
    assert report.code is VerifyCode.DATA_AFTER_BAD_RECORD
    assert report.records == 4


def test_store_complete_record_not_yet_in_head_is_torn_head_lag(tmp_path: Path) -> None:
    root, line = _next_line(tmp_path)
    with (root / "records.log").open("ab") as f:
        f.write(line)
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TORN, VerifyCode.HEAD_LAGS)
    assert (report.records, report.head_claimed) == (5, 4)


def test_store_two_records_beyond_head_is_tamper(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 3)
    lines = lines_of((root / "records.log").read_bytes())
    (root / "HEAD").write_bytes(head_bytes(2, record_hash(lines[1])))
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.HEAD_BEHIND)


def _edit_lines(root: Path, edit: str, index: int, *, fix_head: bool) -> None:
    log = root / "records.log"
    lines = lines_of(log.read_bytes())
    if edit == "swap":
        lines[index], lines[index + 1] = lines[index + 1], lines[index]
    elif edit == "delete":
        del lines[index]
    elif edit == "duplicate":
        lines.insert(index, lines[index])
    log.write_bytes(b"".join(lines))
    if fix_head:
        (root / "HEAD").write_bytes(head_bytes(len(lines), record_hash(lines[-1])))


@pytest.mark.parametrize("fix_head", [False, True], ids=["head-as-is", "head-rewritten"])
@pytest.mark.parametrize("edit", ["swap", "delete", "duplicate"])
@pytest.mark.parametrize("index", [1, 2])
def test_store_reordered_deleted_or_duplicated_middle_record_is_tamper(
    store: Path, edit: str, index: int, fix_head: bool
) -> None:
    _edit_lines(store, edit, index, fix_head=fix_head)
    report = verify_store(store)
    assert report.status is VerifyStatus.TAMPER, report.reason
    # A duplicate is inserted after the original, so the original still verifies.
    assert report.records == (index + 1 if edit == "duplicate" else index)
    assert report.code in {VerifyCode.RECORD_SEQ, VerifyCode.RECORD_PREV}


def test_store_deleting_the_last_record_is_caught_by_head(store: Path) -> None:
    _edit_lines(store, "delete", 4, fix_head=False)
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.HEAD_AHEAD)
    assert report.records == 4


def test_store_deleting_the_last_record_and_head_is_caught_by_the_manifest(
    tmp_path: Path,
) -> None:
    root = tmp_path / "run"
    build(root, 3, finalize=True)
    _edit_lines(root, "delete", 3, fix_head=True)
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.MANIFEST_MISMATCH)


def _rewrite_last(root: Path, change: dict[str, object]) -> None:
    """Edit the last record's body, rehash it and fix HEAD: a tamperer who can write."""
    log = root / "records.log"
    lines = lines_of(log.read_bytes())
    body = msgspec.json.decode(lines[-1][65:-1])
    body.update(change)
    lines[-1] = rehashed(canonical_bytes(body))
    log.write_bytes(b"".join(lines))
    (root / "HEAD").write_bytes(head_bytes(len(lines), record_hash(lines[-1])))


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"extra": 1}, VerifyCode.RECORD_BODY_INVALID),
        ({"row": {"cell": 99}}, VerifyCode.ROW_MISMATCH),
        # Not an object where the record type holds one: its decode refuses the body.
        ({"row": None}, VerifyCode.RECORD_BODY_INVALID),
        ({"result": []}, VerifyCode.RECORD_BODY_INVALID),
        ({"audit": [[]]}, VerifyCode.RECORD_BODY_INVALID),
        ({"row_index": 0}, VerifyCode.ROW_INDEX),
        ({"seq": 7}, VerifyCode.RECORD_SEQ),
        ({"attempts": []}, VerifyCode.RECORD_ATTEMPTS),
        ({"blobs": []}, VerifyCode.RECORD_BLOBS),
        ({"journal": {"count": 1, "head": None}}, VerifyCode.RECORD_JOURNAL),
        ({"kind": "genesis"}, VerifyCode.RECORD_BODY_INVALID),
    ],
    ids=lambda v: str(v) if isinstance(v, VerifyCode) else next(iter(v)),
)
def test_store_rehashed_record_with_inconsistent_body_is_tamper(
    store: Path, change: dict[str, object], code: VerifyCode
) -> None:
    _rewrite_last(store, change)
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, code), report.reason
    assert report.records == 4


def test_store_rehashed_result_in_a_sealed_store_breaks_the_manifest(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 3, finalize=True)
    _rewrite_last(root, {"result": {"answer": 41}})
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.MANIFEST_MISMATCH)


def test_store_rehashed_middle_record_breaks_the_chain(store: Path) -> None:
    log = store / "records.log"
    lines = lines_of(log.read_bytes())
    body = msgspec.json.decode(lines[2][65:-1])
    body["result"] = {"answer": 1000}
    lines[2] = rehashed(canonical_bytes(body))
    log.write_bytes(b"".join(lines))
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.RECORD_PREV)
    assert report.records == 3


def test_store_missing_or_corrupt_blob_is_tamper(store: Path) -> None:
    blob = sorted((store / "blobs").iterdir())[0]
    data = blob.read_bytes()
    blob.write_bytes(data + b"!")
    assert verify_store(store).code is VerifyCode.BLOB_CORRUPT
    blob.unlink()
    report = verify_store(store)
    # The journal entry that produced the blob is checked before the record binding it.
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.JOURNAL_BLOBS)
    assert report.records < 5


def test_store_missing_blob_bound_only_by_a_record_is_tamper(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:2]) as writer:
        writer.commit_cell(0, {"answer": 1}, [])
        blob = writer.put_blob(b"attached to the record, not to an attempt")
        writer.commit_cell(1, {"answer": 2}, [], blobs=[blob])
    (root / "blobs" / blob[7:]).unlink()
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.RECORD_BLOBS)
    assert report.records == 2


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("HEAD", VerifyCode.HEAD_MISSING),
        ("study.lock", VerifyCode.LOCK_COPY_MISSING),
        ("schedule.json", VerifyCode.SCHEDULE_COPY_MISSING),
        ("journal.log", VerifyCode.JOURNAL_MISSING),
        ("records.log", VerifyCode.RECORDS_MISSING),
    ],
)
def test_store_missing_file_is_tamper(store: Path, name: str, code: VerifyCode) -> None:
    (store / name).unlink()
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, code)


def test_store_replaced_lock_copy_is_tamper(store: Path) -> None:
    (store / "study.lock").write_bytes(b"another lock")
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.LOCK_COPY_MISMATCH)
    assert report.records == 0


def test_store_replaced_schedule_copy_is_tamper(store: Path) -> None:
    (store / "schedule.json").write_bytes(canonical_bytes(ROWS[1:7]))
    report = verify_store(store)
    assert report.code is VerifyCode.SCHEDULE_COPY_MISMATCH
    (store / "schedule.json").write_bytes(b'[{"b":1, "a":2}]')
    assert verify_store(store).code is VerifyCode.SCHEDULE_COPY_MALFORMED


def test_store_torn_journal_tail_after_the_last_record_is_torn(store: Path) -> None:
    with (store / "journal.log").open("ab") as f:
        f.write(b"\x00" * 100)
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TORN, VerifyCode.JOURNAL_TORN_TAIL)
    assert report.journal_torn_bytes == 100
    assert report.records == 5


def test_store_bad_journal_entry_followed_by_a_valid_one_is_tamper(store: Path) -> None:
    journal = store / "journal.log"
    lines = lines_of(journal.read_bytes())
    journal.write_bytes(b"".join(lines) + b"garbage\n" + lines[-1])
    report = verify_store(store)
    assert report.status is VerifyStatus.TAMPER
    assert report.code is VerifyCode.JOURNAL_DATA_AFTER_BAD_ENTRY


def test_store_flip_in_an_unbound_journal_entry_is_never_ok(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 2, rows=4)
    resumed = RunStore.open_for_resume(root, LOCK, ROWS[:4])
    resumed.writer.journal_begin({"role": "critic"})
    resumed.writer.close()
    journal = root / "journal.log"
    data = journal.read_bytes()
    unbound_start = data.rfind(b"\n", 0, data.rfind(b"\n", 0, len(data) - 1)) + 1
    for offset in range(unbound_start, len(data)):
        damaged = bytearray(data)
        damaged[offset] ^= 0x04
        journal.write_bytes(bytes(damaged))
        assert verify_store(root).status is not VerifyStatus.OK, offset
    journal.write_bytes(data)
    assert verify_store(root).pending_attempts == 1


def test_store_tail_appended_after_finalize_is_tamper(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 3, finalize=True)
    with (root / "records.log").open("ab") as f:
        f.write(b"\x00" * 10)
    report = verify_store(root)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.FINALIZED_TAIL)


def test_store_verify_never_writes(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 2, rows=3)
    with (root / "records.log").open("ab") as f:
        f.write(b"torn")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    verify_store(root)
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert before == after


def test_store_copy_of_a_store_verifies_identically(tmp_path: Path) -> None:
    root = tmp_path / "run"
    build(root, 3, finalize=True)
    shutil.copytree(root, tmp_path / "copy")
    assert verify_store(tmp_path / "copy") == verify_store(root)


def test_store_flip_in_the_last_bound_journal_entry_names_the_entry(store: Path) -> None:
    journal = store / "journal.log"
    data = bytearray(journal.read_bytes())
    last = data.rindex(b"\n", 0, len(data) - 1) + 1  # the last attempt's end, bound by record 4
    data[last + 100] ^= 0x01
    journal.write_bytes(bytes(data))
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.JOURNAL_HASH_MISMATCH)
    assert report.reason.startswith(f"journal entry 8 (byte {last}): stored hash ")
    assert report.reason.endswith("binds it")
    assert report.records == 4


def test_store_flip_in_a_middle_journal_entry_is_tamper(store: Path) -> None:
    journal = store / "journal.log"
    data = bytearray(journal.read_bytes())
    data[data.index(b"\n") + 100] ^= 0x01
    journal.write_bytes(bytes(data))
    report = verify_store(store)
    assert report.status is VerifyStatus.TAMPER
    assert report.code is VerifyCode.JOURNAL_DATA_AFTER_BAD_ENTRY
    assert report.records == 1
