"""Verification of the manifest: the final seal must pin exactly the store as verified."""

from __future__ import annotations

from typing import Final

import msgspec

from harness.canonical import Domain
from harness.store._files import MANIFEST, LineFault, parse_line
from harness.store._model import BeginEntry, EndEntry, JournalPos, StoreManifest, VerifyCode
from harness.store.scan.state import Pass, Scan

__all__ = ["check_store_manifest", "expected_manifest"]

_MANIFEST: Final = msgspec.json.Decoder(StoreManifest)


def check_store_manifest(p: Pass) -> None:
    """A present manifest must parse, and seal a store with no fault and every count it pins."""
    data = p.files[MANIFEST]
    if data is None:
        return
    line = parse_line(data, 0, Domain.STORE_MANIFEST)
    if isinstance(line, LineFault) or line.end != len(data):
        code = (
            VerifyCode.MANIFEST_HASH_MISMATCH
            if isinstance(line, LineFault) and line.kind == "hash"
            else VerifyCode.MANIFEST_MALFORMED
        )
        text = line.text if isinstance(line, LineFault) else "extra bytes after the line"
        p.found_tamper(code, f"{MANIFEST}: {text}")
        return
    try:
        manifest = _MANIFEST.decode(line.body)
    except msgspec.DecodeError as e:
        p.found_tamper(VerifyCode.MANIFEST_MALFORMED, f"{MANIFEST}: {e}")
        return
    if p.tamper is not None:
        return
    if p.torn is not None:
        p.found_tamper(VerifyCode.FINALIZED_TAIL, f"store is finalized, yet: {p.torn.reason}")
        return
    expected = expected_manifest(p.s)
    if expected is None:
        p.found_tamper(VerifyCode.MANIFEST_MISMATCH, f"{MANIFEST} seals an incomplete store")
        return
    for name in StoreManifest.__struct_fields__:
        if getattr(manifest, name) != getattr(expected, name):
            p.found_tamper(
                VerifyCode.MANIFEST_MISMATCH,
                f"{MANIFEST} pins {name}={getattr(manifest, name)!r}; "
                f"the store has {getattr(expected, name)!r}",
            )
            return
    p.s.manifest = manifest
    p.s.manifest_bytes = data
    p.manifest_digest = line.digest


def expected_manifest(s: Scan) -> StoreManifest | None:
    """The manifest that seals ``s`` as it stands, or None when genesis does not verify."""
    if s.genesis is None or not s.record_hashes:
        return None
    pending = [item for item in s.pending if isinstance(item.entry, BeginEntry)]
    journal = JournalPos(count=len(s.journal), head=s.journal[-1].digest if s.journal else None)
    referenced: set[str] = set()
    for cell in s.cells:
        referenced.update(cell.blobs)
    for item in s.pending:
        if isinstance(item.entry, EndEntry):
            referenced.update(item.entry.blobs)
    return StoreManifest(
        lock_digest=s.genesis.lock_digest,
        schedule_digest=s.genesis.schedule_digest,
        schedule_rows=s.genesis.schedule_rows,
        records=s.records,
        cells=len(s.cells),
        audit_groups=len(s.cells),
        head=s.record_hashes[-1],
        journal=journal,
        attempts=sum(len(cell.attempts) for cell in s.cells),
        orphaned_attempts=sum(
            1 for cell in s.cells for attempt in cell.attempts if attempt.orphaned
        ),
        unbound_attempts=tuple(item.entry.seq for item in pending),
        blobs=len(referenced),
    )
