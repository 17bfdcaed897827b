"""Staged attempts on resume: journaled exactly once, and checked against the chain first.

Real store, real files, real fsync. A writer stages attempts (``stage_begin``/``stage_end``, as a
run at ``--max-cells`` > 1 does), commits some cells (``commit_staged``) and dies; resume must
journal as orphaned only the attempts of cells that were not committed and that the journal
lacks (a commit or a migration cut short by a crash left them there already), and refuse a
``staging.log`` that contradicts the chain (another session, another cell, a committed row the
journal lacks, an outcome of another request, an unknown blob, a broken line). ``audit`` then
finds every attempt once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.audit import audit_store
from harness.canonical import canonical_bytes
from harness.errors import AttemptStateError, DurabilityError, RecordInvalidError, TamperError
from harness.store import BeginEntry, FileOps, RunStore, read_store

_LOCK = b"lock"
_HASH = "blake3:" + "0" * 64


def _rows(count: int) -> list[dict[str, Any]]:
    return [{"index": i, "cell_id": f"cell-{i}"} for i in range(count)]


def _attempt(cell: str, index: int = 0) -> dict[str, Any]:
    return {"cell_id": cell, "attempt_index": index, "request_hash": _HASH}


def _outcome(cell: str, index: int = 0) -> dict[str, Any]:
    return {**_attempt(cell, index), "status": "succeeded"}


def _stage(writer: RunStore, row: int, index: int = 0, *, end: bool = True) -> int:
    cell = f"cell-{row}"
    key = writer.stage_begin(_attempt(cell, index), row=row)
    if end:
        writer.stage_end(key, _outcome(cell, index))
    return key


def _begun(store: Path) -> list[dict[str, Any]]:
    return [e.attempt for e in read_store(store).journal if isinstance(e, BeginEntry)]


def _dead_session(store: Path) -> None:
    """Rows 0 and 1 committed from staging, row 2 staged and in flight, row 3 staged."""
    writer = RunStore.create(store, _LOCK, _rows(4))
    k0, k1 = _stage(writer, 0), _stage(writer, 1)
    k2 = _stage(writer, 2, end=False)
    k3 = _stage(writer, 3)
    writer.commit_staged(0, {"cell": 0}, [], [k0])
    writer.commit_staged(1, {"cell": 1}, [], [k1])
    assert (k2, k3) == (2, 3)
    writer.close()  # dies: rows 2 and 3 uncommitted, their attempts only in staging.log


def test_resume_journals_only_the_uncommitted_cells_attempts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _dead_session(store)
    resumed = RunStore.open_for_resume(store, _LOCK, _rows(4))
    assert resumed.next_row_index == 2
    assert [o.attempt["cell_id"] for o in resumed.orphaned_attempts] == ["cell-2", "cell-3"]
    assert [o.outcome is None for o in resumed.orphaned_attempts] == [True, False]
    resumed.writer.commit_cell(2, {"cell": 2}, [])
    resumed.writer.close()
    cells = [a["cell_id"] for a in _begun(store)]
    assert cells == ["cell-0", "cell-1", "cell-2", "cell-3"]  # each once
    report = audit_store(store)
    assert report.journaled_attempts == 4
    assert not any("twice" in p for p in report.problems)


class _FailRecords(FileOps):
    """Fails the write of a cell record: the crash between journal and record."""

    def write(self, fd: int, data: bytes) -> int:
        if b'"row_index"' in data:
            raise OSError(5, "Input/output error")
        return super().write(fd, data)


def test_a_commit_cut_before_its_record_is_not_journaled_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    writer = RunStore.create(store, _LOCK, _rows(3), ops=_FailRecords())
    key = _stage(writer, 0)
    with pytest.raises(DurabilityError):
        writer.commit_staged(0, {"cell": 0}, [], [key])  # journaled, record lost
    writer.close()
    resumed = RunStore.open_for_resume(store, _LOCK, _rows(3))
    assert resumed.next_row_index == 0
    assert len(resumed.orphaned_attempts) == 1  # the journaled copy, not a second one
    resumed.writer.commit_cell(0, {"cell": 0}, [])
    resumed.writer.close()
    assert [a["cell_id"] for a in _begun(store)] == ["cell-0"]


def test_a_migration_cut_before_the_session_entry_is_not_repeated(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _dead_session(store)
    kept = (store / "staging.log").read_bytes()
    RunStore.open_for_resume(store, _LOCK, _rows(4)).writer.close()
    # The crash between the migration's fsync and the new session entry: the staging file is
    # back and the session entry is not.
    lines = (store / "journal.log").read_bytes().splitlines(keepends=True)
    (store / "journal.log").write_bytes(b"".join(lines[:-1]))
    (store / "staging.log").write_bytes(kept)
    RunStore.open_for_resume(store, _LOCK, _rows(4)).writer.close()
    assert [a["cell_id"] for a in _begun(store)] == ["cell-0", "cell-1", "cell-2", "cell-3"]


def _forge(store: Path, edit: Any) -> None:
    """Replace staging.log with ``edit`` applied to its parsed lines."""
    path = store / "staging.log"
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    path.write_bytes(b"".join(canonical_bytes(line) + b"\n" for line in edit(lines)))


def _set(index: int, **fields: Any) -> Any:
    def edit(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        lines[index] = {**lines[index], **fields}
        return lines

    return edit


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_set(0, session="blake3:" + "9" * 64), "was not staged by the store's last session"),
        (_set(4, row=3), "is for cell 'cell-2', but its row holds cell 'cell-3'"),
        (_set(4, row=99), "names row 99"),
        (_set(4, begin=7), "begins attempt 7"),
        (
            lambda lines: [*lines, {**lines[0], "begin": 4}],
            "stages attempt 4 of committed row 0, which the journal does not hold",
        ),
        (
            _set(
                6,
                outcome={**_outcome("cell-3"), "request_hash": "blake3:" + "1" * 64},
            ),
            "its outcome's request_hash differs",
        ),
        (_set(6, blobs=["blake3:" + "2" * 64]), "lists a blob the store does not hold"),
        (_set(6, end=9), "ends attempt 9, which is not open"),
        (lambda lines: [*lines, lines[6]], "ends attempt 3, which is not open"),
        (lambda lines: [*lines[:2], {"note": 1}, *lines[2:]], "neither a begin nor an end"),
        (
            lambda lines: [{"attempt": lines[0]["attempt"], "begin": 0}, *lines[1:]],
            "was staged by an earlier harness version",
        ),
    ],
)
def test_a_forged_staging_log_is_refused(tmp_path: Path, edit: Any, why: str) -> None:
    store = tmp_path / "store"
    _dead_session(store)
    _forge(store, edit)
    before = (store / "journal.log").read_bytes()
    with pytest.raises(TamperError, match=r"staging\.log") as caught:
        RunStore.open_for_resume(store, _LOCK, _rows(4))
    assert why in str(caught.value)
    assert (store / "journal.log").read_bytes() == before  # nothing was bound


def test_a_broken_line_inside_is_refused_but_a_torn_last_line_is_a_crash(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _dead_session(store)
    saved = tmp_path / "saved"
    shutil.copytree(store, saved)
    path = store / "staging.log"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], b'{"begin": 1, "ses\n', *lines[2:]]))
    with pytest.raises(TamperError, match=r"line 2 .* is not JSON"):
        RunStore.open_for_resume(store, _LOCK, _rows(4))
    torn = saved / "staging.log"
    torn.write_bytes(torn.read_bytes()[:-7])  # the last end line, cut mid-write
    resumed = RunStore.open_for_resume(saved, _LOCK, _rows(4))
    assert [o.outcome is None for o in resumed.orphaned_attempts] == [True, True]
    resumed.writer.close()


def test_staging_refuses_a_committed_row_or_another_cell(tmp_path: Path) -> None:
    writer = RunStore.create(tmp_path / "store", _LOCK, _rows(3))
    key = _stage(writer, 0)
    writer.commit_staged(0, {"cell": 0}, [], [key])
    with pytest.raises(RecordInvalidError, match="not an uncommitted row"):
        writer.stage_begin(_attempt("cell-0"), row=0)
    with pytest.raises(RecordInvalidError, match="is for cell 'cell-2'"):
        writer.stage_begin(_attempt("cell-2"), row=1)
    writer.close()


def test_a_key_listed_twice_or_unended_is_refused_before_anything_is_journaled(
    tmp_path: Path,
) -> None:
    writer = RunStore.create(tmp_path / "store", _LOCK, _rows(2))
    key = _stage(writer, 0)
    open_key = _stage(writer, 0, 1, end=False)
    with pytest.raises(AttemptStateError, match=f"staged attempt {key} is listed twice"):
        writer.commit_staged(0, {"cell": 0}, [], [key, key])
    with pytest.raises(AttemptStateError, match=f"staged attempt {open_key} is unknown or not"):
        writer.commit_staged(0, {"cell": 0}, [], [key, open_key])
    assert _begun(tmp_path / "store") == []  # nothing was journaled
    writer.stage_end(open_key, _outcome("cell-0", 1))
    writer.commit_staged(0, {"cell": 0}, [], [key, open_key])  # still whole: commits once
    assert _begun(tmp_path / "store") == [_attempt("cell-0"), _attempt("cell-0", 1)]
    writer.close()
