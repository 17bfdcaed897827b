"""How journal entries bind into a record: one rule, used by the writer and by verification.

A cell record binds every journal entry written since the previous record (its *range*). Each
attempt begun in the range becomes an ``AttemptRef``. An attempt begun before the last session
entry of the range was begun by a writer that died before committing: it is *orphaned* and may
lack an end entry. Any other attempt must be ended before its cell is committed.

This module is pure: it maps entries to bindings and performs no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import msgspec

from harness.store._model import (
    AttemptRef,
    BeginEntry,
    EndEntry,
    JournalEntry,
    OrphanedAttempt,
    SessionEntry,
)

__all__ = ["AttemptFields", "Binding", "RangeEntry", "bind_range", "derive_range", "orphans_of"]


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


AttemptFields: TypeAlias = tuple[int, str, int | None, str | None, bool]
"""An ``AttemptRef``'s fields in declaration order (begin_seq, begin_hash, end_seq, end_hash,
orphaned): what ``msgspec.structs.astuple`` gives for one."""


def derive_range(
    entries: Sequence[RangeEntry],
) -> tuple[list[AttemptFields], set[str], list[int]] | str:
    """The binding rule in plain values: attempt fields, end blobs and open current attempts.

    ``bind_range`` wraps this; verification compares the plain values directly, which spares
    building a Struct per attempt of a whole store.
    """
    last_session = -1
    begins: dict[int, str] = {}
    ends: dict[int, tuple[int, str]] = {}
    blobs: set[str] = set()
    for item in entries:
        entry = item.entry
        if isinstance(entry, BeginEntry):  # the most frequent kind first
            begins[entry.seq] = item.digest
        elif isinstance(entry, EndEntry):
            if entry.begin_seq not in begins:
                return (
                    f"journal entry {entry.seq} ends attempt {entry.begin_seq}, "
                    "which was not begun in the same record's range"
                )
            ends[entry.begin_seq] = (entry.seq, item.digest)
            blobs.update(entry.blobs)
        elif isinstance(entry, SessionEntry):
            last_session = entry.seq
    attempts: list[AttemptFields] = []
    open_current: list[int] = []
    for begin_seq, begin_hash in begins.items():
        end = ends.get(begin_seq)
        orphaned = begin_seq < last_session
        if end is None:
            if not orphaned:
                open_current.append(begin_seq)
            attempts.append((begin_seq, begin_hash, None, None, orphaned))
        else:
            attempts.append((begin_seq, begin_hash, end[0], end[1], orphaned))
    return attempts, blobs, open_current


def bind_range(entries: Sequence[RangeEntry]) -> Binding | str:
    """Derive the attempts a record binds for ``entries``; or say why the range is inconsistent."""
    derived = derive_range(entries)
    if isinstance(derived, str):
        return derived
    fields, blobs, open_current = derived
    attempts = tuple(
        AttemptRef(
            begin_seq=begin_seq,
            begin_hash=begin_hash,
            end_seq=end_seq,
            end_hash=end_hash,
            orphaned=orphaned,
        )
        for begin_seq, begin_hash, end_seq, end_hash, orphaned in fields
    )
    return Binding(attempts, frozenset(blobs), tuple(open_current))


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
