"""Verification of the record log: chain, sequence, genesis binding, schedule rows, journal
ranges, attempt bindings, blob references (``scan.head`` then classifies the end of the log).

A cell record is decoded into a *view* (``scan.views``): ``CellRecord``'s fields with every digest a
plain string and the row, result and audit entries as raw JSON (most of a record's bytes; the row's
raw bytes are compared with the schedule's canonical row bytes exactly). One set of checks runs on
the view, in the order that names the precise reason. A view that passes every check has each digest
field equal to a digest computed during this scan (a line hash, a schedule row digest, a blob hashed
from its bytes) and a JSON object wherever the record type holds one, so the body decodes into
``CellRecord`` too: the decode is skipped. At the first failing check the body is decoded into the
record type, and a decode error, which msgspec names precisely, is the reason. With ``fast=False``
every body is decoded first: the reference the agreement tests compare against.
"""

from __future__ import annotations

from typing import Final

import msgspec

from harness.canonical import Domain
from harness.store._files import (
    HEAD,
    LOCK_COPY,
    RECORDS,
    SCHEDULE_COPY,
    Line,
    LineFault,
    iter_lines,
)
from harness.store._journal import derive_range
from harness.store._model import (
    CellRecord,
    GenesisRecord,
    SessionEntry,
    VerifyCode,
)
from harness.store.scan.head import head_of
from harness.store.scan.state import Fault, Pass, short
from harness.store.scan.views import CellView

__all__ = ["check_records"]


_RECORD: Final = msgspec.json.Decoder(GenesisRecord | CellRecord)
_VIEW: Final = msgspec.json.Decoder(CellView)
_astuple: Final = msgspec.structs.astuple
_OPEN_BRACE: Final = ord("{")

_JOURNAL_LINE_CODE: Final = {
    "incomplete": VerifyCode.JOURNAL_MALFORMED,
    "malformed": VerifyCode.JOURNAL_MALFORMED,
    "hash": VerifyCode.JOURNAL_HASH_MISMATCH,
}


def _where(index: int, line: Line) -> str:
    return f"record {index} (byte {line.start})"


def _model_fault(index: int, line: Line) -> Fault | None:
    """The decode of a record past genesis into the record type: None when it is a cell
    record, else the precise reason."""
    try:
        record = _RECORD.decode(line.body)
    except msgspec.DecodeError as e:
        return Fault(VerifyCode.RECORD_BODY_INVALID, f"{_where(index, line)}: {e}")
    if isinstance(record, GenesisRecord):
        return Fault(VerifyCode.RECORD_KIND, f"{_where(index, line)} is a second genesis record")
    return None


def check_records(p: Pass) -> tuple[bytes, Fault | None, LineFault | None]:
    """Verify records up to the first bad one; return the log, that record's fault or the
    bad line's fault (for ``classify``)."""
    data = p.files[RECORDS]
    if data is None:
        p.found_tamper(VerifyCode.RECORDS_MISSING, f"{RECORDS} is missing")
        data = b""
    lines, stop, why = iter_lines(data, 0, Domain.STORE_RECORD)
    head = head_of(p.files[HEAD])
    if p.live and head is not None and 0 < head.count < len(lines):
        # A live writer appends past what HEAD claimed when this read began: the snapshot
        # ends where HEAD said (records after it are checked by the next read).
        lines = lines[: head.count]
        stop, why = lines[-1].end, None
        data = data[:stop]
    s = p.s
    s.records_size = len(data)
    for index, line in enumerate(lines):
        fault = _genesis(p, line) if index == 0 else _cell(p, index, line)
        if fault is not None:
            s.records_end = line.start
            return data, fault, None
        s.record_hashes.append(line.digest)
        s.record_starts.append(line.start)
    s.records_end = stop
    return data, None, why


def _genesis(p: Pass, line: Line) -> Fault | None:
    where = _where(0, line)
    try:
        record = _RECORD.decode(line.body)
    except msgspec.DecodeError as e:
        return Fault(VerifyCode.RECORD_BODY_INVALID, f"{where}: {e}")
    if not isinstance(record, GenesisRecord):
        return Fault(VerifyCode.RECORD_KIND, f"{where} is not a genesis record")
    if record.seq != 0:
        return Fault(VerifyCode.RECORD_SEQ, f"{where} carries sequence number {record.seq}")
    if record.prev is not None:
        return Fault(
            VerifyCode.RECORD_PREV, f"{where} links to {short(record.prev)}, expected none"
        )
    s = p.s
    if p.lock_fault is not None:
        return p.lock_fault
    if record.lock_digest != s.lock_digest:
        return Fault(
            VerifyCode.LOCK_COPY_MISMATCH,
            f"{LOCK_COPY} hashes to {short(s.lock_digest)}, "
            f"genesis binds {short(record.lock_digest)}",
        )
    if p.schedule_fault is not None:
        return p.schedule_fault
    if record.schedule_digest != s.schedule_digest or record.schedule_rows != len(s.rows):
        return Fault(
            VerifyCode.SCHEDULE_COPY_MISMATCH,
            f"{SCHEDULE_COPY} ({len(s.rows)} rows, {short(s.schedule_digest)}) "
            f"is not the schedule genesis binds ({record.schedule_rows} rows, "
            f"{short(record.schedule_digest)})",
        )
    s.genesis = record
    return None


def _cell(p: Pass, index: int, line: Line) -> Fault | None:
    checked = not p.fast
    if checked:
        fault = _model_fault(index, line)
        if fault is not None:
            return fault
    try:
        view = _VIEW.decode(line.body)
    except msgspec.DecodeError as e:
        # The view is looser than the record type: that refuses the body too, and names why.
        return _model_fault(index, line) or Fault(
            VerifyCode.RECORD_BODY_INVALID, f"{_where(index, line)}: {e}"
        )
    fault = _cell_fault(p, index, line, view)
    if fault is not None:
        return (None if checked else _model_fault(index, line)) or fault
    s = p.s
    s.cells.append(view)
    s.cell_bodies.append(line.body)
    s.bound_journal = view.journal.count
    return None


def _cell_fault(p: Pass, index: int, line: Line, record: CellView) -> Fault | None:
    """Every check of one cell record, in order; None when it holds."""
    s = p.s
    if record.seq != index:
        return Fault(
            VerifyCode.RECORD_SEQ, f"{_where(index, line)} carries sequence number {record.seq}"
        )
    prev = s.record_hashes[-1]
    if record.prev != prev:
        return Fault(
            VerifyCode.RECORD_PREV,
            f"{_where(index, line)} links to {short(record.prev)}, expected {short(prev)}",
        )
    row = record.row_index
    if row != index - 1:
        return Fault(
            VerifyCode.ROW_INDEX,
            f"{_where(index, line)} holds schedule row {row}; the next row is {index - 1}",
        )
    if row >= len(s.rows):
        return Fault(
            VerifyCode.ROW_OUT_OF_RANGE,
            f"{_where(index, line)} holds row {row}; the schedule has {len(s.rows)} rows",
        )
    if record.row_digest != s.row_digests[row] or bytes(record.row) != s.row_bytes[row]:
        return Fault(
            VerifyCode.ROW_MISMATCH,
            f"{_where(index, line)}: its row differs from schedule row {row}",
        )
    if memoryview(record.result)[0] != _OPEN_BRACE or not all(
        memoryview(item)[0] == _OPEN_BRACE for item in record.audit
    ):
        # Raw JSON that does not start with a brace is no object: the record type refuses it
        # at decode, and that error is the reason (this one stands only if it did not).
        return Fault(
            VerifyCode.RECORD_BODY_INVALID,
            f"{_where(index, line)}: its result and every audit entry must be JSON objects",
        )
    return _binding_fault(p, index, line, record)


def _binding_fault(p: Pass, index: int, line: Line, record: CellView) -> Fault | None:
    """The record binds its journal range, the attempts derived from it, and known blobs."""
    s = p.s
    pos = record.journal
    start = s.bound_journal
    if pos.count < start:
        return Fault(
            VerifyCode.RECORD_JOURNAL,
            f"{_where(index, line)} binds journal count {pos.count}, "
            f"before the previous record's {start}",
        )
    if pos.count > p.journal_valid:
        fault = p.journal_tail_fault
        if fault is not None:
            # The journal entry itself is the precise reason; the record only claims it.
            return Fault(
                _JOURNAL_LINE_CODE[fault.kind],
                f"journal entry {p.journal_valid} (byte {s.journal_end}): "
                f"{fault.text}; {_where(index, line)} binds it",
            )
        return Fault(
            VerifyCode.RECORD_JOURNAL,
            f"{_where(index, line)} binds {pos.count} journal entries; "
            f"only {p.journal_valid} verify",
        )
    head = s.journal[pos.count - 1].digest if pos.count else None
    if pos.head != head:
        return Fault(
            VerifyCode.RECORD_JOURNAL,
            f"{_where(index, line)} binds journal head {short(pos.head)}, "
            f"the journal has {short(head)}",
        )
    entries = s.journal[start : pos.count]
    for item in entries:
        if type(item.entry) is SessionEntry and item.entry.records != record.seq:
            return Fault(
                VerifyCode.RECORD_JOURNAL,
                f"{_where(index, line)}: session entry {item.entry.seq} says "
                f"{item.entry.records} records preceded it, but {record.seq} do",
            )
    derived = derive_range(entries)
    if isinstance(derived, str):
        return Fault(VerifyCode.RECORD_JOURNAL, f"{_where(index, line)}: {derived}")
    attempts, end_blobs, open_current = derived
    if open_current:
        return Fault(
            VerifyCode.RECORD_ATTEMPTS,
            f"{_where(index, line)} was committed with attempt {open_current[0]} still open",
        )
    # Hashes equal to journal line digests are well-formed digests.
    if attempts != list(map(_astuple, record.attempts)):
        return Fault(
            VerifyCode.RECORD_ATTEMPTS,
            f"{_where(index, line)} binds {len(record.attempts)} attempts; its journal range "
            f"holds {len(attempts)} (or they differ)",
        )
    blobs = record.blobs
    if len(blobs) > 1 and list(blobs) != sorted(set(blobs)):
        return Fault(
            VerifyCode.RECORD_BLOBS, f"{_where(index, line)}: blobs are not sorted and unique"
        )
    missing = end_blobs.difference(blobs)
    if missing:
        return Fault(
            VerifyCode.RECORD_BLOBS,
            f"{_where(index, line)} omits blob {short(min(missing))} its attempts reference",
        )
    known = s.blobs
    for blob in blobs:
        if blob not in known:
            return Fault(
                VerifyCode.RECORD_BLOBS,
                f"{_where(index, line)} references blob {short(blob)}, which is missing or corrupt",
            )
    return None
