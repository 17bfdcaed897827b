"""Run directory layout, the line format, durable file operations and the single-writer lock.

Layout of a run directory::

    records.log    one record per line: ``<BLAKE3 hex> <canonical JSON body>``
    HEAD           one line in the same format: record count and last record hash
    journal.log    provider-attempt journal, same line format (write-ahead)
    blobs/<hex>    content-addressed raw provider responses
    study.lock     byte copy of the study lock
    schedule.json  canonical bytes of the schedule (a JSON array of row objects)
    MANIFEST       the final seal, same line format (written by finalize)
    MANIFEST.sig   optional SSH signature of MANIFEST (``harness store sign``); not hashed
    writer.lock    the exclusive writer lock; names its holder; not part of the evidence
    evidence/      torn tails cut on resume, kept aside

Nothing in a store is followed: every file is opened without following a link and must be a
regular file of the store directory's owner within its size bound (``LIMITS``); a file opened
to be written must have no other hard link (a write would change a file outside the store).

Every write the writer makes goes through ``FileOps``, the seam where tests inject a failing
fsync, a short write or ENOSPC. Failures are translated into ``DurabilityError`` subclasses and
never retried: after a failed fsync the page cache may claim data the disk does not hold.

This module knows nothing of what a record means; see ``_model`` and ``scan``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple

import blake3
import msgspec

from harness.canonical import DIGEST_PREFIX, Domain, digest_bytes, domain_prefix
from harness.errors import (
    DurabilityError,
    FsyncError,
    KeyInStoreError,
    NoSpaceError,
    ShortWriteError,
    StoreError,
    TamperError,
    UnsafeFileError,
    WriterLockedError,
)
from harness.safeio import READ_FLAGS, check_regular

__all__ = [
    "BLOBS",
    "DIRECTORIES",
    "EVIDENCE",
    "HEAD",
    "HEAD_TMP",
    "JOURNAL",
    "LIMITS",
    "LOCK_COPY",
    "MANIFEST",
    "MANIFEST_SIG",
    "MAX_BLOB",
    "MAX_LOG",
    "MAX_SMALL",
    "MANIFEST_TMP",
    "partial_prefix",
    "RECORDS",
    "SCHEDULE_COPY",
    "WRITER_LOCK",
    "Durable",
    "FileOps",
    "Line",
    "WriterLock",
    "blob_name",
    "blob_names",
    "LineFault",
    "encode_line",
    "has_valid_line_after",
    "is_blob_name",
    "iter_lines",
    "parse_line",
]

RECORDS: Final = "records.log"
HEAD: Final = "HEAD"
HEAD_TMP: Final = "HEAD.tmp"
JOURNAL: Final = "journal.log"
BLOBS: Final = "blobs"
LOCK_COPY: Final = "study.lock"
SCHEDULE_COPY: Final = "schedule.json"
MANIFEST: Final = "MANIFEST"
MANIFEST_TMP: Final = "MANIFEST.tmp"
WRITER_LOCK: Final = "writer.lock"


def partial_prefix(name: str) -> str:
    """The name prefix of the private directory a store named ``name`` is created in.

    The directory is renamed to ``name`` in one step once genesis and HEAD are durable; a
    create cut short leaves it behind (the next create of ``name`` clears it).
    """
    return f".{name}.partial-"


EVIDENCE: Final = "evidence"
MANIFEST_SIG: Final = "MANIFEST.sig"

# Size bounds, checked with fstat before a byte is read (a hostile store may hold /dev/zero,
# a FIFO or a sparse multi-GB file under any of these names). Generous: the 576-cell study
# writes about 3 MB of records, 2 MB of journal and blobs of a few KiB.
MAX_LOG: Final = 1 << 30
MAX_BLOB: Final = 64 << 20
MAX_SMALL: Final = 1 << 16
LIMITS: Final = {
    RECORDS: MAX_LOG,
    JOURNAL: MAX_LOG,
    HEAD: MAX_SMALL,
    HEAD_TMP: MAX_SMALL,
    MANIFEST: MAX_SMALL,
    MANIFEST_TMP: MAX_SMALL,
    MANIFEST_SIG: MAX_SMALL,
    WRITER_LOCK: MAX_SMALL,
    LOCK_COPY: 64 << 20,
    SCHEDULE_COPY: 256 << 20,
}
"""Every regular file a store directory may hold at its top level, with its size bound."""
DIRECTORIES: Final = frozenset({BLOBS, EVIDENCE})
"""Every directory a store directory may hold at its top level."""

_HEX_LEN: Final = 64
_HEX: Final = re.compile(rb"[0-9a-f]{64}")
_LINE_START: Final = re.compile(rb"(?=[0-9a-f]{64} )")
_BLOB_NAME: Final = re.compile(r"[0-9a-f]{64}")
_HEX_RUN: Final = re.compile(r"[0-9a-f]*")
_NO_FOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_LOCK_FLAGS: Final = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LOCK_TRIES: Final = 50
_LOCK_PAUSE_S: Final = 0.005


# --- line format ------------------------------------------------------------------------------


def encode_line(domain: Domain, body: bytes) -> tuple[bytes, str]:
    """Return the stored line for ``body`` and its digest ``blake3:<hex>``."""
    digest = digest_bytes(domain, body)
    return digest[len(DIGEST_PREFIX) :].encode("ascii") + b" " + body + b"\n", digest


class Line(msgspec.Struct, frozen=True, gc=False):
    """A complete, hash-verified line: byte range in the file, digest and body bytes.

    A Struct rather than a NamedTuple: a store has thousands of lines, and a Struct is several
    times cheaper to construct. It holds no containers, so it needs no cycle tracking.
    """

    start: int
    end: int
    digest: str
    body: bytes


class LineFault(NamedTuple):
    """Why the bytes at an offset are not a valid line.

    ``kind`` is ``incomplete`` (no newline before the end), ``malformed`` (not
    ``<64 hex> <body>``) or ``hash`` (the stored hash does not match the body).
    """

    kind: str
    text: str


def parse_line(data: bytes, pos: int, domain: Domain) -> Line | LineFault:
    """Parse the line starting at ``pos``; return it, or why it is not a valid line.

    The digest is recomputed over the stored body bytes exactly as found (no re-encoding).
    """
    newline = data.find(b"\n", pos)
    if newline < 0:
        return LineFault("incomplete", f"{len(data) - pos} bytes without a final newline")
    if newline - pos < _HEX_LEN + 2 or data[pos + _HEX_LEN] != 0x20:
        return LineFault("malformed", "line is not `<64 hex> <body>`")
    hex_part = data[pos : pos + _HEX_LEN]
    body = data[pos + _HEX_LEN + 1 : newline]
    digest = digest_bytes(domain, body)
    if digest[len(DIGEST_PREFIX) :].encode("ascii") == hex_part:
        return Line(pos, newline + 1, digest, body)  # equal to a hex digest: well-formed too
    if _HEX.fullmatch(hex_part) is None:
        return LineFault("malformed", "line does not start with 64 lowercase hex digits")
    return LineFault(
        "hash", f"stored hash {hex_part[:12].decode()}... does not match the body's BLAKE3"
    )


def iter_lines(data: bytes, pos: int, domain: Domain) -> tuple[list[Line], int, LineFault | None]:
    """Parse hash-valid lines from ``pos`` until the first invalid one.

    Same result as calling ``parse_line`` line after line; the loop inlines its accepting path
    (a store holds thousands of lines) and leaves every doubtful line to ``parse_line``.

    Returns:
        The valid lines, the offset where parsing stopped, and why (None at end of data).
    """
    prefix = domain_prefix(domain)
    # One hasher reset per line: cheaper than constructing one (same digest as digest_bytes).
    hasher = blake3.blake3()
    reset, update, finish = hasher.reset, hasher.update, hasher.digest
    find, startswith = data.find, data.startswith
    lines: list[Line] = []
    append = lines.append
    size = len(data)
    while pos < size:
        newline = find(b"\n", pos)
        # A missing newline makes the length negative: parse_line says why.
        if newline - pos >= _HEX_LEN + 2 and data[pos + _HEX_LEN] == 0x20:
            body = data[pos + _HEX_LEN + 1 : newline]
            reset()
            update(prefix + body)
            hex_digest = finish().hex()
            # Stored hex equal to the recomputed digest (lowercase hex): a valid line.
            if startswith(hex_digest.encode("ascii"), pos):
                append(Line(pos, newline + 1, DIGEST_PREFIX + hex_digest, body))
                pos = newline + 1
                continue
        parsed = parse_line(data, pos, domain)
        if isinstance(parsed, LineFault):
            return lines, pos, parsed
        append(parsed)
        pos = parsed.end
    return lines, pos, None


def has_valid_line_after(data: bytes, pos: int, domain: Domain) -> bool:
    """True when a complete, correctly hashed line starts anywhere at or after ``pos``.

    A crash during one append leaves a prefix, zeros, garbage or reordered blocks of that one
    line, starting where the valid data ends; it never leaves a correctly hashed complete line
    behind bad bytes. Finding one means the bad bytes sit inside data, which no crash explains.
    Every offset where ``<64 hex> `` occurs is tried, so a line glued to garbage is found too.
    """
    for match in _LINE_START.finditer(data, pos):
        if isinstance(parse_line(data, match.start(), domain), Line):
            return True
    return False


def blob_name(digest: str) -> str:
    """File name of a blob in ``blobs/``: the hex part of its digest."""
    return digest[len(DIGEST_PREFIX) :]


def is_blob_name(name: str) -> bool:
    """True for a well-formed blob file name (64 lowercase hex)."""
    return _BLOB_NAME.fullmatch(name) is not None


def blob_names(names: list[str]) -> list[str]:
    """The well-formed blob names among ``names``, in their order.

    When every name is 64 characters long and all of them together are lowercase hex, every
    one is a blob name: one check over the whole directory instead of one per file.
    """
    if set(map(len, names)) <= {_HEX_LEN} and _HEX_RUN.fullmatch("".join(names)):
        return names
    return [name for name in names if is_blob_name(name)]


# --- durable writes ---------------------------------------------------------------------------


def _load_exchange() -> Callable[[bytes, bytes], int] | None:
    """The platform's atomic name swap, or None (then HEAD is replaced by a plain rename)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        renameat2 = libc.renameat2
        renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
        renameat2.argtypes += [ctypes.c_uint]
        renameat2.restype = ctypes.c_int
        at_fdcwd, rename_exchange = -100, 2
        return lambda src, dst: int(renameat2(at_fdcwd, src, at_fdcwd, dst, rename_exchange))
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        renamex_np = libc.renamex_np
        renamex_np.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        renamex_np.restype = ctypes.c_int
        rename_swap = 2
        return lambda src, dst: int(renamex_np(src, dst, rename_swap))
    return None


_EXCHANGE: Final = _load_exchange()
_NO_EXCHANGE: Final = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV})


class FileOps:
    """The system calls the writer makes. Subclass to inject failures in tests."""

    def exchange(self, src: Path, dst: Path) -> bool:
        """Atomically swap two existing names; False when the platform or file system cannot.

        Linux ``renameat2(RENAME_EXCHANGE)``, macOS ``renamex_np(RENAME_SWAP)``.

        Raises:
            OSError: the swap failed for another reason.
        """
        if _EXCHANGE is None:
            return False
        if _EXCHANGE(os.fsencode(src), os.fsencode(dst)) == 0:
            return True
        code = ctypes.get_errno()
        if code in _NO_EXCHANGE:
            return False
        raise OSError(code, os.strerror(code), str(src))

    def open(
        self, path: Path | str, flags: int, mode: int = 0o644, dir_fd: int | None = None
    ) -> int:
        """``os.open`` (relative to ``dir_fd`` when given)."""
        return os.open(path, flags, mode, dir_fd=dir_fd)

    def write(self, fd: int, data: bytes) -> int:
        """``os.write``: one call, the count the kernel accepted."""
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        """``os.fsync``."""
        os.fsync(fd)

    def rename(self, src: Path | str, dst: Path | str, dir_fd: int | None = None) -> None:
        """``os.rename`` (both names relative to ``dir_fd`` when given)."""
        os.rename(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def truncate(self, fd: int, length: int) -> None:
        """``os.ftruncate``."""
        os.ftruncate(fd, length)

    def close(self, fd: int) -> None:
        """``os.close``."""
        os.close(fd)


class Durable:
    """Durable-write helpers over a ``FileOps``; every failure becomes a ``DurabilityError``."""

    def __init__(self, ops: FileOps) -> None:
        self.ops = ops
        self.swap = True  # cleared once the file system refuses an atomic name swap
        # Set by a run that holds an API key (``RunStore.refuse``): bytes holding it are
        # never written.
        self.refuse: Callable[[bytes], bool] | None = None

    @staticmethod
    def _failure(e: OSError, action: str, what: str) -> DurabilityError:
        detail = e.strerror or str(e)
        if e.errno == errno.ENOSPC:
            return NoSpaceError(
                f"no space left while {action} {what}: {detail}; the writer stops, committed "
                "cells are kept: free space, then resume the store"
            )
        if action == "fsyncing":
            return FsyncError(f"fsync of {what} failed: {detail}; the writer stops (not retried)")
        return DurabilityError(f"{action} {what} failed: {detail}; the writer stops")

    def open(self, path: Path | str, flags: int, what: str, dir_fd: int | None = None) -> int:
        """Open ``path`` without following a link at its last component; failure is a
        DurabilityError. A planted link, and a regular file with another hard link (writing it
        would change a file outside the store), are refused as tamper."""
        try:
            fd = self.ops.open(path, flags | _NO_FOLLOW, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise TamperError(f"{what} is a symbolic link; the store is refused") from e
            raise self._failure(e, "opening", what) from e
        try:
            st = os.fstat(fd)
        except OSError as e:
            self.ops.close(fd)
            raise self._failure(e, "opening", what) from e
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            self.ops.close(fd)
            raise TamperError(
                f"{what} has {st.st_nlink} hard links; the store is refused (a write would "
                "change a file outside it)"
            )
        return fd

    def append_note(self, name: str, data: bytes, dir_fd: int) -> None:
        """Append ``data`` to the regular file ``name`` of the directory ``dir_fd`` (created when
        missing), not fsynced: a note beside the evidence, never part of it (``run.log``).

        Raises:
            TamperError: ``name`` is a link, hard-linked, or not a regular file.
            DurabilityError: the open or the write failed.
        """
        fd = self.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, name, dir_fd)
        try:
            try:
                check_regular(fd, name, None)
            except UnsafeFileError as e:
                raise TamperError(f"{e}; the store is refused") from e
            self.write_all(fd, data, name)
        finally:
            self.close(fd)

    def write_all(self, fd: int, data: bytes, what: str) -> None:
        """Write ``data`` with one call; a short write or error stops the writer, and so do
        bytes the ``refuse`` check finds the run's key in (nothing of them is written)."""
        self.check(data, what)
        try:
            written = self.ops.write(fd, data)
        except OSError as e:
            raise self._failure(e, "writing", what) from e
        if written != len(data):
            raise ShortWriteError(
                f"short write to {what}: {written} of {len(data)} bytes (disk full?); the "
                "writer stops, committed cells are kept: free space, then resume the store"
            )

    def check(self, data: bytes, what: str) -> None:
        """Raise ``KeyInStoreError`` when the ``refuse`` check finds the run's key in ``data``."""
        if self.refuse is not None and self.refuse(data):
            raise KeyInStoreError(
                f"the run's API key was about to be written to {what}; nothing of it was "
                "written and the writer stops (a stored field escaped redaction)"
            )

    def fsync(self, fd: int, what: str) -> None:
        """fsync ``fd``; failure is an FsyncError, never retried."""
        try:
            self.ops.fsync(fd)
        except OSError as e:
            raise self._failure(e, "fsyncing", what) from e

    def fsync_dir(self, path: Path) -> None:
        """fsync a directory so a created, renamed or removed entry is durable."""
        # Only fsynced, never written through: a directory the user named may be a link.
        try:
            fd = self.ops.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise self._failure(e, "opening", f"directory {path.name}") from e
        try:
            self.fsync(fd, f"directory {path.name}")
        finally:
            self.close(fd)

    def close(self, fd: int) -> None:
        """Close ``fd``; failure is a DurabilityError (close can report deferred write errors)."""
        try:
            self.ops.close(fd)
        except OSError as e:
            raise self._failure(e, "closing", "a store file") from e

    def rename(self, src: Path | str, dst: Path | str, dir_fd: int | None = None) -> None:
        """Rename ``src`` over ``dst`` (both relative to ``dir_fd`` when given)."""
        try:
            self.ops.rename(src, dst, dir_fd=dir_fd)
        except OSError as e:
            names = f"{os.path.basename(src)} to {os.path.basename(dst)}"
            raise self._failure(e, "renaming", names) from e

    def truncate(self, fd: int, length: int, what: str) -> None:
        """Cut a file to ``length`` bytes."""
        try:
            self.ops.truncate(fd, length)
        except OSError as e:
            raise self._failure(e, "truncating", what) from e

    def write_new(self, path: Path, data: bytes) -> None:
        """Create ``path`` with ``data`` and fsync it (the caller fsyncs the directory)."""
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, path.name)
        try:
            self.write_all(fd, data, path.name)
            self.fsync(fd, path.name)
        finally:
            self.close(fd)

    def replace(self, path: Path, tmp: Path, data: bytes, dir_fd: int | None = None) -> None:
        """Atomically replace ``path``: write temp, fsync, rename, fsync the directory.

        When ``path`` exists and the platform can swap names atomically, the temp file is kept
        between calls and swapped with ``path`` instead of renamed over it: creating a new
        inode for every commit costs more than the fsyncs on common file systems. The swap
        leaves the previous content under the temp name, which nothing reads. Either way the
        new content is fsynced before its name changes, and the directory after.

        ``dir_fd``, when given, is an open descriptor of the directory (saves reopening it).
        """
        swap = self.swap and path.exists()
        flags = os.O_WRONLY | os.O_CREAT | (0 if swap else os.O_TRUNC)
        fd = self.open(tmp, flags, tmp.name)
        try:
            self.write_all(fd, data, tmp.name)
            if swap:
                self.truncate(fd, len(data), tmp.name)
            self.fsync(fd, tmp.name)
        finally:
            self.close(fd)
        swapped = False
        if swap:
            try:
                swapped = self.ops.exchange(tmp, path)
            except OSError as e:
                raise self._failure(e, "swapping", f"{tmp.name} and {path.name}") from e
            self.swap = swapped
        if not swapped:
            self.rename(tmp, path)
        if dir_fd is None:
            self.fsync_dir(path.parent)
        else:
            self.fsync(dir_fd, f"directory {path.parent.name}")


# --- single-writer lock -----------------------------------------------------------------------


class WriterLock:
    """An exclusive ``flock`` on ``writer.lock``; the kernel drops it when the holder dies.

    The file names the holder (pid and host) so a refused writer can say who holds the store.
    The file is not evidence: it is never hashed and never exported.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, path: Path, store: Path) -> WriterLock:
        """Take the lock or raise.

        The lock file is opened without following a symbolic link and must be a regular file
        owned by the store directory's owner: a planted link cannot make the writer create or
        truncate a file outside the store. A reader checking for a writer holds a shared lock
        for a moment; the exclusive lock is retried briefly so such a check never refuses a
        writer, while a real writer (which holds the lock for the whole run) still is.

        Raises:
            WriterLockedError: another process holds it (the message names the holder).
            TamperError: the lock file is a symbolic link, not a regular file, or foreign.
            StoreError: the lock file cannot be opened.
        """
        try:
            owner = os.stat(path.parent).st_uid
            fd = os.open(path, _LOCK_FLAGS, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise TamperError(
                    f"{WRITER_LOCK} of {store} is a symbolic link; the store is refused"
                ) from e
            raise StoreError(f"cannot open the writer lock of {store}: {e.strerror}") from e
        try:
            check_regular(fd, f"{WRITER_LOCK} of {store}", MAX_SMALL, owner, single_link=True)
            cls._lock(fd, store)
        except UnsafeFileError as e:
            os.close(fd)
            raise TamperError(f"{e}; the store is refused") from e
        except BaseException:
            os.close(fd)
            raise
        holder_line = f"pid {os.getpid()} on host {socket.gethostname()}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder_line, 0)
        return cls(fd, path)

    @staticmethod
    def _lock(fd: int, store: Path) -> None:
        for attempt in range(_LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StoreError(f"cannot lock {store}: {e.strerror}") from e
                if attempt + 1 < _LOCK_TRIES:
                    time.sleep(_LOCK_PAUSE_S)
        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
        raise WriterLockedError(
            f"store {store} is held by another writer: {holder or 'holder not yet named'}"
        )

    @staticmethod
    def holder(path: Path, *, dir_fd: int | None = None) -> str | None:
        """Who holds the lock at ``path`` now (None when free, absent or not a regular file).

        Takes a shared lock for a moment (``acquire`` retries past it); never follows a link.
        """
        try:
            fd = os.open(path, READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None  # absent, or a link the scan refuses on its own
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
                return text or "holder not yet named"
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release(self) -> None:
        """Drop the lock (idempotent). The holder line stays; it is stale once unlocked."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
