"""The state of one verification pass: what it read, what it verified, the first faults found.

Each concern of verification (``scan.inputs``, ``scan.blobs``, ``scan.journal``,
``scan.records``, ``scan.manifest``) reads and extends one ``Pass``; ``scan.verify`` runs them in
order (``scan.verify``) and turns the pass into a ``VerifyReport``. A pass never writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.errors import UnsafeFileError
from harness.safeio import read_regular
from harness.store._files import LIMITS, LineFault
from harness.store._journal import RangeEntry
from harness.store._model import (
    CellRecord,
    GenesisRecord,
    Head,
    StoreManifest,
    VerifyCode,
    VerifyReport,
    VerifyStatus,
)
from harness.store.scan.views import CellView

__all__ = ["EMPTY_REPORT", "Fault", "Pass", "Scan", "short"]

_CELL: Final = msgspec.json.Decoder(CellRecord)


@dataclass(frozen=True)
class Fault:
    """A reason code and one line saying where and why."""

    code: VerifyCode
    reason: str


@dataclass
class Scan:
    """Everything verification learned; the writer and finalize reuse it under the lock."""

    root: Path
    report: VerifyReport
    lock_digest: str | None = None
    schedule_digest: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    row_bytes: list[bytes] = field(default_factory=list)
    row_digests: list[str] = field(default_factory=list)
    genesis: GenesisRecord | None = None
    cells: list[CellView] = field(default_factory=list)
    cell_bodies: list[bytes] = field(default_factory=list)
    record_hashes: list[str] = field(default_factory=list)
    record_starts: list[int] = field(default_factory=list)
    records_end: int = 0
    records_size: int = 0
    journal: list[RangeEntry] = field(default_factory=list)
    journal_end: int = 0
    journal_size: int = 0
    bound_journal: int = 0
    blobs: set[str] = field(default_factory=set)
    head_lags: bool = False
    manifest: StoreManifest | None = None
    manifest_bytes: bytes | None = None
    """The MANIFEST bytes ``manifest`` was verified from (the one read a signature covers)."""

    @property
    def records(self) -> int:
        """Valid records (genesis included)."""
        return len(self.record_hashes)

    def cell_records(self) -> list[CellRecord]:
        """The verified cells, decoded into the record type."""
        decode = _CELL.decode
        return [decode(body) for body in self.cell_bodies]

    @property
    def pending(self) -> list[RangeEntry]:
        """Valid journal entries no record binds yet."""
        return self.journal[self.bound_journal :]


EMPTY_REPORT = VerifyReport(
    status=VerifyStatus.TAMPER,
    code=VerifyCode.RECORDS_MISSING,
    reason="not scanned",
    records=0,
    cells=0,
    head=None,
    head_claimed=None,
    torn_bytes=0,
    journal_entries=0,
    journal_torn_bytes=0,
    pending_attempts=0,
    lock_digest=None,
    schedule_digest=None,
    schedule_rows=0,
    manifest_digest=None,
    writer=None,
)


def short(digest: str | None) -> str:
    """A digest shortened for a reason line."""
    return "none" if digest is None else digest[:19] + "..."


class Pass:
    """One pass over a run directory; keeps the first tamper and the first torn fault.

    ``fast`` lets an intact journal entry or cell record skip its decode into the model type
    (see ``scan.records``); False decodes every one, the reference the fast path must equal.
    """

    def __init__(self, root: Path, dir_fd: int, owner: int, *, live: bool, fast: bool) -> None:
        self.root = root
        self.dir_fd = dir_fd
        self.owner = owner
        self.live = live
        self.fast = fast
        self.files: dict[str, bytes | None] = {}
        self.tamper: Fault | None = None
        self.torn: Fault | None = None
        self.lock_fault: Fault | None = None
        self.schedule_fault: Fault | None = None
        self.journal_valid = 0
        self.journal_tail_fault: LineFault | None = None
        self.journal_tail_is_tamper = False
        self.head: Head | None = None
        self.manifest_digest: str | None = None
        self.s = Scan(root=root, report=EMPTY_REPORT)

    def found_tamper(self, code: VerifyCode, reason: str) -> None:
        """Keep the first tamper fault."""
        if self.tamper is None:
            self.tamper = Fault(code, reason)

    def found_torn(self, code: VerifyCode, reason: str) -> None:
        """Keep the first torn (recoverable) fault."""
        if self.torn is None:
            self.torn = Fault(code, reason)

    def unsafe(self, error: UnsafeFileError) -> None:
        """A link, special, foreign or oversized file where a store file belongs."""
        self.found_tamper(
            VerifyCode.UNSAFE_FILE, f"{error}; a store holds only its own regular files"
        )

    def read(self, name: str) -> bytes | None:
        """A top-level store file, read bounded without following links (None when absent)."""
        try:
            return read_regular(name, LIMITS[name], dir_fd=self.dir_fd, owner=self.owner, what=name)
        except FileNotFoundError:
            return None
        except UnsafeFileError as e:
            self.unsafe(e)
            return None
