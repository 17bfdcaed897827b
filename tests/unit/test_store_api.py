"""Pins of the store's public surface: exports, verify codes, line format helpers (no I/O)."""

from __future__ import annotations

from typing import Any

import msgspec

from harness import store
from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.store import VerifyCode, VerifyStatus, row_digest, schedule_bytes, schedule_digest
from harness.store._files import LineFault, has_valid_line_after, iter_lines, parse_line

PINNED_EXPORTS = [
    "SIGNATURE_NAMESPACE",
    "require_manifest",
    "sign_manifest",
    "verify_signature",
    "AttemptRef",
    "BeginEntry",
    "CellRecord",
    "EndEntry",
    "FileOps",
    "GenesisRecord",
    "Head",
    "JournalEntry",
    "JournalPos",
    "StoreManifest",
    "OrphanedAttempt",
    "Record",
    "Resumed",
    "RunStore",
    "SealedView",
    "SessionEntry",
    "StoreCheck",
    "StoreState",
    "StoreView",
    "VerifyCode",
    "VerifyReport",
    "VerifyStatus",
    "check_store_for_run",
    "finalize_store",
    "lock_digest",
    "read_blob",
    "read_sealed",
    "read_store",
    "row_digest",
    "schedule_bytes",
    "schedule_digest",
    "verify_store",
]

# Wire strings are a public contract: renaming or removing one must fail here.
PINNED_CODES = [
    "OK",
    "RECORDS_TORN_TAIL",
    "HEAD_LAGS",
    "JOURNAL_TORN_TAIL",
    "LOCK_COPY_MISSING",
    "LOCK_COPY_MISMATCH",
    "SCHEDULE_COPY_MISSING",
    "SCHEDULE_COPY_MALFORMED",
    "SCHEDULE_COPY_MISMATCH",
    "RECORDS_MISSING",
    "RECORD_MALFORMED",
    "RECORD_HASH_MISMATCH",
    "RECORD_BODY_INVALID",
    "RECORD_KIND",
    "RECORD_SEQ",
    "RECORD_PREV",
    "ROW_OUT_OF_RANGE",
    "ROW_INDEX",
    "ROW_MISMATCH",
    "RECORD_JOURNAL",
    "RECORD_ATTEMPTS",
    "RECORD_BLOBS",
    "DATA_AFTER_BAD_RECORD",
    "HEAD_MISSING",
    "HEAD_MALFORMED",
    "HEAD_AHEAD",
    "HEAD_BEHIND",
    "HEAD_HASH_MISMATCH",
    "JOURNAL_MISSING",
    "JOURNAL_MALFORMED",
    "JOURNAL_HASH_MISMATCH",
    "JOURNAL_BODY_INVALID",
    "JOURNAL_SEQ",
    "JOURNAL_PREV",
    "JOURNAL_ATTEMPT",
    "JOURNAL_SESSION",
    "JOURNAL_BLOBS",
    "JOURNAL_DATA_AFTER_BAD_ENTRY",
    "BLOB_CORRUPT",
    "MANIFEST_MALFORMED",
    "MANIFEST_HASH_MISMATCH",
    "MANIFEST_MISMATCH",
    "FINALIZED_TAIL",
    "UNSAFE_FILE",
    "NOT_FINALIZED",
    "IN_PROGRESS",
]


def test_store_public_exports_are_pinned() -> None:
    assert sorted(store.__all__) == sorted(PINNED_EXPORTS)
    for name in store.__all__:
        assert hasattr(store, name), name


def test_store_verify_codes_are_pinned() -> None:
    assert [code.value for code in VerifyCode] == PINNED_CODES
    assert [status.value for status in VerifyStatus] == ["ok", "torn", "tamper", "in_progress"]


def test_store_schedule_digests_use_their_domains() -> None:
    rows: list[dict[str, Any]] = [{"b": 1, "a": [1.5, None]}, {"cell": 2}]
    assert schedule_bytes(rows) == b'[{"a":[1.5,null],"b":1},{"cell":2}]'
    assert schedule_digest(rows) == digest_bytes(Domain.SCHEDULE, schedule_bytes(rows))
    assert row_digest(rows[0]) == digest_bytes(Domain.SCHEDULE_ROW, canonical_bytes(rows[0]))
    assert schedule_digest(list(reversed(rows))) != schedule_digest(rows)


def _line(body: bytes) -> bytes:
    return digest_bytes(Domain.STORE_RECORD, body)[7:].encode() + b" " + body + b"\n"


def test_store_line_parser_hashes_stored_bytes_without_reencoding() -> None:
    # Not canonical (space, key order): the hash still covers exactly these bytes.
    body = b'{"z": 1, "a": 2}'
    parsed = parse_line(_line(body), 0, Domain.STORE_RECORD)
    assert not isinstance(parsed, LineFault)
    assert (parsed.body, parsed.digest) == (body, digest_bytes(Domain.STORE_RECORD, body))
    assert msgspec.json.decode(parsed.body) == {"z": 1, "a": 2}


def test_store_line_parser_names_the_fault_kind() -> None:
    good = _line(b"{}")
    cases = {
        good[:-1]: "incomplete",
        b"x" * 70 + b"\n": "malformed",
        good.upper(): "malformed",
        good[:64] + b" {} \n": "hash",
    }
    for data, kind in cases.items():
        fault = parse_line(data, 0, Domain.STORE_RECORD)
        assert isinstance(fault, LineFault), data
        assert fault.kind == kind, data
    # The domain is part of the hash: a journal line is not a record line.
    assert isinstance(parse_line(good, 0, Domain.JOURNAL_ENTRY), LineFault)


def test_store_iter_lines_stops_at_the_first_bad_line() -> None:
    data = _line(b"[1]") + _line(b"[2]") + b"\x00\x00" + _line(b"[3]")
    lines, stop, fault = iter_lines(data, 0, Domain.STORE_RECORD)
    assert [line.body for line in lines] == [b"[1]", b"[2]"]
    assert stop == lines[-1].end
    assert fault is not None
    assert has_valid_line_after(data, stop, Domain.STORE_RECORD)
    assert not has_valid_line_after(data[: stop + 2], stop, Domain.STORE_RECORD)


def test_store_verification_view_has_the_fields_of_a_cell_record() -> None:
    from harness.store.scan.views import CellView

    assert CellView.__struct_fields__ == ("kind", *store.CellRecord.__struct_fields__)
    assert store.CellRecord.__struct_config__.tag == "cell"
