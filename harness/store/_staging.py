"""``staging.log``: the attempts of concurrent cells before their cell commits, and what a dead
session's file may add to the journal on resume (checked, never trusted).

A cell that is not the next to commit (``--max-cells`` > 1) stages each provider attempt: a line
written and fsynced before the call is sent (``Staging.begin``), and one when it ends
(``Staging.end``). When the cell commits, the writer journals its staged attempts in order
(``Staging.take``), so the journal and the records are those of a sequential run. The writer
(``_writer.RunStore``) owns one ``Staging`` and keeps the journal, the blobs and the commits.

``staging.log`` lies outside the chain, so on resume every line of a dead session's file is
checked against the chain before it is bound (``Staging.left_by_dead_session``):

- shape: a begin line ``{"begin": k, "session": S, "row": r, "attempt": {...}}`` or an end
  line ``{"end": k, "outcome": {...}, "blobs": [...]}``, plain JSON; only the last line may be
  torn (a crash in its write); begin keys count up from 0; an end follows its own begin once;
- chain position: ``S`` is the digest of the journal's last session entry (the dead session
  staged it; a line of any other session is stale or forged);
- cell: ``r`` is a schedule row, and its ``cell_id`` (when the row and the attempt have one) is
  the attempt's;
- request: the outcome agrees with the begun attempt on every field both carry (request hash,
  cell, role, attempt index...), and every blob it lists is in the store.

Then each staged attempt is either already in the journal (journaled by its session after the
last session entry: its cell committed, or the commit or an earlier migration was cut short)
or still to be journaled; an attempt of a committed row must be in the journal. Only attempts
of uncommitted cells that the journal lacks are returned: each attempt is journaled once.

The check (``staged_to_journal``) is pure: bytes and chain facts in, attempts out;
``TamperError`` names the first bad line.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any, Final, NamedTuple

import msgspec

from harness.canonical import NonCanonicalError, canonical_bytes
from harness.errors import (
    AttemptStateError,
    DurabilityError,
    RecordInvalidError,
    TamperError,
    UnsafeFileError,
)
from harness.safeio import read_regular
from harness.store._files import Durable

__all__ = [
    "STAGING",
    "StagedAttempt",
    "Staging",
    "begin_line",
    "check_cell",
    "end_line",
    "staged_to_journal",
]

STAGING: Final = "staging.log"
"""Attempts of cells that are not the next to commit (concurrent runs): one JSON line each,
fsynced before the call is sent; moved into the journal in schedule order when their cell
commits, or as orphaned attempts of a dead session on resume (only those of uncommitted cells
the journal lacks, after every line is checked). Outside the chain."""
_MAX_STAGING: Final = 1 << 30
_APPEND: Final = os.O_WRONLY | os.O_APPEND

_BEGIN_KEYS = frozenset({"begin", "session", "row", "attempt"})
_END_KEYS = frozenset({"end", "outcome", "blobs"})


class StagedAttempt(NamedTuple):
    """One staged attempt the journal still lacks: its attempt, outcome (None if it never
    ended) and blobs."""

    attempt: dict[str, Any]
    outcome: dict[str, Any] | None
    blobs: tuple[str, ...]


def begin_line(key: int, session: str, row: int, attempt: Mapping[str, Any]) -> dict[str, Any]:
    """The staging line of attempt ``key`` begun for schedule row ``row`` in ``session``."""
    return {"begin": key, "session": session, "row": row, "attempt": dict(attempt)}


def end_line(key: int, outcome: Mapping[str, Any], blobs: Sequence[str]) -> dict[str, Any]:
    """The staging line of how attempt ``key`` ended."""
    return {"end": key, "outcome": dict(outcome), "blobs": list(blobs)}


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _plain(value: object) -> bytes | None:
    try:
        return canonical_bytes(value)
    except NonCanonicalError:
        return None


def check_cell(row: Mapping[str, Any], attempt: Mapping[str, Any]) -> str | None:
    """Why ``attempt`` cannot belong to schedule ``row``, or None."""
    cell, claimed = row.get("cell_id"), attempt.get("cell_id")
    if cell is not None and claimed is not None and cell != claimed:
        return f"is for cell {claimed!r}, but its row holds cell {cell!r}"
    return None


def _agree(attempt: Mapping[str, Any], outcome: Mapping[str, Any]) -> str | None:
    for name, value in attempt.items():
        if name in outcome and outcome[name] != value:
            return f"its outcome's {name} differs from the begun attempt's"
    return None


def staged_to_journal(  # noqa: C901 - the checks of each staged line, as the module docstring lists them
    data: bytes,
    *,
    session: str | None,
    rows: Sequence[Mapping[str, Any]],
    next_row: int,
    blobs: Set[str],
    journaled: Sequence[Mapping[str, Any]],
    where: str,
) -> list[StagedAttempt]:
    """The staged attempts of ``data`` to journal as orphaned, in the order they were begun.

    Args:
        data: the bytes of ``staging.log``.
        session: the digest of the journal's last session entry.
        rows: the schedule rows; ``next_row``: the first row not committed.
        blobs: the blobs in the store.
        journaled: the attempts of the begin entries after the last session entry.
        where: the store, for messages.

    Raises:
        TamperError: a line breaks a rule of the module docstring.
    """
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()  # a torn last line: its write was cut by the crash, nothing was sent after

    def bad(number: int, why: str) -> TamperError:
        return TamperError(f"staging.log line {number} in {where} {why}; the store is refused")

    begun: list[tuple[int, dict[str, Any]]] = []
    ends: dict[int, tuple[dict[str, Any], tuple[str, ...]]] = {}
    for number, raw in enumerate(lines, start=1):
        try:
            line = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            raise bad(number, "is not JSON") from None
        if not isinstance(line, dict) or _plain(line) is None:
            raise bad(number, "is not a plain JSON object")
        if set(line) == _BEGIN_KEYS:
            key, row, attempt = line["begin"], line["row"], line["attempt"]
            if key != len(begun) or not _is_count(key):
                raise bad(number, f"begins attempt {key!r}, not the next key {len(begun)}")
            if line["session"] != session:
                raise bad(number, "was not staged by the store's last session")
            if not _is_count(row) or row >= len(rows):
                raise bad(number, f"names row {row!r}, which the schedule does not have")
            if not isinstance(attempt, dict):
                raise bad(number, "holds an attempt that is not a JSON object")
            mismatch = check_cell(rows[row], attempt)
            if mismatch is not None:
                raise bad(number, f"stages an attempt that {mismatch}")
            begun.append((row, attempt))
        elif set(line) == _END_KEYS:
            key, outcome, listed = line["end"], line["outcome"], line["blobs"]
            if not _is_count(key) or key >= len(begun) or key in ends:
                raise bad(number, f"ends attempt {key!r}, which is not open")
            if not isinstance(outcome, dict):
                raise bad(number, "holds an outcome that is not a JSON object")
            disagreement = _agree(begun[key][1], outcome)
            if disagreement is not None:
                raise bad(number, f"ends attempt {key}, but {disagreement}")
            if not isinstance(listed, list) or not all(
                isinstance(b, str) and b in blobs for b in listed
            ):
                raise bad(number, "lists a blob the store does not hold")
            ends[key] = (outcome, tuple(listed))
        elif set(line) == {"begin", "attempt"}:
            raise bad(
                number,
                "was staged by an earlier harness version, without the chain position and row "
                "resume checks",
            )
        else:
            raise bad(number, "is neither a begin nor an end line")
    in_journal = Counter(canonical_bytes(dict(attempt)) for attempt in journaled)
    todo: list[StagedAttempt] = []
    for key, (row, attempt) in enumerate(begun):
        body = canonical_bytes(attempt)
        if in_journal[body] > 0:
            in_journal[body] -= 1
            continue
        if row < next_row:
            raise TamperError(
                f"staging.log in {where} stages attempt {key} of committed row {row}, which the "
                "journal does not hold; the store is refused"
            )
        end = ends.get(key)
        todo.append(
            StagedAttempt(attempt, None if end is None else end[0], () if end is None else end[1])
        )
    return todo


class Staging:
    """One writer's ``staging.log`` and the attempts staged in it that are not journaled yet.

    The file is opened on the first staged line and written through the store's directory
    descriptor. A failed write or fsync is reported to ``on_failure`` (the writer stops for
    good) before it is raised. Not thread-safe: the writer's one task drives it.
    """

    def __init__(
        self,
        durable: Durable,
        dir_fd: int,
        rows: Sequence[Mapping[str, Any]],
        on_failure: Callable[[DurabilityError], None],
    ) -> None:
        self._durable = durable
        self._dir_fd = dir_fd
        self._rows = rows
        self._on_failure = on_failure
        self._fd: int | None = None
        self._staged: dict[int, StagedAttempt] = {}
        self._count = 0

    def _write(self, line: dict[str, Any]) -> None:
        if self._fd is None:
            self._fd = self._durable.open(STAGING, _APPEND | os.O_CREAT, STAGING, self._dir_fd)
        try:
            self._durable.write_all(self._fd, canonical_bytes(line) + b"\n", STAGING)
            self._durable.fsync(self._fd, STAGING)
        except DurabilityError as e:
            self._on_failure(e)
            raise

    def begin(self, attempt: dict[str, Any], *, row: int, next_row: int, session: str) -> int:
        """Stage (and fsync) ``attempt`` of schedule row ``row``; return its staging key.

        Raises:
            RecordInvalidError: ``row`` is committed (before ``next_row``) or not in the
                schedule, or the attempt names another cell than the row's.
            DurabilityError: the write or fsync failed.
        """
        if isinstance(row, bool) or not (next_row <= row < len(self._rows)):
            raise RecordInvalidError(f"staged attempt for row {row!r}, not an uncommitted row")
        mismatch = check_cell(self._rows[row], attempt)
        if mismatch is not None:
            raise RecordInvalidError(f"staged attempt for row {row} {mismatch}")
        key = self._count
        self._count += 1
        self._write(begin_line(key, session, row, attempt))
        self._staged[key] = StagedAttempt(attempt, None, ())
        return key

    def require_open(self, key: int) -> None:
        """Raise ``AttemptStateError`` unless ``key`` is staged and has not ended."""
        entry = self._staged.get(key)
        if entry is None or entry.outcome is not None:
            raise AttemptStateError(f"staged attempt {key} is not open in this writer")

    def end(self, key: int, outcome: dict[str, Any], blobs: tuple[str, ...]) -> None:
        """Stage (and fsync) how attempt ``key`` ended (checked values: the writer's).

        Raises:
            AttemptStateError: ``key`` is not staged, or already ended.
            DurabilityError: the write or fsync failed.
        """
        self.require_open(key)
        self._write(end_line(key, outcome, blobs))
        self._staged[key] = self._staged[key]._replace(outcome=outcome, blobs=blobs)

    def take(self, keys: Sequence[int], journal: Callable[[list[StagedAttempt]], None]) -> None:
        """Hand the ended attempts ``keys``, in that order, to ``journal``, then forget them.

        Raises:
            AttemptStateError: a key is unknown, listed twice (it would be journaled twice) or
                its attempt has not ended (nothing is handed over).
        """
        staged = []
        for position, key in enumerate(keys):
            if key in keys[:position]:
                raise AttemptStateError(f"staged attempt {key} is listed twice")
            entry = self._staged.get(key)
            if entry is None or entry.outcome is None:
                raise AttemptStateError(f"staged attempt {key} is unknown or not ended")
            staged.append(entry)
        if staged:
            journal(staged)
        for key in keys:
            del self._staged[key]

    def left_by_dead_session(
        self,
        *,
        session: str | None,
        next_row: int,
        blobs: Set[str],
        journaled: Sequence[Mapping[str, Any]],
        where: str,
    ) -> list[StagedAttempt] | None:
        """The attempts a dead session's ``staging.log`` holds that the journal lacks (every
        line checked by ``staged_to_journal``), or None when there is no such file.

        Raises:
            TamperError: the file is not a regular file, or a line contradicts the chain.
        """
        try:
            data = read_regular(STAGING, _MAX_STAGING, dir_fd=self._dir_fd, what=STAGING)
        except FileNotFoundError:
            return None
        except UnsafeFileError as e:
            raise TamperError(f"{e} in {where}; the store is refused") from e
        return staged_to_journal(
            data,
            session=session,
            rows=self._rows,
            next_row=next_row,
            blobs=blobs,
            journaled=journaled,
            where=where,
        )

    def remove_file(self) -> None:
        """Remove ``staging.log`` once the journal holds what it had (the directory fsynced)."""
        os.unlink(STAGING, dir_fd=self._dir_fd)
        self._durable.fsync(self._dir_fd, "the store directory")

    def close(self, *, keep: bool) -> None:
        """Close the file; remove it too unless ``keep`` or an attempt is still only staged."""
        if self._fd is None:
            return
        if not keep and not self._staged:
            # Every staged attempt is in the journal now: the staging file holds nothing new.
            with contextlib.suppress(OSError):
                os.unlink(STAGING, dir_fd=self._dir_fd)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None
