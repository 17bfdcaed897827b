"""Verification of the attempt journal: chain, sequence, sessions, attempt order, blob references.

Each entry is decoded into a *view*: the entry's fields with ``prev`` and the blob digests as
plain strings (msgspec's pattern check per digest costs more than the rest of decoding). One set
of checks runs on the view, in the order that names the precise reason. A view that passes
every check has each digest field equal to a digest computed during this scan (a line hash, or
a blob hashed from its bytes), and those are well-formed, so the entry decodes into its model
type too: the decode is skipped. At the first failing check the entry is decoded into its model
type (``JournalEntry``), and a decode error, which msgspec names precisely, is the reason. With
``fast=False`` every entry is decoded first: the reference the agreement tests compare against.
"""

from __future__ import annotations

from typing import Final

import msgspec

from harness.canonical import Domain
from harness.store._files import JOURNAL, Line, has_valid_line_after, iter_lines
from harness.store._journal import RangeEntry, bind_range
from harness.store._model import (
    BeginEntry,
    EndEntry,
    JournalEntry,
    SessionEntry,
    VerifyCode,
)
from harness.store.scan.state import Fault, Pass, short
from harness.store.scan.views import BeginView, EndView, SessionView

__all__ = ["check_journal", "check_pending"]


_ENTRY: Final = msgspec.json.Decoder(JournalEntry)
_VIEW: Final = msgspec.json.Decoder(SessionView | BeginView | EndView)


def _model_fault(index: int, line: Line) -> Fault | None:
    """The decode into the model type: None when it accepts, else the precise reason."""
    try:
        _ENTRY.decode(line.body)
    except msgspec.DecodeError as e:
        return Fault(VerifyCode.JOURNAL_BODY_INVALID, f"journal entry {index}: {e}")
    return None


def _entry_fault(
    p: Pass,
    index: int,
    view: SessionView | BeginView | EndView,
    prev: str | None,
    session: int,
    begun: dict[int, int],
    ended: set[int],
) -> Fault | None:
    """Every check of one entry, in order; None when it holds."""
    if view.seq != index:
        return Fault(
            VerifyCode.JOURNAL_SEQ, f"journal entry {index} carries sequence number {view.seq}"
        )
    if view.prev != prev:
        return Fault(
            VerifyCode.JOURNAL_PREV,
            f"journal entry {index} links to {short(view.prev)}, expected {short(prev)}",
        )
    if index == 0 and type(view) is not SessionView:
        return Fault(VerifyCode.JOURNAL_SESSION, "journal does not open with a session entry")
    if type(view) is EndView:
        if begun.get(view.begin_seq) != session or view.begin_seq in ended:
            return Fault(
                VerifyCode.JOURNAL_ATTEMPT,
                f"journal entry {index} ends attempt {view.begin_seq}, which this writer "
                "session did not begin or already ended",
            )
        blobs = view.blobs
        if len(blobs) > 1 and list(blobs) != sorted(set(blobs)):
            return Fault(
                VerifyCode.JOURNAL_BODY_INVALID, f"journal entry {index}: blobs not sorted unique"
            )
        known = p.s.blobs
        for blob in blobs:
            if blob not in known:
                return Fault(
                    VerifyCode.JOURNAL_BLOBS,
                    f"journal entry {index} references blob {short(blob)}, "
                    "which is missing or corrupt",
                )
    return None


def check_journal(p: Pass) -> None:
    """Verify the journal's entries up to the first bad one; a bad tail is torn or tamper."""
    data = p.files[JOURNAL]
    if data is None:
        p.found_tamper(VerifyCode.JOURNAL_MISSING, f"{JOURNAL} is missing")
        data = b""
    s = p.s
    s.journal_size = len(data)
    lines, stop, why = iter_lines(data, 0, Domain.JOURNAL_ENTRY)
    begun: dict[int, int] = {}
    ended: set[int] = set()
    session = -1
    prev: str | None = None
    append = s.journal.append
    decode = _VIEW.decode
    checked = not p.fast
    for index, line in enumerate(lines):
        fault = _model_fault(index, line) if checked else None
        if fault is None:
            try:
                view = decode(line.body)
            except msgspec.DecodeError as e:
                # The view is looser than the model: the model refuses the body too (and
                # names why).
                fault = _model_fault(index, line) or Fault(
                    VerifyCode.JOURNAL_BODY_INVALID, f"journal entry {index}: {e}"
                )
            else:
                fault = _entry_fault(p, index, view, prev, session, begun, ended)
                if fault is not None and not checked:
                    fault = _model_fault(index, line) or fault
        if fault is not None:
            p.found_tamper(fault.code, fault.reason)
            p.journal_tail_is_tamper = True
            stop = line.start
            break
        # The view passed every check: it is the model entry with proven digests.
        entry: JournalEntry
        if type(view) is BeginView:  # the most frequent kind first
            begun[index] = session
            entry = BeginEntry(seq=index, prev=prev, attempt=view.attempt)
        elif type(view) is EndView:
            ended.add(view.begin_seq)
            entry = EndEntry(
                seq=index,
                prev=prev,
                begin_seq=view.begin_seq,
                outcome=view.outcome,
                blobs=view.blobs,
            )
        else:
            assert type(view) is SessionView
            session = index
            entry = SessionEntry(
                seq=index, prev=prev, records=view.records, environment=view.environment
            )
        prev = line.digest
        append(RangeEntry(prev, entry))
    else:
        if why is not None:
            if has_valid_line_after(data, stop, Domain.JOURNAL_ENTRY):
                p.found_tamper(
                    VerifyCode.JOURNAL_DATA_AFTER_BAD_ENTRY,
                    f"journal entry {len(lines)} at byte {stop} is bad ({why.text}) "
                    "and correctly hashed entries follow it",
                )
                p.journal_tail_is_tamper = True
            p.journal_tail_fault = why
    p.journal_valid = len(s.journal)
    s.journal_end = stop
    if p.journal_valid == 0 and p.tamper is None:
        p.found_tamper(
            VerifyCode.JOURNAL_SESSION,
            "journal lacks the session entry every store opens with",
        )


def check_pending(p: Pass) -> None:
    """The entries no record binds yet: consistent, and a bad journal tail after them is torn."""
    n = p.s.records
    entries = p.s.pending
    for item in entries:
        if isinstance(item.entry, SessionEntry) and item.entry.records != n:
            p.found_tamper(
                VerifyCode.JOURNAL_SESSION,
                f"journal entry {item.entry.seq} says {item.entry.records} records "
                f"preceded it, but the log holds {n}",
            )
            return
    binding = bind_range(entries)
    if isinstance(binding, str):
        p.found_tamper(VerifyCode.JOURNAL_ATTEMPT, binding)
        return
    if p.journal_tail_fault is not None and not p.journal_tail_is_tamper:
        p.found_torn(
            VerifyCode.JOURNAL_TORN_TAIL,
            f"journal entry {p.journal_valid} (byte {p.s.journal_end}): "
            f"{p.journal_tail_fault.text}; no record binds it (torn append, recoverable)",
        )
