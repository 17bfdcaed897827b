"""HEAD, and the classification of the record log's end against it.

Classification (the protocol: a record is fsynced before HEAD is replaced):

* torn (recoverable): bad bytes after the last record HEAD claims, with no correctly hashed
  line among them; or one complete record HEAD does not yet claim.
* tamper: anything else, e.g. HEAD claiming a record that does not verify, a bad record
  followed by a good one, a correctly hashed record that breaks the chain.
"""

from __future__ import annotations

from typing import Final

import msgspec

from harness.canonical import Domain
from harness.store._files import HEAD, LineFault, has_valid_line_after, parse_line
from harness.store._model import Head, VerifyCode
from harness.store.scan.state import Fault, Pass, short

__all__ = ["classify", "head_of", "read_head"]

_HEAD: Final = msgspec.json.Decoder(Head)
_RECORD_LINE_CODE: Final = {
    "incomplete": VerifyCode.RECORD_MALFORMED,
    "malformed": VerifyCode.RECORD_MALFORMED,
    "hash": VerifyCode.RECORD_HASH_MISMATCH,
}


def head_of(data: bytes | None) -> Head | None:
    """HEAD decoded, or None when absent or not a valid HEAD line."""
    head = read_head(data)
    return head if isinstance(head, Head) else None


def read_head(data: bytes | None) -> Head | Fault:
    """HEAD decoded, or why it is missing or malformed."""
    if data is None:
        return Fault(VerifyCode.HEAD_MISSING, f"{HEAD} is missing")
    line = parse_line(data, 0, Domain.STORE_HEAD)
    if isinstance(line, LineFault) or line.end != len(data):
        text = line.text if isinstance(line, LineFault) else "extra bytes after the line"
        return Fault(VerifyCode.HEAD_MALFORMED, f"{HEAD}: {text}")
    try:
        return _HEAD.decode(line.body)
    except msgspec.DecodeError as e:
        return Fault(VerifyCode.HEAD_MALFORMED, f"{HEAD}: {e}")


def classify(p: Pass, data: bytes, semantic: Fault | None, why: LineFault | None) -> None:
    """Compare the verified log with HEAD: intact, a recoverable crash state, or tamper."""
    n = p.s.records
    pos = p.s.records_end
    hashes = p.s.record_hashes
    head = read_head(p.files[HEAD])
    if isinstance(head, Head):
        p.head = head
    if semantic is not None:
        p.found_tamper(semantic.code, semantic.reason)
        return
    if isinstance(head, Fault):
        p.found_tamper(head.code, head.reason)
        return
    claimed = head.count
    if why is not None:
        where = f"record {n} (byte {pos})"
        if claimed > n:
            p.found_tamper(
                _RECORD_LINE_CODE[why.kind],
                f"{where}: {why.text}; {HEAD} claims {claimed} records",
            )
        elif has_valid_line_after(data, pos, Domain.STORE_RECORD):
            p.found_tamper(
                VerifyCode.DATA_AFTER_BAD_RECORD,
                f"{where}: {why.text}, and correctly hashed records follow it",
            )
        elif claimed == n and n > 0 and head.head == hashes[-1]:
            p.found_torn(
                VerifyCode.RECORDS_TORN_TAIL,
                f"{where}: {why.text}; {len(data) - pos} bytes {HEAD} does not claim "
                "(torn final append, recoverable)",
            )
        elif claimed == n:
            p.found_tamper(
                VerifyCode.HEAD_HASH_MISMATCH,
                f"{HEAD} names {short(head.head)} as record {n - 1}",
            )
        else:
            p.found_tamper(
                VerifyCode.HEAD_BEHIND,
                f"{HEAD} claims {claimed} records; {n} verify before a bad tail",
            )
        return
    if claimed > n:
        p.found_tamper(
            VerifyCode.HEAD_AHEAD,
            f"{HEAD} claims {claimed} records; the log holds {n} (records removed)",
        )
    elif claimed == n:
        if head.head != hashes[-1]:
            p.found_tamper(
                VerifyCode.HEAD_HASH_MISMATCH,
                f"{HEAD} names {short(head.head)} as record {n - 1}, "
                f"which hashes to {short(hashes[-1])}",
            )
    elif claimed == n - 1:
        if head.head != hashes[-2]:
            p.found_tamper(
                VerifyCode.HEAD_HASH_MISMATCH,
                f"{HEAD} names {short(head.head)} as record {n - 2}",
            )
        else:
            p.s.head_lags = True
            p.found_torn(
                VerifyCode.HEAD_LAGS,
                f"record {n - 1} is complete but {HEAD} still claims {claimed} "
                "(crash between record fsync and HEAD replace, recoverable)",
            )
    else:
        p.found_tamper(VerifyCode.HEAD_BEHIND, f"{HEAD} claims {claimed} records; {n} verify")
