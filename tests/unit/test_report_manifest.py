"""``harness.studies.report_manifest``: the one report manifest of both studies and its
partial-report mark (stale at N cells, removed on resume)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from harness.canonical import Domain, digest_bytes
from harness.errors import StudyReportError
from harness.studies.report_manifest import (
    REPORT_MANIFEST,
    decode_report_manifest,
    remove_partial_report,
    report_made_at,
    with_manifest,
)


class _Store(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    cells: int
    head: str


def _write(directory: Path, *, partial: bool, cells: int) -> dict[str, bytes]:
    files = with_manifest(
        {"a.md": b"A", "b.csv": b"B"},
        schema="test.report-manifest.v1",
        partial=partial,
        pilot=False,
        store=_Store(cells=cells, head="h"),
    )
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


def test_the_manifest_comes_last_and_digests_every_file(tmp_path: Path) -> None:
    files = _write(tmp_path / "r", partial=True, cells=7)
    assert list(files) == ["a.md", "b.csv", REPORT_MANIFEST]
    document = json.loads(files[REPORT_MANIFEST])
    assert document == {
        "schema": "test.report-manifest.v1",
        "partial": True,
        "pilot": False,
        "store": {"cells": 7, "head": "h"},
        "files": {
            "a.md": digest_bytes(Domain.REPORT_TABLE, b"A"),
            "b.csv": digest_bytes(Domain.REPORT_TABLE, b"B"),
        },
    }
    assert files[REPORT_MANIFEST].endswith(b"}\n")
    decoded = decode_report_manifest(
        files[REPORT_MANIFEST], _Store, "test.report-manifest.v1", StudyReportError, "m"
    )
    assert decoded.store == _Store(cells=7, head="h")


def test_a_manifest_of_another_schema_or_shape_is_refused(tmp_path: Path) -> None:
    files = _write(tmp_path / "r", partial=False, cells=7)
    with pytest.raises(StudyReportError, match=r"^m is not a other\.v1: it is a test\."):
        decode_report_manifest(files[REPORT_MANIFEST], _Store, "other.v1", StudyReportError, "m")
    with pytest.raises(StudyReportError, match=r"^m is not a test\.report-manifest\.v1: "):
        decode_report_manifest(
            b'{"schema": 1}', _Store, "test.report-manifest.v1", StudyReportError, "m"
        )


def test_a_report_is_stale_when_the_store_holds_other_cells(tmp_path: Path) -> None:
    _write(tmp_path / "r", partial=True, cells=7)
    assert report_made_at(tmp_path / "r", 7) is None
    assert report_made_at(tmp_path / "r", 9) == 7
    assert report_made_at(tmp_path / "none", 9) is None  # no report: nothing to call stale
    (tmp_path / "r" / REPORT_MANIFEST).write_bytes(b"not json")
    assert report_made_at(tmp_path / "r", 9) is None


def test_only_a_partial_report_is_removed(tmp_path: Path) -> None:
    _write(tmp_path / "done", partial=False, cells=9)
    assert remove_partial_report(tmp_path / "done", ["a.md", "b.csv"]) is None
    assert sorted(p.name for p in (tmp_path / "done").iterdir()) == [
        "a.md",
        "b.csv",
        REPORT_MANIFEST,
    ]
    _write(tmp_path / "partial", partial=True, cells=7)
    (tmp_path / "partial" / "notes.txt").write_bytes(b"the user's own file")
    assert remove_partial_report(tmp_path / "partial", ["a.md", "b.csv"]) == 7
    assert [p.name for p in (tmp_path / "partial").iterdir()] == ["notes.txt"]  # kept


def test_a_linked_manifest_is_no_mark(tmp_path: Path) -> None:
    _write(tmp_path / "r", partial=True, cells=7)
    (tmp_path / "r" / REPORT_MANIFEST).rename(tmp_path / "elsewhere.json")
    (tmp_path / "r" / REPORT_MANIFEST).symlink_to(tmp_path / "elsewhere.json")
    assert report_made_at(tmp_path / "r", 9) is None
    assert remove_partial_report(tmp_path / "r", ["a.md", "b.csv"]) is None
    assert (tmp_path / "r" / "a.md").exists()
