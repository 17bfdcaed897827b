"""Finalize: seal a complete store with a manifest whose own digest the user keeps elsewhere.

A hash chain alone cannot reveal a removed tail; the manifest pins the head hash and every
count, and its digest, printed once, lets anyone check later that nothing was cut or added.
Finalizing twice returns the same digest. This module writes only ``MANIFEST``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from harness.canonical import Domain, canonical_bytes
from harness.errors import FinalizeError, TamperError
from harness.log import get_logger
from harness.store._files import (
    MANIFEST,
    MANIFEST_TMP,
    WRITER_LOCK,
    Durable,
    FileOps,
    WriterLock,
    encode_line,
)
from harness.store._model import VerifyStatus
from harness.store.scan import expected_manifest, require_store, scan

__all__ = ["finalize_store"]

_log: Final = get_logger("harness.store")


def finalize_store(
    root: str | os.PathLike[str], expected_cells: int | None = None, *, ops: FileOps | None = None
) -> str:
    """Validate every cell and audit group, write the manifest, and return its digest.

    Args:
        root: the run directory.
        expected_cells: the number of cells the study expects (e.g. 576); None accepts the
            bound schedule's length. Either way every schedule row must be committed.
        ops: file operations (tests inject failures here).

    Returns:
        The manifest's own digest ``blake3:<hex>`` (``Domain.STORE_MANIFEST``).

    Raises:
        StoreNotFoundError: no store at ``root``.
        WriterLockedError: a writer holds the store.
        TamperError: verification found something no crash explains.
        FinalizeError: cells are missing, the count differs, or a crash state awaits resume.
        DurabilityError: writing the manifest failed.
    """
    root = Path(root)
    require_store(root)
    lock = WriterLock.acquire(root / WRITER_LOCK, root)
    try:
        found = scan(root, held=True)
        report = found.report
        if report.status is VerifyStatus.TAMPER:
            raise TamperError(
                f"store {root} fails verification ({report.code}): {report.reason}; "
                "it cannot be finalized"
            )
        pilot = None if found.genesis is None else found.genesis.identity.get("pilot")
        if expected_cells is not None and pilot is not None:
            raise FinalizeError(
                f"store {root} is a pilot ({report.schedule_rows} rows of a subset run): it "
                "is never finalized as the study; `v2 run` and `v2 resume` seal it as a pilot "
                "(without --expected-cells)"
            )
        if report.manifest_digest is not None:
            _log.info("store.already_finalized", store=str(root), manifest=report.manifest_digest)
            return report.manifest_digest
        if report.status is VerifyStatus.TORN:
            raise FinalizeError(
                f"store {root} is in a crash state ({report.code}: {report.reason}); "
                "resume it before finalizing"
            )
        manifest = expected_manifest(found)
        if manifest is None:  # an ok report always has a verified genesis
            raise TamperError(f"store {root} has no verified genesis record")
        if expected_cells is not None and expected_cells != manifest.schedule_rows:
            raise FinalizeError(
                f"expected {expected_cells} cells, but store {root} is bound to a schedule of "
                f"{manifest.schedule_rows} rows"
            )
        if manifest.cells != manifest.schedule_rows:
            raise FinalizeError(
                f"store {root} holds {manifest.cells} of {manifest.schedule_rows} cells; "
                f"continue it with its study's resume (`harness v2 resume {root}` or `harness "
                f"static resume {root}`), which finalizes it when complete"
            )
        line, digest = encode_line(Domain.STORE_MANIFEST, canonical_bytes(manifest))
        Durable(ops or FileOps()).replace(root / MANIFEST, root / MANIFEST_TMP, line)
    finally:
        lock.release()
    _log.info(
        "store.finalize",
        store=str(root),
        cells=manifest.cells,
        attempts=manifest.attempts,
        orphaned=manifest.orphaned_attempts,
        unbound=len(manifest.unbound_attempts),
        manifest=digest,
    )
    return digest
