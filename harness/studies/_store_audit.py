"""The run store as the attempt journal, the circuit breaker, the outage test, the stop message.

What every study that writes through ``harness.store`` shares when a provider answers its
policies: ``StoreAudit`` journals each attempt in the store before it is sent (fsynced) and
after it ends, and stores raw responses as blobs; ``Breaker`` watches the attempts as they end
and trips after K consecutive infrastructure failures; ``outage`` tells a unit of work (a V2
cell, a static snapshot) none of whose attempts reached the model, which is never committed:
it measured an outage, not a policy; ``raise_if_stopped`` says how a stopped session ended
and how to continue it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from harness.errors import BreakerTrippedError, ProviderOutageError, RunStoppedError
from harness.providers.attempts import AttemptIntent, AttemptRecord
from harness.providers.kinds import AttemptStatus, FailureKind, infrastructure_cause
from harness.providers.selection import ProviderSelection, credential_option
from harness.store import RunStore

__all__ = [
    "Breaker",
    "FailureDisplay",
    "StoreAudit",
    "outage",
    "raise_if_stopped",
    "resume_command",
]


class FailureDisplay(Protocol):
    """Where the breaker shows its counts (the progress line)."""

    def failures(self, failed: int, streak: int) -> None:
        """Show the session's failed attempts and the current streak."""


def refuse_key(store: RunStore, provider: object) -> None:
    """Make ``store`` refuse any write that holds ``provider``'s API key, in any spelling (a
    backstop behind redaction: nothing stored may hold it). A provider without a key (the
    simulated one) changes nothing; a planner plug-in's router answers for its critics'."""
    key_scan = getattr(provider, "key_scan", None)
    scan = key_scan() if callable(key_scan) else None
    if scan is not None:
        store.refuse(scan.found_in)


def outage(attempts: Sequence[AttemptRecord]) -> str | None:
    """Why ``attempts`` (at least one) measured an outage, or None.

    An outage: every attempt failed for an infrastructure reason; the reason is the last one's.
    """
    if not attempts:
        return None
    causes = [infrastructure_cause(a.failure_kind) for a in attempts]
    if any(c is None for c in causes):
        return None
    last, cause = attempts[-1], causes[-1]
    assert cause is not None  # every cause is set (checked above)
    return f"{cause.value}: {last.failure_detail or last.failure_kind}"


class Breaker:
    """The circuit breaker over consecutive infrastructure failures.

    After ``limit`` consecutive attempts that failed for an infrastructure reason
    (``INFRASTRUCTURE_FAILURES``: a rejected key, an exhausted quota, a missing model, no
    connection) it trips; an answer, usable or not, resets the streak.

    Attributes:
        limit: consecutive infrastructure failures that stop the run (the frozen config's K).
        streak: the current run of consecutive infrastructure failures.
        failed: attempts of this session that did not succeed, except those the run itself
            cancelled (a stop, a dropped cell).
        tripped: why the breaker stopped the run, or None.
    """

    def __init__(self, limit: int, progress: FailureDisplay | None = None) -> None:
        self.limit = max(1, limit)
        self.streak = 0
        self.failed = 0
        self.last: str | None = None
        self.tripped: str | None = None
        self._progress = progress

    def observe(self, record: AttemptRecord) -> None:
        """Count one ended attempt."""
        if (
            record.status is not AttemptStatus.SUCCEEDED
            and record.failure_kind is not FailureKind.CANCELLED
        ):
            # A call the run itself cancelled (Ctrl-C, a dropped cell) did not fail.
            self.failed += 1
        cause = infrastructure_cause(record.failure_kind)
        if cause is not None:
            self.streak += 1
            reason = record.failure_detail or str(record.failure_kind)
            self.last = f"{cause.value}: {reason}"
            if self.streak >= self.limit and self.tripped is None:
                self.tripped = (
                    f"{self.streak} consecutive provider attempts failed for infrastructure "
                    f"reasons (last: {self.last})"
                )
        elif record.status is not AttemptStatus.ABANDONED:
            # An answer (usable or not) reached us: the provider works. An abandoned attempt
            # says nothing either way.
            self.streak = 0
        if self._progress is not None:
            self._progress.failures(self.failed, self.streak)


class StoreAudit:
    """The run store as the providers' attempt journal and blob sink (timed for the benchmark).

    ``begin`` journals (and fsyncs) an attempt before it is sent, ``end`` its record and blobs
    after it; ``put`` stores raw bytes content-addressed. With a breaker, every ended attempt is
    shown to it, and once it has tripped no further attempt is begun. Staged (``rows``: each
    cell's schedule row), attempts go to ``staging.log`` under their cell's row until it commits.
    """

    def __init__(
        self,
        store: RunStore,
        breaker: Breaker | None = None,
        *,
        rows: Mapping[str, int] | None = None,
    ) -> None:
        self._store = store
        self._open: dict[tuple[str, str, int, str], int] = {}
        self._breaker = breaker
        self._rows = rows
        self._cells: dict[str, list[int]] = {}
        self.seconds = 0.0

    def take(self, cell_id: str) -> list[int]:
        """The staging keys of ``cell_id``'s attempts, in the order they were begun."""
        return self._cells.pop(cell_id, [])

    @staticmethod
    def _key(item: AttemptIntent | AttemptRecord) -> tuple[str, str, int, str]:
        return (item.cell_id, item.role.value, item.attempt_index, item.request_hash)

    def begin(self, intent: AttemptIntent) -> None:
        """Journal an attempt about to be sent.

        Raises:
            BreakerTrippedError: the breaker has tripped; nothing is journaled or sent.
        """
        if self._breaker is not None and self._breaker.tripped is not None:
            raise BreakerTrippedError(self._breaker.tripped)
        started = time.perf_counter()
        key = self._key(intent)
        if key in self._open:
            raise ValueError(f"attempt {key} begun twice")
        if self._rows is not None:
            self._open[key] = self._store.stage_begin(intent, row=self._rows[intent.cell_id])
            self._cells.setdefault(intent.cell_id, []).append(self._open[key])
        else:
            self._open[key] = self._store.journal_begin(intent)
        self.seconds += time.perf_counter() - started

    def end(self, record: AttemptRecord) -> None:
        """Journal how an attempt ended, with the blobs it stored."""
        started = time.perf_counter()
        begun = self._open.pop(self._key(record), None)
        if begun is None:
            raise ValueError(f"attempt {self._key(record)} ended without a begin")
        blobs = [b for b in (record.request_blob, record.response_blob) if b is not None]
        if self._rows is not None:
            self._store.stage_end(begun, record, blobs=blobs)
        else:
            self._store.journal_end(begun, record, blobs=blobs)
        self.seconds += time.perf_counter() - started
        if self._breaker is not None:
            self._breaker.observe(record)

    def put(self, data: bytes) -> str:
        """Store raw bytes; return their address."""
        started = time.perf_counter()
        address = self._store.put_blob(data)
        self.seconds += time.perf_counter() - started
        return address


def raise_if_stopped(
    *,
    outage: str | None,
    stopped_by: str | None,
    done: int,
    total: int,
    committed: int,
    unit: str,
    again: str,
) -> None:
    """Raise how a session that did not reach the end stopped, naming the resume command.

    Args:
        outage: why the provider failed (the breaker's or an outage-only unit's reason).
        stopped_by: the signal that stopped the run.
        done: units committed in the store; ``total``: units in its schedule.
        committed: units committed by this session.
        unit: what a unit is called (``cell``, ``snapshot``).
        again: the exact command that continues the store.

    Raises:
        ProviderOutageError: ``outage`` is set (exit 75).
        RunStoppedError: ``stopped_by`` is set (exit 130).
    """
    if outage is not None:
        raise ProviderOutageError(
            f"provider outage: {outage}; the run stopped after {done}/{total} committed "
            f"{unit}s ({committed} this session; the {unit} in flight was dropped and runs "
            f"again on resume), the store is not finalized; continue with `{again}`"
        )
    if stopped_by is not None:
        raise RunStoppedError(
            f"stopped by {stopped_by} after {done}/{total} committed {unit}s ({committed} "
            f"this session); continue with `{again}`"
        )


def resume_command(
    study: str, store_dir: Path, selection: ProviderSelection, lock_path: Path | None
) -> str:
    """The exact command that continues ``store_dir`` (``harness <study> resume``): the
    credential option the run used, and the lock when one was named (everything else comes
    from the store's genesis)."""
    parts = [f"harness {study} resume", shlex.quote(str(store_dir))]
    if lock_path is not None:
        parts.append(f"--lock {shlex.quote(str(lock_path))}")
    option = credential_option(selection)
    if option:
        parts.append(option)
    return " ".join(parts)
