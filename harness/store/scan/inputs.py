"""Verification of the run's input copies: the study lock and the canonical schedule.

Genesis binds both digests (checked in ``scan.records``); each cell record binds its schedule
row's canonical bytes and digest, which ``split_schedule`` derives once for the writer and the
scan alike.
"""

from __future__ import annotations

from typing import Any, Final

import blake3
import msgspec

from harness.canonical import DIGEST_PREFIX, Domain, canonical_bytes, digest_bytes, domain_prefix
from harness.store._files import LOCK_COPY, SCHEDULE_COPY
from harness.store._model import VerifyCode
from harness.store.scan.state import Fault, Pass

__all__ = ["ScheduleRows", "check_copies", "split_schedule"]

_ROWS: Final = msgspec.json.Decoder(list[dict[str, Any]])
_ROW_SPANS: Final = msgspec.json.Decoder(list[msgspec.Raw])


class ScheduleRows(msgspec.Struct, frozen=True):
    """A canonical schedule's rows, each row's canonical bytes, and each row's digest."""

    rows: list[dict[str, Any]]
    row_bytes: list[bytes]
    row_digests: list[str]


def split_schedule(data: bytes) -> ScheduleRows | str:
    """Split canonical schedule bytes into rows, row bytes and row digests; or say why not.

    The schedule is the canonical bytes of the row list, so each element's span is exactly the
    canonical bytes of that row: the rows are hashed from those spans, never re-encoded.
    """
    try:
        rows = _ROWS.decode(data)
    except msgspec.DecodeError as e:
        return f"is not a row list: {e}"
    if not rows:
        return "has no rows"
    if canonical_bytes(rows) != data:
        return "is not in canonical form"
    row_bytes = [bytes(span) for span in _ROW_SPANS.decode(data)]
    prefix = domain_prefix(Domain.SCHEDULE_ROW)
    digests = [DIGEST_PREFIX + blake3.blake3(prefix + item).digest().hex() for item in row_bytes]
    return ScheduleRows(rows, row_bytes, digests)


def check_copies(p: Pass) -> None:
    """Hash the lock copy and split the schedule copy; a missing or bad copy is tamper."""
    lock = p.read(LOCK_COPY)
    if lock is None:
        p.lock_fault = Fault(VerifyCode.LOCK_COPY_MISSING, f"{LOCK_COPY} is missing")
        p.found_tamper(p.lock_fault.code, p.lock_fault.reason)
    else:
        p.s.lock_digest = digest_bytes(Domain.LOCK, lock)
    schedule = p.read(SCHEDULE_COPY)
    if schedule is None:
        p.schedule_fault = Fault(VerifyCode.SCHEDULE_COPY_MISSING, f"{SCHEDULE_COPY} is missing")
    else:
        split = split_schedule(schedule)
        if isinstance(split, str):
            p.schedule_fault = Fault(VerifyCode.SCHEDULE_COPY_MALFORMED, f"{SCHEDULE_COPY} {split}")
        else:
            p.s.rows, p.s.row_bytes, p.s.row_digests = (
                split.rows,
                split.row_bytes,
                split.row_digests,
            )
            p.s.schedule_digest = digest_bytes(Domain.SCHEDULE, schedule)
    if p.schedule_fault is not None:
        p.found_tamper(p.schedule_fault.code, p.schedule_fault.reason)
