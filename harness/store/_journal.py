"""How journal entries bind into a record: one rule, used by the writer and by verification.

A cell record binds every journal entry written since the previous record (its *range*). Each
attempt begun in the range becomes an ``AttemptRef``. An attempt begun before the last session
entry of the range was begun by a writer that died before committing: it is *orphaned* and may
lack an end entry. Any other attempt must be ended before its cell is committed.

This module is pure: it maps entries to bindings and performs no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from harness.store._model import (
    AttemptRef,
    BeginEntry,
    EndEntry,
    JournalEntry,
    OrphanedAttempt,
    SessionEntry,
)

__all__ = ["Binding", "RangeEntry", "bind_range", "orphans_of"]


class RangeEntry(msgspec.Struct, frozen=True, gc=False):
    """A verified journal entry with its digest.

    A Struct for cheap construction (one per journal entry). Untracked by the cycle collector:
    an entry is decoded data and cannot refer back to its RangeEntry.
    """

    digest: str
    entry: JournalEntry


class Binding(msgspec.Struct, frozen=True):
    """What a record must bind for a journal range."""

    attempts: tuple[AttemptRef, ...]
    end_blobs: frozenset[str]
    open_current: tuple[int, ...]


def bind_range(entries: Sequence[RangeEntry]) -> Binding | str:
    """Derive the attempts a record binds for ``entries``; or say why the range is inconsistent."""
    last_session = -1
    begins: dict[int, str] = {}
    ends: dict[int, tuple[int, str]] = {}
    blobs: set[str] = set()
    for item in entries:
        entry = item.entry
        if isinstance(entry, SessionEntry):
            last_session = entry.seq
        elif isinstance(entry, BeginEntry):
            begins[entry.seq] = item.digest
        elif isinstance(entry, EndEntry):
            if entry.begin_seq not in begins:
                return (
                    f"journal entry {entry.seq} ends attempt {entry.begin_seq}, "
                    "which was not begun in the same record's range"
                )
            ends[entry.begin_seq] = (entry.seq, item.digest)
            blobs.update(entry.blobs)
    attempts: list[AttemptRef] = []
    open_current: list[int] = []
    for begin_seq, begin_hash in begins.items():
        end = ends.get(begin_seq)
        orphaned = begin_seq < last_session
        if end is None and not orphaned:
            open_current.append(begin_seq)
        attempts.append(
            AttemptRef(
                begin_seq=begin_seq,
                begin_hash=begin_hash,
                end_seq=None if end is None else end[0],
                end_hash=None if end is None else end[1],
                orphaned=orphaned,
            )
        )
    return Binding(tuple(attempts), frozenset(blobs), tuple(open_current))


def orphans_of(entries: Sequence[RangeEntry]) -> tuple[OrphanedAttempt, ...]:
    """The attempts begun in ``entries`` (all from dead sessions), with their outcomes if any."""
    ends = {
        item.entry.begin_seq: item.entry for item in entries if isinstance(item.entry, EndEntry)
    }
    orphans: list[OrphanedAttempt] = []
    for item in entries:
        if isinstance(item.entry, BeginEntry):
            end = ends.get(item.entry.seq)
            orphans.append(
                OrphanedAttempt(
                    begin_seq=item.entry.seq,
                    attempt=item.entry.attempt,
                    outcome=None if end is None else end.outcome,
                    blobs=() if end is None else end.blobs,
                )
            )
    return tuple(orphans)
