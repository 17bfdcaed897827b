"""The static run's output folder: decision records, the attempt journal, blobs, run.json.

Layout of a run directory::

    decisions.jsonl   one canonical JSON ``DecisionRecord`` per line, in run order
    attempts.jsonl    the provider-attempt journal: {"begin": AttemptIntent} before each
                      attempt, {"end": AttemptRecord} after it
    blobs/<hex>       raw provider responses, content-addressed (``store.blob.v1``)
    run.json          written last (atomically): what was run and the digest of each file

A directory without run.json is an interrupted run. A new run refuses a directory that exists
and is not empty. With a real provider every journal line and blob is fsynced before the call
proceeds, so a crash cannot hide a spent call; simulated calls spend nothing, so their files are
fsynced once at the end (per-line fsync would cost more than the whole study).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final, TypeVar

import msgspec

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import RunDirectoryExistsError, RunRecordsError
from harness.providers.audit import AttemptIntent, AttemptRecord
from harness.safeio import fsync_dir, write_atomic

__all__ = [
    "ATTEMPTS_FILE",
    "BLOB_DIR",
    "DECISIONS_FILE",
    "RUN_FILE",
    "JournalLine",
    "RunWriter",
    "check_out_dir",
    "file_digest",
    "read_blob_file",
]

T = TypeVar("T")

DECISIONS_FILE: Final = "decisions.jsonl"
ATTEMPTS_FILE: Final = "attempts.jsonl"
BLOB_DIR: Final = "blobs"
RUN_FILE: Final = "run.json"


class JournalLine(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """One attempts.jsonl line: exactly one of ``begin`` and ``end``."""

    begin: AttemptIntent | None = None
    end: AttemptRecord | None = None

    def __post_init__(self) -> None:
        if (self.begin is None) == (self.end is None):
            raise ValueError("a journal line holds exactly one of begin and end")


def file_digest(data: bytes) -> str:
    """Digest of a run file's exact bytes (recorded in run.json)."""
    return digest_bytes(Domain.STATIC_RUN_FILE, data)


def _blob_name(address: str) -> str:
    prefix = "blake3:"
    if not address.startswith(prefix) or len(address) != len(prefix) + 64:
        raise RunRecordsError(f"malformed blob address {address!r}")
    return address[len(prefix) :]


def check_out_dir(out: Path) -> None:
    """Refuse an output path that exists and is not an empty directory.

    Raises:
        RunDirectoryExistsError: naming the path.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        what = "is not a directory" if not out.is_dir() else "exists and is not empty"
        raise RunDirectoryExistsError(
            f"output directory {str(out)!r} {what}; a run never overwrites one - choose "
            "another --out or remove it"
        )


def read_blob_file(run_dir: Path, address: str) -> bytes:
    """The bytes of blob ``address`` in ``run_dir``, checked against the address.

    Raises:
        RunRecordsError: when the blob is missing or its bytes do not match the address.
    """
    path = run_dir / BLOB_DIR / _blob_name(address)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RunRecordsError(f"blob {address} is missing from {run_dir}: {e.strerror}") from e
    if digest_bytes(Domain.BLOB, data) != address:
        raise RunRecordsError(f"blob {address} in {run_dir} does not match its address")
    return data


class RunWriter:
    """Writes one run directory; also the run's ``AttemptJournal`` and ``BlobSink``.

    Args:
        out: the directory; created if absent, refused if it exists and is not empty.
        durable: fsync every journal line and blob as it is written (real providers).

    Raises:
        RunDirectoryExistsError: when ``out`` exists and is not an empty directory.
        RunRecordsError: when the directory cannot be created.
    """

    def __init__(self, out: Path, *, durable: bool) -> None:
        check_out_dir(out)
        try:
            (out / BLOB_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunRecordsError(f"cannot create run directory {str(out)!r}: {e.strerror}") from e
        self.out = out
        self._durable = durable
        self._decisions: IO[bytes] = open(out / DECISIONS_FILE, "xb")  # noqa: SIM115 - closed in finish/close
        self._attempts: IO[bytes] = open(out / ATTEMPTS_FILE, "xb")  # noqa: SIM115
        self._open = True

    # AttemptJournal
    def begin(self, intent: AttemptIntent) -> None:
        """Journal an attempt before it is sent."""
        self._line(self._attempts, JournalLine(begin=intent), sync=self._durable)

    def end(self, record: AttemptRecord) -> None:
        """Journal how an attempt ended."""
        self._line(self._attempts, JournalLine(end=record), sync=self._durable)

    # BlobSink
    def put(self, data: bytes) -> str:
        """Store ``data`` under its content address (idempotent) and return the address."""
        address = digest_bytes(Domain.BLOB, data)
        path = self.out / BLOB_DIR / _blob_name(address)
        if not path.exists():
            write_atomic(path, data, durable=self._durable)
        return address

    def decision(self, record: msgspec.Struct) -> None:
        """Append one decision record."""
        self._line(self._decisions, record, sync=False)

    @staticmethod
    def _line(f: IO[bytes], obj: object, *, sync: bool) -> None:
        f.write(canonical_bytes(obj) + b"\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())

    def finish(self, make_run: Callable[[dict[str, str]], T]) -> T:
        """Make every file durable, then write run.json atomically (it names the files' digests).

        Args:
            make_run: called with the digests of decisions.jsonl and attempts.jsonl; returns
                the run.json object.

        Returns:
            What ``make_run`` returned.
        """
        for f in (self._decisions, self._attempts):
            f.flush()
            os.fsync(f.fileno())
            f.close()
        self._open = False
        if not self._durable:
            for blob in sorted((self.out / BLOB_DIR).iterdir()):
                with open(blob, "rb") as f:
                    os.fsync(f.fileno())
            fsync_dir(self.out / BLOB_DIR)
        digests = {
            name: file_digest((self.out / name).read_bytes())
            for name in (DECISIONS_FILE, ATTEMPTS_FILE)
        }
        run = make_run(digests)
        body = msgspec.json.format(canonical_bytes(run), indent=2) + b"\n"
        write_atomic(self.out / RUN_FILE, body, durable=True)
        return run

    def close(self) -> None:
        """Close the files without writing run.json (an interrupted run stays visible)."""
        if self._open:
            self._decisions.close()
            self._attempts.close()
            self._open = False
