"""The report manifest both studies write beside their report files: the partial-report mark.

``report-manifest.json`` names each report file's digest (``study.report-table.v1``), whether
the store was partial (not finalized) when the report was made, whether it is a pilot, and the
store the report was computed from (the study's own identity of it, which holds ``cells``).
From it, and only from it:

- ``report_made_at`` tells at how many cells a stored report was made, so a replay whose store
  has grown since says "report is stale (made at N cells)" instead of comparing tables;
- ``remove_partial_report`` removes a report written while the store was partial, when a
  resume makes it stale.

The human files keep their own banner of a partial store; this is the machine-readable mark.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final, Generic, TypeVar

import msgspec

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import UnsafeFileError
from harness.safeio import MAX_READ, read_regular

__all__ = [
    "REPORT_MANIFEST",
    "ReportManifest",
    "decode_report_manifest",
    "remove_partial_report",
    "report_made_at",
    "with_manifest",
]

REPORT_MANIFEST: Final = "report-manifest.json"

StoreT = TypeVar("StoreT")


class ReportManifest(
    msgspec.Struct, Generic[StoreT], frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """``report-manifest.json``: each report file's digest and the partial-report mark.

    ``schema`` names the study's manifest (``harness.v2-report-manifest.v1``,
    ``harness.static-report-manifest.v1``); ``store`` is the study's identity of the store the
    report was computed from, and holds its ``cells``.
    """

    schema: str
    partial: bool = False
    pilot: bool = False
    store: StoreT
    files: dict[str, str]


def with_manifest(
    files: Mapping[str, bytes], *, schema: str, partial: bool, pilot: bool, store: object
) -> dict[str, bytes]:
    """``files`` and, last, their manifest (indented canonical JSON, final newline)."""
    manifest = ReportManifest(
        schema=schema,
        partial=partial,
        pilot=pilot,
        store=store,
        files={name: digest_bytes(Domain.REPORT_TABLE, data) for name, data in files.items()},
    )
    encoded = msgspec.json.format(canonical_bytes(manifest), indent=2) + b"\n"
    return {**files, REPORT_MANIFEST: encoded}


def decode_report_manifest(
    data: bytes, store: type[StoreT], schema: str, error: type[Exception], what: str
) -> ReportManifest[StoreT]:
    """Decode a study's report manifest (its ``schema`` and store identity type ``store``).

    Raises:
        error: ``"<what> is not a <schema>: ..."``: not JSON, not that schema or shape.
    """
    try:
        manifest: ReportManifest[StoreT] = msgspec.json.decode(
            data,
            type=ReportManifest[store],  # type: ignore[valid-type]
        )
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise error(f"{what} is not a {schema}: {e}") from e
    if manifest.schema != schema:
        raise error(f"{what} is not a {schema}: it is a {manifest.schema}")
    return manifest


class _Cells(msgspec.Struct, frozen=True):
    cells: int


class _Mark(msgspec.Struct, frozen=True, kw_only=True):
    """What every study's manifest says about partial data (the rest is the study's)."""

    partial: bool = False
    store: _Cells


def _mark(report_dir: Path) -> _Mark | None:
    """The partial-report mark of the report in ``report_dir`` (None: no readable manifest)."""
    path = report_dir / REPORT_MANIFEST
    try:
        return msgspec.json.decode(read_regular(path, MAX_READ, what=str(path)), type=_Mark)
    except (OSError, UnsafeFileError, msgspec.ValidationError, msgspec.DecodeError):
        return None  # no manifest, or none to trust: no mark (a replay then compares tables)


def report_made_at(report_dir: Path, cells: int) -> int | None:
    """The cells the report in ``report_dir`` was made at, when that is not ``cells`` (the
    store's count now): the report is stale. None when it is current or has no manifest."""
    mark = _mark(report_dir)
    if mark is None or mark.store.cells == cells:
        return None
    return mark.store.cells


def remove_partial_report(report_dir: Path, names: Iterable[str]) -> int | None:
    """Remove a report written while its store was partial (a resume makes it stale): the
    report files ``names``, the manifest and the folder if that leaves it empty. Return the
    cells it was made at, or None when there is no partial report (nothing is removed)."""
    mark = _mark(report_dir)
    if mark is None or not mark.partial:
        return None
    for name in (*names, REPORT_MANIFEST):
        (report_dir / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        report_dir.rmdir()
    return mark.store.cells
