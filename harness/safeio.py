"""Bounded, no-follow reading of files; the one atomic replace of a file and of a directory.

A store directory, a certificate or a policy file may be hostile: a symlink pointing outside,
a FIFO that blocks forever, ``/dev/zero`` or a sparse multi-GB file that grows memory until the
kernel kills the process. Every read here opens the file once (``O_NONBLOCK`` so a FIFO cannot
block the open, ``O_NOFOLLOW`` unless the caller named the path itself), checks with ``fstat``
that the descriptor is a regular file, optionally owned by an expected user, no larger than a
stated bound, and only then reads, never more than the bound even if the file grows meanwhile.

Names inside a directory are opened relative to that directory's descriptor (``dir_fd``), so a
directory swapped for a symlink after it was opened cannot redirect the read.

``write_atomic`` is the one way the harness replaces a whole file outside the store (the lock,
reports): the bytes go to a new hidden temporary beside the file (a unique name, created without
following links) and are renamed over it, so a reader sees the old file or the new one, never a
torn one. ``publish_dir`` is the same for a new directory (a snapshot export, an artifact
bundle). The run store's own commit protocol (``harness.store``) has its own injected-fault
file layer.

This module knows nothing of stores or certificates.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Final

from harness.errors import UnsafeFileError

__all__ = [
    "MAX_READ",
    "READ_FLAGS",
    "READ_FLAGS_FOLLOW",
    "check_regular",
    "file_kind",
    "fsync_dir",
    "open_dir",
    "publish_dir",
    "read_fd",
    "read_input",
    "read_input_head",
    "read_regular",
    "write_atomic",
]

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
"""Flags of every bounded read of a name the caller did not choose (a file inside a store)."""
READ_FLAGS_FOLLOW: Final = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC
"""Flags of a bounded read of a path the user named on the command line (links followed)."""
MAX_READ: Final = 1 << 30
"""The bound of a read nothing smaller applies to (1 GiB): no file the harness reads is near it,
and a sparse multi-GB file or ``/dev/zero`` is refused before a byte is read."""
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
_CHUNK: Final = 1 << 16


def file_kind(mode: int) -> str:
    """What an ``st_mode`` is, in words (``a FIFO``, ``a device``, ...)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_dir(path: str | os.PathLike[str], *, dir_fd: int | None = None, follow: bool) -> int:
    """Open a directory for ``dir_fd``-relative access; return its descriptor.

    Args:
        path: the directory (a name inside ``dir_fd`` when that is given).
        dir_fd: the directory ``path`` is relative to, or None.
        follow: follow a symbolic link at ``path`` (only for a path the user named).

    Raises:
        FileNotFoundError: nothing is there.
        UnsafeFileError: ``path`` is a symbolic link (when not followed) or not a directory.
    """
    flags = _DIR_FLAGS | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(path, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                mode = 0
            raise UnsafeFileError(
                f"{os.fspath(path)} is {file_kind(mode)}, expected a directory",
                kind="symlink" if stat.S_ISLNK(mode) else "type",
            ) from e
        raise


def check_regular(
    fd: int,
    what: str,
    limit: int | None,
    owner: int | None = None,
    *,
    single_link: bool = False,
) -> int:
    """``fstat`` an open descriptor: a regular file within ``limit`` bytes; return its size.

    ``limit`` None checks the type (and owner) only, for a reader that bounds itself.
    ``single_link`` refuses a file with another hard link: a file about to be written, whose
    other name (outside its directory) would change with it.

    Raises:
        UnsafeFileError: not a regular file, larger than ``limit``, not owned by ``owner``, or
            (``single_link``) hard-linked elsewhere.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{what} is {file_kind(st.st_mode)}, not a regular file", kind="type")
    if single_link and st.st_nlink > 1:
        raise UnsafeFileError(
            f"{what} has {st.st_nlink} hard links; a file written here must have one",
            kind="hardlink",
        )
    if owner is not None and st.st_uid != owner:
        raise UnsafeFileError(
            f"{what} is owned by uid {st.st_uid}, expected uid {owner}", kind="owner"
        )
    if limit is not None and st.st_size > limit:
        raise UnsafeFileError(
            f"{what} is {st.st_size} bytes, over the {limit}-byte bound", kind="size"
        )
    return st.st_size


def read_fd(fd: int, what: str, limit: int, owner: int | None = None) -> bytes:
    """Read an open descriptor to its end after ``check_regular``; never more than ``limit``.

    Raises:
        UnsafeFileError: as ``check_regular``, or the file grew past ``limit`` while read.
    """
    size = check_regular(fd, what, limit, owner)
    # One read of the stated size, then reads until end of file: a file that is still being
    # appended to may hold more than fstat said, but never more than the bound.
    data = os.read(fd, max(size, 1))
    chunk = os.read(fd, min(_CHUNK, limit + 1 - len(data)) or 1) if data else b""
    if not chunk:
        return data  # the common case: no copy of what was read
    chunks = [data, chunk]
    total = len(data) + len(chunk)
    while chunk:
        if total > limit:
            raise UnsafeFileError(f"{what} grew past the {limit}-byte bound", kind="size")
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total) or 1)
        total += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks)


def read_regular(
    name: str | os.PathLike[str],
    limit: int,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
    owner: int | None = None,
    what: str | None = None,
) -> bytes:
    """Read a regular file of at most ``limit`` bytes, refusing anything else before reading.

    Args:
        name: the file (a name inside ``dir_fd`` when that is given).
        limit: the largest size accepted, in bytes.
        dir_fd: the directory ``name`` is relative to, or None.
        follow: follow a symbolic link at ``name`` (only for a path the user named).
        owner: the uid the file must belong to, or None for any.
        what: how messages name the file (default: ``name``).

    Raises:
        FileNotFoundError: nothing is there.
        UnsafeFileError: a symbolic link (when not followed), not a regular file, over the
            bound, or owned by another user.
        OSError: another error opening or reading.
    """
    label = what or os.fspath(name)
    try:
        fd = os.open(name, READ_FLAGS_FOLLOW if follow else READ_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise UnsafeFileError(f"{label} is a symbolic link", kind="symlink") from e
        raise
    try:
        return read_fd(fd, label, limit, owner)
    finally:
        os.close(fd)


def read_input(path: Path, limit: int, what: str) -> bytes:
    """Read a file the user named on the command line: links followed, type and size checked.

    Raises:
        UnsafeFileError: not a regular file (a FIFO, a device, a directory) or over ``limit``.
        OSError: the file cannot be opened or read (missing, permissions).
    """
    return read_regular(path, limit, follow=True, what=f"{what} file {str(path)!r}")


def read_input_head(path: Path, limit: int, what: str) -> bytes:
    """Read a file the user named, but at most ``limit + 1`` bytes of it.

    For an input whose size its consumer judges (a verifier refusing inputs over ``limit`` with
    its own reason code): a longer file yields ``limit + 1`` bytes, enough to be judged too
    large, and never more. Links are followed; the file must be a regular file.

    Raises:
        UnsafeFileError: not a regular file (a FIFO, a device, a directory).
        OSError: the file cannot be opened or read.
    """
    label = f"{what} file {str(path)!r}"
    fd = os.open(path, READ_FLAGS_FOLLOW)
    try:
        check_regular(fd, label, None)  # the type; the loop below bounds what is read
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the entries of the directory ``path`` durable (its new or renamed names).

    Raises:
        OSError: the directory cannot be opened or synced.
    """
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_WRITE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_TMP_TRIES: Final = 16


def _create_hidden(directory: Path, name: str) -> tuple[Path, int]:
    """Create a new hidden file beside ``name`` in ``directory``; return its path and descriptor.

    The name is unique (process id and a random token), so two writers of one file never share
    a temporary, and it is created with ``O_EXCL | O_NOFOLLOW``: a link planted under that name
    is never followed, the create fails instead and another name is drawn. The token is not
    part of anything hashed or compared.
    """
    for _ in range(_TMP_TRIES):
        tmp = directory / f".{name}.{os.getpid()}-{os.urandom(6).hex()}.tmp"
        try:
            return tmp, os.open(tmp, _WRITE_FLAGS, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {name}", str(directory))


def write_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Replace ``path`` by ``data`` atomically (a new hidden temporary beside it, renamed over).

    Args:
        path: the file to write; its directory must exist.
        data: its new content.
        durable: fsync the file before the rename and its directory after it, so the new
            content survives a crash once this returns.

    Raises:
        OSError: the write, fsync or rename failed (the caller names what it was writing); the
            temporary is removed.
    """
    tmp, fd = _create_hidden(path.parent, path.name)
    try:
        with open(fd, "wb", closefd=True) as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def publish_dir(out: Path, files: Iterable[tuple[str, bytes]]) -> int:
    """Create the directory ``out`` holding ``files`` with one rename; return how many were written.

    The one atomic publish of a directory (a snapshot export, an artifact bundle): every file
    goes into a private hidden sibling (``.<name>.partial-*``), which is opened to ordinary
    output (mode 755) and renamed to ``out`` at the end, so a reader sees no directory or the
    whole one, and a failure leaves nothing behind.

    Args:
        out: the directory to create; absent, or an empty directory (replaced).
        files: each file's relative POSIX path (subdirectories are created) and bytes.

    Raises:
        ValueError: a path is absolute or climbs out with ``..`` (nothing is left behind).
        OSError: the sibling cannot be made, a file cannot be written, or the rename failed
            (``out`` exists and is not empty); nothing is left behind.
    """
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=parent))
    count = 0
    try:
        for rel, data in files:
            parts = PurePosixPath(rel).parts
            if not parts or parts[0] == "/" or ".." in parts:
                raise ValueError(f"{rel!r} is not a path inside the directory")
            target = staging.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            count += 1
        staging.chmod(0o755)  # mkdtemp makes it private; what is published is ordinary output
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return count
