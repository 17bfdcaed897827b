"""Verification of the blobs: every blob is read and hashed, and must hash to its own name.

A blob's name is the hex digest of its content under ``Domain.BLOB``; the digests of the blobs
that verify go into ``Scan.blobs``, which the journal and record checks consult.
"""

from __future__ import annotations

import errno
import os
from typing import Final

import blake3

from harness.canonical import DIGEST_PREFIX, Domain, domain_prefix
from harness.errors import UnsafeFileError
from harness.safeio import READ_FLAGS, check_regular, open_dir, read_fd
from harness.store._files import BLOBS, MAX_BLOB, blob_names, is_blob_name
from harness.store._model import VerifyCode
from harness.store.scan.state import Pass

__all__ = ["check_blobs"]

_BLOB_FIRST_READ: Final = 1 << 16
"""One read takes a whole blob up to this size (raw responses are a few KiB); a blob that fills
it is checked (type, owner, size bound) before the rest is read."""


def check_blobs(p: Pass) -> None:
    """Hash every blob; a blob that does not hash to its name, or is no regular file, is tamper."""
    try:
        dir_fd = open_dir(BLOBS, dir_fd=p.dir_fd, follow=False)
    except FileNotFoundError:
        return
    except UnsafeFileError as e:
        p.unsafe(e)
        return
    prefix = domain_prefix(Domain.BLOB)
    hasher = blake3.blake3()  # reset per blob: cheaper than a new one
    reset, update, finish = hasher.reset, hasher.update, hasher.digest
    found = p.s.blobs
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
        per_file_owner = folder.st_uid != p.owner or bool(folder.st_mode & 0o022)
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
                _unopenable(p, where, e)
                continue
            try:
                if per_file_owner:
                    check_regular(fd, where, MAX_BLOB, p.owner)
                data = read(fd, first)
                if len(data) == first:  # a large blob, or a device
                    data += read_fd(fd, where, MAX_BLOB, p.owner)
                if not every_name_a_blob and not is_blob_name(name):
                    continue  # temp file of an interrupted put; never referenced
                # The name is the hex digest of the content (a blob's name is its digest).
                reset()
                update(prefix + data)
                if finish().hex() == name:
                    found.add(DIGEST_PREFIX + name)
                    continue
                check_regular(fd, where, MAX_BLOB, p.owner)  # names a FIFO or device
                p.found_tamper(
                    VerifyCode.BLOB_CORRUPT,
                    f"blob {name[:12]}... does not hash to its name (content changed)",
                )
            except UnsafeFileError as e:
                p.unsafe(e)
            except OSError as e:
                _unopenable(p, where, e)
            finally:
                close(fd)
    finally:
        os.close(dir_fd)


def _unopenable(p: Pass, where: str, error: OSError) -> None:
    if error.errno == errno.ELOOP:
        reason = f"{where} is a symbolic link; refused"
    else:
        reason = f"{where} cannot be read as a file ({error.strerror}); refused"
    p.found_tamper(VerifyCode.UNSAFE_FILE, reason)
