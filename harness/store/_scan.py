"""Verification of a run directory: the longest valid prefix and one precise reason.

Every hash is recomputed over the bytes as stored (never over a re-encoding). Checked, in order:
the lock and schedule copies, the blobs, the attempt journal (chain, sequence, attempt order),
the record log (chain, sequence, genesis binding, schedule rows, journal ranges, attempt
bindings, blob references), HEAD, the journal entries not yet bound to a record, and the
manifest when present.

Classification (the protocol: a record is fsynced before HEAD is replaced):

* torn (recoverable): bad bytes after the last record HEAD claims, with no correctly hashed
  line among them; or one complete record HEAD does not yet claim; or bad bytes after the last
  journal entry no record binds.
* tamper: anything else, e.g. HEAD claiming a record that does not verify, a bad record
  followed by a good one, a correctly hashed record that breaks the chain, a corrupt blob.

Two paths, one verdict. The checked path decodes each journal entry and record into its full
Struct and names the precise reason for any fault. An intact store takes the fast path for
journal entries and cell records: it decodes with digest fields as plain strings (pattern checks
cost more than the rest of decoding) and accepts an item only when every such field equals a
digest computed from the stored bytes, so whatever it accepts the checked path accepts too, with
the same state. At the first doubt the checked path takes over from that item on. Every hash is
still recomputed and every blob still read and hashed; only the cost of each check differs.

Reading: every file is opened relative to the store directory's descriptor without following a
link, and must be a regular file of the directory's owner within its size bound before a byte of
it is read; a link, a special file or an oversized file anywhere in the store is tamper
(``UNSAFE_FILE``). The files a writer changes are read in the order that makes a consistent view
(MANIFEST, HEAD, records, journal, then the blob listing); while a live writer holds the lock,
the view ends where HEAD did and the verdict is ``in_progress`` unless the view itself fails.

Scanning never writes. Repairs (cutting a torn tail) are the writer's, under the writer lock.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeAlias

import blake3
import msgspec

from harness.canonical import (
    DIGEST_PREFIX,
    Domain,
    canonical_bytes,
    digest_bytes,
    domain_prefix,
)
from harness.errors import StoreError, StoreNotFoundError, UnsafeFileError
from harness.safeio import READ_FLAGS, check_regular, file_kind, open_dir, read_fd, read_regular
from harness.store._files import (
    BLOBS,
    DIRECTORIES,
    EVIDENCE,
    HEAD,
    JOURNAL,
    LIMITS,
    LOCK_COPY,
    MANIFEST,
    MAX_BLOB,
    RECORDS,
    SCHEDULE_COPY,
    WRITER_LOCK,
    Line,
    LineFault,
    WriterLock,
    blob_names,
    has_valid_line_after,
    is_blob_name,
    iter_lines,
    parse_line,
)
from harness.store._journal import RangeEntry, bind_range, derive_range
from harness.store._model import (
    AttemptRef,
    BeginEntry,
    CellRecord,
    Count,
    EndEntry,
    GenesisRecord,
    Head,
    JournalEntry,
    JournalPos,
    Manifest,
    SessionEntry,
    VerifyCode,
    VerifyReport,
    VerifyStatus,
)

__all__ = ["Fault", "Scan", "expected_manifest", "require_store", "scan"]

Digest = Annotated[str, msgspec.Meta(pattern="^blake3:[0-9a-f]{64}$")]


class _CellView(
    msgspec.Struct,
    tag="cell",
    tag_field="kind",
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
):
    """``CellRecord`` as verification reads it: the row, result and audit stay raw bytes.

    Same fields as ``CellRecord`` (a test pins that). Raw fields are still parsed as JSON, but
    not turned into Python objects, which is most of a record's bytes; the row's raw bytes are
    compared with the schedule's canonical row bytes exactly.
    """

    schema_version: Literal[1] = 1
    seq: Annotated[int, msgspec.Meta(ge=1)]
    prev: Digest
    row_index: Annotated[int, msgspec.Meta(ge=0)]
    row: msgspec.Raw
    row_digest: Digest
    result: msgspec.Raw
    audit: tuple[msgspec.Raw, ...]
    blobs: tuple[Digest, ...]
    journal: JournalPos
    attempts: tuple[AttemptRef, ...]


# --- fast path ----------------------------------------------------------------------------------
#
# Verifying an intact store is the common case. The structs below are the bodies above with every
# digest field a plain string: msgspec checks a pattern per field, which costs more than the rest
# of decoding. The fast path accepts a body only when each such field equals a digest computed
# during this scan (a line hash, a schedule row digest, or a blob hashed from its bytes), and
# those are well-formed, so the pattern holds whenever the fast path accepts. Anything else, or any
# doubt, goes to the checked path (``_entry``, ``_record``): the full decode and checks, which
# name the precise reason. Fast acceptance thus implies checked acceptance with the same state;
# tests pin the field sets.


class _FastPos(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``JournalPos`` with ``head`` unchecked (compared with a computed digest)."""

    count: Count
    head: str | None


class _FastAttempt(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``AttemptRef`` with the hashes unchecked (compared with computed digests)."""

    begin_seq: Count
    begin_hash: str
    end_seq: Count | None
    end_hash: str | None
    orphaned: bool


class _FastCell(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``_CellView`` with the digest fields unchecked (compared with computed digests).

    Not a tagged Struct: decoded on its own, a tagged Struct would accept a body without the tag,
    and inside a union msgspec must look ahead for the tag, which sorts after most fields and
    costs a second parse of the body. ``kind`` is an ordinary required field instead.
    """

    kind: Literal["cell"]
    schema_version: Literal[1] = 1
    seq: Annotated[int, msgspec.Meta(ge=1)]
    prev: str
    row_index: Count
    row: msgspec.Raw
    row_digest: str
    result: msgspec.Raw
    audit: tuple[msgspec.Raw, ...]
    blobs: tuple[str, ...]
    journal: _FastPos
    attempts: tuple[_FastAttempt, ...]


class _FastEntry(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind"
):
    """Base of the journal entries with ``prev`` and blob digests unchecked."""


class _FastSession(_FastEntry, tag="session", frozen=True, kw_only=True):
    """``SessionEntry``, digests unchecked."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: str | None
    records: Annotated[int, msgspec.Meta(ge=1)]


class _FastBegin(_FastEntry, tag="begin", frozen=True, kw_only=True):
    """``BeginEntry``, digests unchecked."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: str | None
    attempt: dict[str, Any]


class _FastEnd(_FastEntry, tag="end", frozen=True, kw_only=True):
    """``EndEntry``, digests unchecked."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: str | None
    begin_seq: Count
    outcome: dict[str, Any]
    blobs: tuple[str, ...]


_ScanCell: TypeAlias = "_CellView | _FastCell"

_BLOB_FIRST_READ: Final = 1 << 16
"""One read takes a whole blob up to this size (raw responses are a few KiB); a blob that fills
it is checked (type, owner, size bound) before the rest is read."""
_RECORD: Final = msgspec.json.Decoder(GenesisRecord | _CellView)
_CELL: Final = msgspec.json.Decoder(CellRecord)
_ENTRY: Final = msgspec.json.Decoder(JournalEntry)
_CELL_FAST: Final = msgspec.json.Decoder(_FastCell)
_ENTRY_FAST: Final = msgspec.json.Decoder(_FastSession | _FastBegin | _FastEnd)
_ROW_SPANS: Final = msgspec.json.Decoder(list[msgspec.Raw])
_astuple: Final = msgspec.structs.astuple
_HEAD: Final = msgspec.json.Decoder(Head)
_MANIFEST: Final = msgspec.json.Decoder(Manifest)
_ROWS: Final = msgspec.json.Decoder(list[dict[str, Any]])

_RECORD_LINE_CODE: Final = {
    "incomplete": VerifyCode.RECORD_MALFORMED,
    "malformed": VerifyCode.RECORD_MALFORMED,
    "hash": VerifyCode.RECORD_HASH_MISMATCH,
}
_JOURNAL_LINE_CODE: Final = {
    "incomplete": VerifyCode.JOURNAL_MALFORMED,
    "malformed": VerifyCode.JOURNAL_MALFORMED,
    "hash": VerifyCode.JOURNAL_HASH_MISMATCH,
}


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
    cells: list[_ScanCell] = field(default_factory=list)
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
    manifest: Manifest | None = None

    @property
    def records(self) -> int:
        """Valid records (genesis included)."""
        return len(self.record_hashes)

    def cell_records(self) -> list[CellRecord]:
        """The verified cells, fully decoded."""
        return [_CELL.decode(body) for body in self.cell_bodies]

    @property
    def pending(self) -> list[RangeEntry]:
        """Valid journal entries no record binds yet."""
        return self.journal[self.bound_journal :]


_OPEN_BRACE: Final = ord("{")


def _is_object(raw: msgspec.Raw) -> bool:
    """True when raw (already valid) JSON is an object: canonical bytes have no leading space."""
    return bytes(memoryview(raw)[:1]) == b"{"


def _short(digest: str | None) -> str:
    return "none" if digest is None else digest[:19] + "..."


class _Scanner:
    """One pass over a run directory; collects the first tamper and the first torn fault."""

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
        self.s = Scan(root=root, report=_EMPTY_REPORT)

    def _tamper(self, code: VerifyCode, reason: str) -> None:
        if self.tamper is None:
            self.tamper = Fault(code, reason)

    def _torn(self, code: VerifyCode, reason: str) -> None:
        if self.torn is None:
            self.torn = Fault(code, reason)

    # --- reading ------------------------------------------------------------------------------

    def _unsafe(self, error: UnsafeFileError) -> None:
        self._tamper(VerifyCode.UNSAFE_FILE, f"{error}; a store holds only its own regular files")

    def _read(self, name: str) -> bytes | None:
        """A top-level store file, read bounded without following links (None when absent)."""
        try:
            return read_regular(name, LIMITS[name], dir_fd=self.dir_fd, owner=self.owner, what=name)
        except FileNotFoundError:
            return None
        except UnsafeFileError as e:
            self._unsafe(e)
            return None

    def entries(self) -> None:
        """Refuse a store holding a link or a special file, at its top level or in a folder.

        Names the store does not know are left alone (they are not evidence), unless they are
        links or special files: nothing in a store directory may point elsewhere.
        """
        with os.scandir(self.dir_fd) as found:
            for entry in found:
                self._entry_type(entry, entry.name)
                if entry.name == EVIDENCE and entry.is_dir(follow_symlinks=False):
                    try:
                        fd = open_dir(EVIDENCE, dir_fd=self.dir_fd, follow=False)
                    except (OSError, UnsafeFileError):
                        continue  # vanished, or swapped meanwhile: the type check named it
                    try:
                        with os.scandir(fd) as inner:
                            for item in inner:
                                self._entry_type(item, f"{EVIDENCE}/{item.name}", folder=True)
                    finally:
                        os.close(fd)

    def _entry_type(self, entry: os.DirEntry[str], where: str, *, folder: bool = False) -> None:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            self._tamper(VerifyCode.UNSAFE_FILE, f"{where} is a symbolic link; refused")
        elif stat.S_ISDIR(mode):
            if folder or entry.name in LIMITS:
                self._tamper(VerifyCode.UNSAFE_FILE, f"{where} is a directory, not a file")
        elif not stat.S_ISREG(mode):
            self._tamper(VerifyCode.UNSAFE_FILE, f"{where} is {file_kind(mode)}; refused")
        elif entry.name in DIRECTORIES and not folder:
            self._tamper(VerifyCode.UNSAFE_FILE, f"{where} is a file, not a directory")

    def snapshot(self) -> None:
        """Read what changes while a writer works, in the order that bounds a consistent view.

        The writer appends a journal entry before the record that binds it, fsyncs a record
        before HEAD claims it, and stores a blob before any entry references it. Reading the
        manifest, HEAD, the record log and the journal in that order (and listing blobs after)
        gives a view in which everything HEAD claims is present with all it binds.
        """
        self.files[MANIFEST] = self._read(MANIFEST)
        head = self._read(HEAD)
        if self.live:
            # A live writer reuses the previous HEAD's file for the next one after an atomic
            # swap: a read that overlaps that rewrite can see a mix. Read again until stable.
            for _ in range(20):
                if head is None or self._head(head) is not None:
                    break
                head = self._read(HEAD)
        self.files[HEAD] = head
        self.files[RECORDS] = self._read(RECORDS)
        self.files[JOURNAL] = self._read(JOURNAL)

    # --- inputs copies ------------------------------------------------------------------------

    def copies(self) -> None:
        lock = self._read(LOCK_COPY)
        if lock is None:
            self.lock_fault = Fault(VerifyCode.LOCK_COPY_MISSING, f"{LOCK_COPY} is missing")
            self._tamper(self.lock_fault.code, self.lock_fault.reason)
        else:
            self.s.lock_digest = digest_bytes(Domain.LOCK, lock)
        schedule = self._read(SCHEDULE_COPY)
        if schedule is None:
            self.schedule_fault = Fault(
                VerifyCode.SCHEDULE_COPY_MISSING, f"{SCHEDULE_COPY} is missing"
            )
        else:
            try:
                rows = _ROWS.decode(schedule)
            except msgspec.DecodeError as e:
                self.schedule_fault = Fault(
                    VerifyCode.SCHEDULE_COPY_MALFORMED, f"{SCHEDULE_COPY} is not a row list: {e}"
                )
            else:
                if not rows:
                    self.schedule_fault = Fault(
                        VerifyCode.SCHEDULE_COPY_MALFORMED, f"{SCHEDULE_COPY} has no rows"
                    )
                elif canonical_bytes(rows) != schedule:
                    self.schedule_fault = Fault(
                        VerifyCode.SCHEDULE_COPY_MALFORMED,
                        f"{SCHEDULE_COPY} is not in canonical form",
                    )
                else:
                    self.s.rows = rows
                    # The schedule is canonical bytes of the row list, so each element's span
                    # is exactly the canonical bytes of that row.
                    self.s.row_bytes = [bytes(span) for span in _ROW_SPANS.decode(schedule)]
                    prefix = domain_prefix(Domain.SCHEDULE_ROW)
                    self.s.row_digests = [
                        DIGEST_PREFIX + blake3.blake3(prefix + data).digest().hex()
                        for data in self.s.row_bytes
                    ]
                    self.s.schedule_digest = digest_bytes(Domain.SCHEDULE, schedule)
        if self.schedule_fault is not None:
            self._tamper(self.schedule_fault.code, self.schedule_fault.reason)

    def blobs(self) -> None:
        try:
            dir_fd = open_dir(BLOBS, dir_fd=self.dir_fd, follow=False)
        except FileNotFoundError:
            return
        except UnsafeFileError as e:
            self._unsafe(e)
            return
        prefix = domain_prefix(Domain.BLOB)
        hasher = blake3.blake3()  # reset per blob: cheaper than a new one
        reset, update, finish = hasher.reset, hasher.update, hasher.digest
        found = self.s.blobs
        try:
            # Thousands of small files: openat and one read each, no path objects, no calls per
            # blob beyond the system calls and the hash. A blob is opened without following a
            # link (a link fails to open) and never blocks (O_NONBLOCK: a FIFO reads as empty).
            # Whatever is not a regular file cannot pass as a blob: it fails to open (a socket),
            # fails to read (a folder), fills the first buffer (a device such as /dev/zero) or
            # does not hash to its name (a FIFO, /dev/null); each of those is then examined
            # with fstat and refused by its type, before anything more is read. A blob that
            # fills the first buffer is checked (type, owner, size bound) before reading on.
            # A folder only its owner can write holds only its owner's (or root's) files, so
            # the owner is checked per file only when others could write the folder.
            folder = os.fstat(dir_fd)
            per_file_owner = folder.st_uid != self.owner or bool(folder.st_mode & 0o022)
            names = os.listdir(dir_fd)
            names.sort()
            every_name_a_blob = len(blob_names(names)) == len(names)
            open_, read, close, flags = os.open, os.read, os.close, READ_FLAGS
            first = _BLOB_FIRST_READ
            for name in names:
                where = f"{BLOBS}/{name[:16]}"
                try:
                    fd = open_(name, flags, dir_fd=dir_fd)
                except FileNotFoundError:
                    continue  # a temp file a live writer renamed meanwhile
                except OSError as e:
                    self._unopenable(where, e)
                    continue
                try:
                    if per_file_owner:
                        check_regular(fd, where, MAX_BLOB, self.owner)
                    data = read(fd, first)
                    if len(data) == first:  # a large blob, or a device
                        data += read_fd(fd, where, MAX_BLOB, self.owner)
                    if not every_name_a_blob and not is_blob_name(name):
                        continue  # temp file of an interrupted put; never referenced
                    # The name is the hex digest of the content (a blob's name is its digest).
                    reset()
                    update(prefix + data)
                    if finish().hex() == name:
                        found.add(DIGEST_PREFIX + name)
                        continue
                    check_regular(fd, where, MAX_BLOB, self.owner)  # names a FIFO or device
                    self._tamper(
                        VerifyCode.BLOB_CORRUPT,
                        f"blob {name[:12]}... does not hash to its name (content changed)",
                    )
                except UnsafeFileError as e:
                    self._unsafe(e)
                except OSError as e:
                    self._unopenable(where, e)
                finally:
                    close(fd)
        finally:
            os.close(dir_fd)

    def _unopenable(self, where: str, error: OSError) -> None:
        if error.errno == errno.ELOOP:
            reason = f"{where} is a symbolic link; refused"
        else:
            reason = f"{where} cannot be read as a file ({error.strerror}); refused"
        self._tamper(VerifyCode.UNSAFE_FILE, reason)

    # --- journal ------------------------------------------------------------------------------

    def journal(self) -> None:
        data = self.files[JOURNAL]
        if data is None:
            self._tamper(VerifyCode.JOURNAL_MISSING, f"{JOURNAL} is missing")
            data = b""
        self.s.journal_size = len(data)
        lines, stop, why = iter_lines(data, 0, Domain.JOURNAL_ENTRY)
        begun: dict[int, int] = {}
        ended: set[int] = set()
        accepted, session = self._accept_entries(lines, begun, ended) if self.fast else (0, -1)
        for index in range(accepted, len(lines)):
            line = lines[index]
            fault = self._entry(index, line, session, begun, ended)
            if fault is not None:
                self._tamper(fault.code, fault.reason)
                self.journal_tail_is_tamper = True
                stop = line.start
                break
            entry = self.s.journal[-1].entry
            if isinstance(entry, SessionEntry):
                session = entry.seq
        else:
            if why is not None:
                if has_valid_line_after(data, stop, Domain.JOURNAL_ENTRY):
                    self._tamper(
                        VerifyCode.JOURNAL_DATA_AFTER_BAD_ENTRY,
                        f"journal entry {len(lines)} at byte {stop} is bad ({why.text}) "
                        "and correctly hashed entries follow it",
                    )
                    self.journal_tail_is_tamper = True
                self.journal_tail_fault = why
        self.journal_valid = len(self.s.journal)
        self.s.journal_end = stop
        if self.journal_valid == 0 and self.tamper is None:
            self._tamper(
                VerifyCode.JOURNAL_SESSION,
                "journal lacks the session entry every store opens with",
            )

    def _accept_entries(
        self, lines: list[Line], begun: dict[int, int], ended: set[int]
    ) -> tuple[int, int]:
        """Accept the leading run of intact entries; return how many, and the current session.

        The fast path of ``_entry``: it accepts an entry only when ``_entry`` would, records the
        same state, and stops at the first doubt, where ``_entry`` takes over and names the
        reason.
        """
        journal = self.s.journal
        append = journal.append
        known_blobs = self.s.blobs
        decode = _ENTRY_FAST.decode
        session = -1
        prev: str | None = None
        for index, line in enumerate(lines):
            try:
                view = decode(line.body)
            except msgspec.DecodeError:
                return index, session
            # prev equal to a line digest computed here (or None) is a well-formed digest.
            if view.seq != index or view.prev != prev:
                return index, session
            entry: JournalEntry
            if type(view) is _FastEnd:
                blobs = view.blobs
                if (
                    begun.get(view.begin_seq) != session
                    or view.begin_seq in ended
                    or (len(blobs) > 1 and list(blobs) != sorted(set(blobs)))
                    or not known_blobs.issuperset(blobs)  # hashed here: well-formed
                ):
                    return index, session
                ended.add(view.begin_seq)
                entry = EndEntry(
                    seq=index,
                    prev=prev,
                    begin_seq=view.begin_seq,
                    outcome=view.outcome,
                    blobs=blobs,
                )
            elif type(view) is _FastBegin:
                if index == 0:
                    return index, session
                begun[index] = session
                entry = BeginEntry(seq=index, prev=prev, attempt=view.attempt)
            else:
                assert type(view) is _FastSession
                session = index
                entry = SessionEntry(seq=index, prev=prev, records=view.records)
            prev = line.digest
            append(RangeEntry(prev, entry))
        return len(lines), session

    def _entry(
        self, index: int, line: Line, session: int, begun: dict[int, int], ended: set[int]
    ) -> Fault | None:
        where = f"journal entry {index}"
        try:
            entry = _ENTRY.decode(line.body)
        except msgspec.DecodeError as e:
            return Fault(VerifyCode.JOURNAL_BODY_INVALID, f"{where}: {e}")
        if entry.seq != index:
            return Fault(VerifyCode.JOURNAL_SEQ, f"{where} carries sequence number {entry.seq}")
        prev = self.s.journal[-1].digest if self.s.journal else None
        if entry.prev != prev:
            return Fault(
                VerifyCode.JOURNAL_PREV,
                f"{where} links to {_short(entry.prev)}, expected {_short(prev)}",
            )
        if index == 0 and not isinstance(entry, SessionEntry):
            return Fault(VerifyCode.JOURNAL_SESSION, "journal does not open with a session entry")
        if isinstance(entry, BeginEntry):
            begun[entry.seq] = session
        elif isinstance(entry, EndEntry):
            if begun.get(entry.begin_seq) != session or entry.begin_seq in ended:
                return Fault(
                    VerifyCode.JOURNAL_ATTEMPT,
                    f"{where} ends attempt {entry.begin_seq}, which this writer session "
                    "did not begin or already ended",
                )
            if list(entry.blobs) != sorted(set(entry.blobs)):
                return Fault(VerifyCode.JOURNAL_BODY_INVALID, f"{where}: blobs not sorted unique")
            for blob in entry.blobs:
                if blob not in self.s.blobs:
                    return Fault(
                        VerifyCode.JOURNAL_BLOBS,
                        f"{where} references blob {_short(blob)}, which is missing or corrupt",
                    )
            ended.add(entry.begin_seq)
        self.s.journal.append(RangeEntry(line.digest, entry))
        return None

    # --- records ------------------------------------------------------------------------------

    def records(self) -> tuple[bytes, Fault | None, LineFault | None]:
        data = self.files[RECORDS]
        if data is None:
            self._tamper(VerifyCode.RECORDS_MISSING, f"{RECORDS} is missing")
            data = b""
        lines, stop, why = iter_lines(data, 0, Domain.STORE_RECORD)
        head = self._head(self.files[HEAD])
        if self.live and head is not None and 0 < head.count < len(lines):
            # A live writer appends past what HEAD claimed when this read began: the snapshot
            # ends where HEAD said (records after it are checked by the next read).
            lines = lines[: head.count]
            stop, why = lines[-1].end, None
            data = data[:stop]
        self.s.records_size = len(data)
        for index in range(self._accept_records(lines) if self.fast else 0, len(lines)):
            line = lines[index]
            fault = self._record(index, line)
            if fault is not None:
                self.s.records_end = line.start
                return data, fault, None
            self.s.record_hashes.append(line.digest)
            self.s.record_starts.append(line.start)
        self.s.records_end = stop
        return data, None, why

    def _accept_records(self, lines: list[Line]) -> int:
        """Accept the leading run of intact records; return how many.

        The fast path of ``_record``: genesis goes through ``_record`` itself; a cell record is
        accepted only when ``_record`` would accept it, with the same state, and the first doubt
        stops the run, where ``_record`` takes over and names the reason.
        """
        s = self.s
        if not lines or self._record(0, lines[0]) is not None:
            return 0
        s.record_hashes.append(lines[0].digest)
        s.record_starts.append(lines[0].start)
        decode = _CELL_FAST.decode
        rows, row_bytes, row_digests = len(s.rows), s.row_bytes, s.row_digests
        for index in range(1, len(lines)):
            line = lines[index]
            body = line.body
            try:
                record = decode(body)
            except msgspec.DecodeError:
                return index
            row = index - 1
            # Each digest field must equal a digest computed here, which makes it well-formed.
            if (
                record.seq != index
                or record.prev != s.record_hashes[-1]
                or record.row_index != row
                or row >= rows
                or record.row_digest != row_digests[row]
                or bytes(record.row) != row_bytes[row]
                or memoryview(record.result)[0] != _OPEN_BRACE  # valid JSON: an object
                or any(memoryview(item)[0] != _OPEN_BRACE for item in record.audit)
                or not self._binds_fast(record)
            ):
                return index
            s.cells.append(record)
            s.cell_bodies.append(body)
            s.bound_journal = record.journal.count
            s.record_hashes.append(line.digest)
            s.record_starts.append(line.start)
        return len(lines)

    def _binds_fast(self, record: _FastCell) -> bool:
        """True when ``record`` binds its journal range as ``_journal_binding`` requires."""
        pos = record.journal
        count = pos.count
        start = self.s.bound_journal
        journal = self.s.journal
        if not start <= count <= self.journal_valid:
            return False
        # head equal to a line digest computed here (or None) is a well-formed digest.
        if pos.head != (journal[count - 1].digest if count else None):
            return False
        entries = journal[start:count]
        for item in entries:
            if type(item.entry) is SessionEntry and item.entry.records != record.seq:
                return False
        derived = derive_range(entries)
        if isinstance(derived, str):
            return False
        attempts, end_blobs, open_current = derived
        # Hashes equal to journal line digests are well-formed digests.
        if open_current or attempts != list(map(_astuple, record.attempts)):
            return False
        blobs = record.blobs
        if len(blobs) > 1 and list(blobs) != sorted(set(blobs)):
            return False
        return end_blobs.issubset(blobs) and self.s.blobs.issuperset(blobs)

    def _record(self, index: int, line: Line) -> Fault | None:
        where = f"record {index} (byte {line.start})"
        try:
            record = _RECORD.decode(line.body)
        except msgspec.DecodeError as e:
            return Fault(VerifyCode.RECORD_BODY_INVALID, f"{where}: {e}")
        if isinstance(record, GenesisRecord) and index != 0:
            return Fault(VerifyCode.RECORD_KIND, f"{where} is a second genesis record")
        if isinstance(record, _CellView) and index == 0:
            return Fault(VerifyCode.RECORD_KIND, f"{where} is not a genesis record")
        if record.seq != index:
            return Fault(VerifyCode.RECORD_SEQ, f"{where} carries sequence number {record.seq}")
        prev = self.s.record_hashes[-1] if self.s.record_hashes else None
        if record.prev != prev:
            return Fault(
                VerifyCode.RECORD_PREV,
                f"{where} links to {_short(record.prev)}, expected {_short(prev)}",
            )
        if isinstance(record, GenesisRecord):
            return self._genesis(where, record)
        return self._cell(where, record, line.body)

    def _genesis(self, where: str, record: GenesisRecord) -> Fault | None:
        if self.lock_fault is not None:
            return self.lock_fault
        if record.lock_digest != self.s.lock_digest:
            return Fault(
                VerifyCode.LOCK_COPY_MISMATCH,
                f"{LOCK_COPY} hashes to {_short(self.s.lock_digest)}, "
                f"genesis binds {_short(record.lock_digest)}",
            )
        if self.schedule_fault is not None:
            return self.schedule_fault
        if record.schedule_digest != self.s.schedule_digest or record.schedule_rows != len(
            self.s.rows
        ):
            return Fault(
                VerifyCode.SCHEDULE_COPY_MISMATCH,
                f"{SCHEDULE_COPY} ({len(self.s.rows)} rows, {_short(self.s.schedule_digest)}) "
                f"is not the schedule genesis binds ({record.schedule_rows} rows, "
                f"{_short(record.schedule_digest)})",
            )
        self.s.genesis = record
        return None

    def _cell(self, where: str, record: _CellView, body: bytes) -> Fault | None:
        if record.row_index != record.seq - 1:
            return Fault(
                VerifyCode.ROW_INDEX,
                f"{where} holds schedule row {record.row_index}; the next row is {record.seq - 1}",
            )
        if record.row_index >= len(self.s.rows):
            return Fault(
                VerifyCode.ROW_OUT_OF_RANGE,
                f"{where} holds row {record.row_index}; the schedule has {len(self.s.rows)} rows",
            )
        if (
            record.row_digest != self.s.row_digests[record.row_index]
            or bytes(record.row) != self.s.row_bytes[record.row_index]
        ):
            return Fault(
                VerifyCode.ROW_MISMATCH,
                f"{where}: its row differs from schedule row {record.row_index}",
            )
        if not _is_object(record.result) or not all(_is_object(item) for item in record.audit):
            return Fault(
                VerifyCode.RECORD_BODY_INVALID,
                f"{where}: its result and every audit entry must be JSON objects",
            )
        fault = self._journal_binding(where, record)
        if fault is not None:
            return fault
        self.s.cells.append(record)
        self.s.cell_bodies.append(body)
        self.s.bound_journal = record.journal.count
        return None

    def _journal_binding(self, where: str, record: _CellView) -> Fault | None:
        pos = record.journal
        start = self.s.bound_journal
        if pos.count < start:
            return Fault(
                VerifyCode.RECORD_JOURNAL,
                f"{where} binds journal count {pos.count}, before the previous record's {start}",
            )
        if pos.count > self.journal_valid:
            fault = self.journal_tail_fault
            if fault is not None:
                # The journal entry itself is the precise reason; the record only claims it.
                return Fault(
                    _JOURNAL_LINE_CODE[fault.kind],
                    f"journal entry {self.journal_valid} (byte {self.s.journal_end}): "
                    f"{fault.text}; {where} binds it",
                )
            return Fault(
                VerifyCode.RECORD_JOURNAL,
                f"{where} binds {pos.count} journal entries; only {self.journal_valid} verify",
            )
        head = self.s.journal[pos.count - 1].digest if pos.count else None
        if pos.head != head:
            return Fault(
                VerifyCode.RECORD_JOURNAL,
                f"{where} binds journal head {_short(pos.head)}, the journal has {_short(head)}",
            )
        entries = self.s.journal[start : pos.count]
        for item in entries:
            if isinstance(item.entry, SessionEntry) and item.entry.records != record.seq:
                return Fault(
                    VerifyCode.RECORD_JOURNAL,
                    f"{where}: session entry {item.entry.seq} says {item.entry.records} records "
                    f"preceded it, but {record.seq} do",
                )
        binding = bind_range(entries)
        if isinstance(binding, str):
            return Fault(VerifyCode.RECORD_JOURNAL, f"{where}: {binding}")
        if binding.open_current:
            return Fault(
                VerifyCode.RECORD_ATTEMPTS,
                f"{where} was committed with attempt {binding.open_current[0]} still open",
            )
        if binding.attempts != record.attempts:
            return Fault(
                VerifyCode.RECORD_ATTEMPTS,
                f"{where} binds {len(record.attempts)} attempts; its journal range holds "
                f"{len(binding.attempts)} (or they differ)",
            )
        if list(record.blobs) != sorted(set(record.blobs)):
            return Fault(VerifyCode.RECORD_BLOBS, f"{where}: blobs are not sorted and unique")
        missing = binding.end_blobs.difference(record.blobs)
        if missing:
            return Fault(
                VerifyCode.RECORD_BLOBS,
                f"{where} omits blob {_short(min(missing))} its attempts reference",
            )
        for blob in record.blobs:
            if blob not in self.s.blobs:
                return Fault(
                    VerifyCode.RECORD_BLOBS,
                    f"{where} references blob {_short(blob)}, which is missing or corrupt",
                )
        return None

    # --- HEAD and classification --------------------------------------------------------------

    @staticmethod
    def _head(data: bytes | None) -> Head | None:
        """HEAD decoded, or None when absent or not a valid HEAD line."""
        if data is None:
            return None
        line = parse_line(data, 0, Domain.STORE_HEAD)
        if isinstance(line, LineFault) or line.end != len(data):
            return None
        try:
            return _HEAD.decode(line.body)
        except msgspec.DecodeError:
            return None

    def read_head(self) -> Head | Fault:
        data = self.files[HEAD]
        if data is None:
            return Fault(VerifyCode.HEAD_MISSING, f"{HEAD} is missing")
        line = parse_line(data, 0, Domain.STORE_HEAD)
        if isinstance(line, LineFault) or line.end != len(data):
            text = line.text if isinstance(line, LineFault) else "extra bytes after the line"
            return Fault(VerifyCode.HEAD_MALFORMED, f"{HEAD}: {text}")
        try:
            return _HEAD.decode(line.body)
        except msgspec.DecodeError as e:
            return Fault(VerifyCode.HEAD_MALFORMED, f"{HEAD}: {e}")

    def classify(self, data: bytes, semantic: Fault | None, why: LineFault | None) -> None:
        n = self.s.records
        pos = self.s.records_end
        hashes = self.s.record_hashes
        head = self.read_head()
        if isinstance(head, Head):
            self.head = head
        if semantic is not None:
            self._tamper(semantic.code, semantic.reason)
            return
        if isinstance(head, Fault):
            self._tamper(head.code, head.reason)
            return
        claimed = head.count
        if why is not None:
            where = f"record {n} (byte {pos})"
            if claimed > n:
                self._tamper(
                    _RECORD_LINE_CODE[why.kind],
                    f"{where}: {why.text}; {HEAD} claims {claimed} records",
                )
            elif has_valid_line_after(data, pos, Domain.STORE_RECORD):
                self._tamper(
                    VerifyCode.DATA_AFTER_BAD_RECORD,
                    f"{where}: {why.text}, and correctly hashed records follow it",
                )
            elif claimed == n and n > 0 and head.head == hashes[-1]:
                self._torn(
                    VerifyCode.RECORDS_TORN_TAIL,
                    f"{where}: {why.text}; {len(data) - pos} bytes {HEAD} does not claim "
                    "(torn final append, recoverable)",
                )
            elif claimed == n:
                self._tamper(
                    VerifyCode.HEAD_HASH_MISMATCH,
                    f"{HEAD} names {_short(head.head)} as record {n - 1}",
                )
            else:
                self._tamper(
                    VerifyCode.HEAD_BEHIND,
                    f"{HEAD} claims {claimed} records; {n} verify before a bad tail",
                )
            return
        if claimed > n:
            self._tamper(
                VerifyCode.HEAD_AHEAD,
                f"{HEAD} claims {claimed} records; the log holds {n} (records removed)",
            )
        elif claimed == n:
            if head.head != hashes[-1]:
                self._tamper(
                    VerifyCode.HEAD_HASH_MISMATCH,
                    f"{HEAD} names {_short(head.head)} as record {n - 1}, "
                    f"which hashes to {_short(hashes[-1])}",
                )
        elif claimed == n - 1:
            if head.head != hashes[-2]:
                self._tamper(
                    VerifyCode.HEAD_HASH_MISMATCH,
                    f"{HEAD} names {_short(head.head)} as record {n - 2}",
                )
            else:
                self.s.head_lags = True
                self._torn(
                    VerifyCode.HEAD_LAGS,
                    f"record {n - 1} is complete but {HEAD} still claims {claimed} "
                    "(crash between record fsync and HEAD replace, recoverable)",
                )
        else:
            self._tamper(VerifyCode.HEAD_BEHIND, f"{HEAD} claims {claimed} records; {n} verify")

    def pending(self) -> None:
        n = self.s.records
        entries = self.s.pending
        for item in entries:
            if isinstance(item.entry, SessionEntry) and item.entry.records != n:
                self._tamper(
                    VerifyCode.JOURNAL_SESSION,
                    f"journal entry {item.entry.seq} says {item.entry.records} records "
                    f"preceded it, but the log holds {n}",
                )
                return
        binding = bind_range(entries)
        if isinstance(binding, str):
            self._tamper(VerifyCode.JOURNAL_ATTEMPT, binding)
            return
        if self.journal_tail_fault is not None and not self.journal_tail_is_tamper:
            self._torn(
                VerifyCode.JOURNAL_TORN_TAIL,
                f"journal entry {self.journal_valid} (byte {self.s.journal_end}): "
                f"{self.journal_tail_fault.text}; no record binds it (torn append, recoverable)",
            )

    def manifest(self) -> None:
        data = self.files[MANIFEST]
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
            self._tamper(code, f"{MANIFEST}: {text}")
            return
        try:
            manifest = _MANIFEST.decode(line.body)
        except msgspec.DecodeError as e:
            self._tamper(VerifyCode.MANIFEST_MALFORMED, f"{MANIFEST}: {e}")
            return
        if self.tamper is not None:
            return
        if self.torn is not None:
            self._tamper(
                VerifyCode.FINALIZED_TAIL,
                f"store is finalized, yet: {self.torn.reason}",
            )
            return
        expected = expected_manifest(self.s)
        if expected is None:
            self._tamper(VerifyCode.MANIFEST_MISMATCH, f"{MANIFEST} seals an incomplete store")
            return
        for name in Manifest.__struct_fields__:
            if getattr(manifest, name) != getattr(expected, name):
                self._tamper(
                    VerifyCode.MANIFEST_MISMATCH,
                    f"{MANIFEST} pins {name}={getattr(manifest, name)!r}; "
                    f"the store has {getattr(expected, name)!r}",
                )
                return
        self.s.manifest = manifest
        self.manifest_digest = line.digest

    def report(self, writer: str | None) -> VerifyReport:
        s = self.s
        cells = max(s.records - 1, 0)
        if self.tamper is not None:
            status, fault = VerifyStatus.TAMPER, self.tamper
        elif writer is not None:
            # A crash state seen while a writer works is that writer's append in flight.
            status, fault = (
                VerifyStatus.IN_PROGRESS,
                Fault(
                    VerifyCode.IN_PROGRESS,
                    f"held by a live writer ({writer}); {s.records} records ({cells} cells) "
                    "verified up to what HEAD had committed when the read began",
                ),
            )
        elif self.torn is not None:
            status, fault = VerifyStatus.TORN, self.torn
        elif self.manifest_digest is None:
            status, fault = (
                VerifyStatus.OK,
                Fault(
                    VerifyCode.NOT_FINALIZED,
                    f"{s.records} records ({cells} cells) verified; not finalized (no "
                    f"{MANIFEST}): nothing pins this store's end",
                ),
            )
        else:
            status, fault = (
                VerifyStatus.OK,
                Fault(VerifyCode.OK, f"{s.records} records ({cells} cells) verified, finalized"),
            )
        genesis = s.genesis
        return VerifyReport(
            status=status,
            code=fault.code,
            reason=fault.reason,
            records=s.records,
            cells=cells,
            head=s.record_hashes[-1] if s.record_hashes else None,
            head_claimed=None if self.head is None else self.head.count,
            torn_bytes=s.records_size - s.records_end,
            journal_entries=self.journal_valid,
            journal_torn_bytes=s.journal_size - s.journal_end,
            pending_attempts=sum(1 for item in s.pending if isinstance(item.entry, BeginEntry)),
            lock_digest=None if genesis is None else genesis.lock_digest,
            schedule_digest=None if genesis is None else genesis.schedule_digest,
            schedule_rows=0 if genesis is None else genesis.schedule_rows,
            manifest_digest=self.manifest_digest if status is VerifyStatus.OK else None,
            writer=writer,
        )


_EMPTY_REPORT: Final = VerifyReport(
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


def expected_manifest(s: Scan) -> Manifest | None:
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
    return Manifest(
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


def require_store(root: Path) -> None:
    """Raise unless ``root`` is a directory holding a store (checked before taking any lock).

    Raises:
        StoreNotFoundError: ``root`` is missing, not a directory, or holds no store files.
    """
    if not root.is_dir():
        raise StoreNotFoundError(f"no store at {root}")
    if not any(os.path.lexists(root / name) for name in (RECORDS, HEAD)):
        raise StoreNotFoundError(f"{root} is not a run store (no {RECORDS} and no {HEAD})")


def scan(root: Path, *, fast: bool = True, held: bool = False) -> Scan:
    """Verify the run directory ``root``; never writes.

    Every file is opened relative to the store directory's descriptor without following a
    link, checked to be a regular file owned by the directory's owner and within its size
    bound, and only then read. While a writer holds the store, the view is bounded by what
    HEAD had committed when the read began and the verdict is ``in progress`` unless that
    view itself fails (tamper).

    Args:
        root: the run directory.
        fast: accept intact journal entries and cell records on the fast path (see above);
            False runs every entry and record through the checked path alone, the reference
            the fast path must agree with exactly.
        held: the caller holds the writer lock (resume, finalize): no writer can be at work,
            and a crash state is reported as such for the caller to repair.

    Raises:
        StoreNotFoundError: ``root`` is not a directory holding a store.
        StoreError: a store file cannot be read (permissions, I/O error).
    """
    root = Path(root)
    require_store(root)
    try:
        dir_fd = open_dir(root, follow=True)
    except (OSError, UnsafeFileError) as e:
        raise StoreNotFoundError(f"no store at {root}: {e}") from e
    try:
        owner = os.fstat(dir_fd).st_uid
        writer = None if held else WriterLock.holder(Path(WRITER_LOCK), dir_fd=dir_fd)
        found = _scan_once(root, dir_fd, owner, writer, fast)
        if not held and writer is None and found.report.status is not VerifyStatus.OK:
            # A writer that started during the read may have changed what was read: if one
            # holds the store now, read again as a live store.
            writer = WriterLock.holder(Path(WRITER_LOCK), dir_fd=dir_fd)
            if writer is not None:
                found = _scan_once(root, dir_fd, owner, writer, fast)
        return found
    finally:
        os.close(dir_fd)


def _scan_once(root: Path, dir_fd: int, owner: int, writer: str | None, fast: bool) -> Scan:
    scanner = _Scanner(root, dir_fd, owner, live=writer is not None, fast=fast)
    try:
        scanner.entries()
        scanner.snapshot()
        scanner.copies()
        scanner.blobs()
        scanner.journal()
        data, semantic, why = scanner.records()
        scanner.classify(data, semantic, why)
        scanner.pending()
        scanner.manifest()
    except OSError as e:
        where = e.filename or root
        raise StoreError(f"cannot read store {root}: {where}: {e.strerror or e}") from e
    scanner.s.report = scanner.report(writer)
    return scanner.s
