"""``harness export DIR OUT``: a self-contained artifact bundle of a finished run, privacy-checked.

The bundle is a directory that is itself a verifiable run store plus what is needed to check
and reanalyse it without the development tree:

- the store's evidence: ``records.log``, ``HEAD``, ``journal.log``, ``MANIFEST``, the byte copies
  ``study.lock`` and ``schedule.json``, every blob in ``blobs/`` (raw provider responses, so
  decisions can be replayed) and any torn tails kept in ``evidence/``; the writer lock (which
  names a process and a host) and temporary files are left out;
- ``v2-config.json``: the frozen study config, whose bytes the lock covers;
- ``report/``: every table and figure of ``harness v2 report``, checked against its own
  manifest and against the store before it is copied;
- ``bundle-manifest.json``: every file's size and digest (``study.export.v1``), the store's
  head, manifest and lock digests, and the command that replays the bundle.

Before anything is written, a privacy check scans every byte of every file for credential-shaped
strings, local absolute paths, the local user and host names, and - for a run that sent an API
key, which must then be given to the export - that key itself in any spelling, whatever its
shape (``harness.privacy``); any
finding refuses the whole export with one line per finding (never quoting the match) and
leaves nothing behind. The bundle appears at ``OUT`` with one rename (``safeio.publish_dir``).

This module reads a store and writes only the new bundle directory.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

import msgspec

from harness.audit import study_kind
from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import (
    ExportError,
    PrivacyError,
    StudyKindError,
    StudyLockError,
    StudyReportError,
    UnsafeFileError,
)
from harness.lock import FileRole, decode_lock, file_digest
from harness.privacy import KeyFinder, KeyFinding, credential_findings, key_findings, local_findings
from harness.providers.kinds import ProviderName
from harness.safeio import MAX_READ, publish_dir, read_regular
from harness.store import StoreView, lock_digest, read_store
from harness.studies.v2.report import FIGURE_FILES, REPORT_FILES, REPORT_MANIFEST, decode_manifest

__all__ = [
    "BUNDLE_MANIFEST",
    "BundleFile",
    "BundleManifest",
    "export_bundle",
    "local_names",
    "privacy_findings",
    "used_a_key",
]

BUNDLE_MANIFEST: Final = "bundle-manifest.json"
CONFIG_NAME: Final = "v2-config.json"
_STORE_FILES: Final = ("records.log", "HEAD", "journal.log", "MANIFEST", "study.lock")
_SCHEDULE: Final = "schedule.json"
_MAX_LISTED: Final = 5


class BundleFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One file of the bundle."""

    path: str
    size: int
    digest: str


class BundleManifest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``bundle-manifest.json``."""

    schema: Literal["harness.export-bundle.v1"] = "harness.export-bundle.v1"
    store_head: str
    store_manifest: str
    lock_digest: str
    schedule_digest: str
    cells: int
    simulated: bool
    replay: str
    files: tuple[BundleFile, ...]


def local_names() -> list[str]:
    """The user and host names of this machine (what a bundle must not carry)."""
    names = [socket.gethostname(), socket.gethostname().split(".")[0]]
    with contextlib.suppress(KeyError, OSError):
        names.append(getpass.getuser())
    return [n for n in names if n]


def privacy_findings(
    files: dict[str, bytes], names: Sequence[str], key: KeyFinder | None = None
) -> list[KeyFinding]:
    """Every credential-shaped string, local path and local name in ``files``, and every
    occurrence of ``key`` (the run's own key) when given."""
    found: list[KeyFinding] = []
    for path, data in sorted(files.items()):
        found.extend(credential_findings(path, data))
        found.extend(local_findings(path, data, names))
        if key is not None:
            found.extend(key_findings(path, data, key))
    return found


def used_a_key(view: StoreView) -> bool:
    """Whether the run sent an API key: gemini always, openai unless ``--no-credential``, as
    the store's genesis binds its provider identity."""
    # Imported here: the study module pulls in the run machinery, which export never uses.
    from harness.studies.v2.study import stored_identity

    identity = stored_identity(view)
    if identity is None:
        return False
    provider = identity.provider
    return provider is ProviderName.GEMINI or (
        provider is ProviderName.OPENAI and identity.credential != "none"
    )


def _read(path: Path, what: str) -> bytes:
    try:
        return read_regular(path, MAX_READ, what=f"{what} {path}")
    except UnsafeFileError as e:
        raise ExportError(f"{e}: export refused, nothing written") from e
    except OSError as e:
        raise ExportError(f"cannot read {what} {path}: {e.strerror}") from e


def _store_files(root: Path) -> dict[str, bytes]:
    files = {name: _read(root / name, "store file") for name in (*_STORE_FILES, _SCHEDULE)}
    for sub in ("blobs", "evidence"):
        directory = root / sub
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if not path.name.startswith("."):
                files[f"{sub}/{path.name}"] = _read(path, "store file")
    return files


def _report_files(root: Path, report_dir: Path, head: str) -> dict[str, bytes]:
    manifest_bytes = _read(report_dir / REPORT_MANIFEST, "report manifest")
    try:
        manifest = decode_manifest(manifest_bytes, origin=str(report_dir / REPORT_MANIFEST))
    except StudyReportError as e:
        raise ExportError(str(e)) from e
    if manifest.store.head != head:
        raise ExportError(
            f"the report in {report_dir} was computed from another state of the store "
            f"(head {manifest.store.head}, the store's is {head}); run `harness v2 report`"
        )
    files = {f"report/{REPORT_MANIFEST}": manifest_bytes}
    # The figures are there only when the report was made with the [plots] extra installed.
    for name in (n for n in REPORT_FILES if n in manifest.files or n not in FIGURE_FILES):
        data = _read(report_dir / name, "report file")
        if manifest.files.get(name) != digest_bytes(Domain.REPORT_TABLE, data):
            raise ExportError(f"report file {name} in {report_dir} does not match its manifest")
        files[f"report/{name}"] = data
    return files


def _config_file(root: Path, config_path: Path, lock_bytes: bytes) -> bytes:
    data = _read(config_path, "study config")
    try:
        locked = decode_lock(lock_bytes, origin=f"{root}/study.lock").file(FileRole.STUDY_CONFIG)
    except StudyLockError as e:
        raise ExportError(f"store {root} is not bound to a study lock: {e}") from e
    if file_digest(FileRole.STUDY_CONFIG, data) != locked.digest:
        raise ExportError(f"{config_path} is not the study config store {root} is locked to")
    return data


def export_bundle(
    root: str | os.PathLike[str],
    out: Path,
    *,
    config_path: Path,
    report_dir: Path | None = None,
    names: Sequence[str] | None = None,
    key: KeyFinder | None = None,
) -> BundleManifest:
    """Write the artifact bundle of the finalized store at ``root`` to ``out``.

    Args:
        root: the run store (verified and finalized).
        out: the bundle directory to create (must not exist).
        config_path: the frozen study config the store's lock covers.
        report_dir: the report to include (default ``root/report``).
        names: user and host names the bundle must not contain (default: this machine's).
        key: the run's own key, which the bundle must not contain in any spelling; required
            when the run sent one (gemini, openai with a key).

    Returns:
        The bundle manifest (also written as ``bundle-manifest.json``).

    Raises:
        StoreNotFoundError: no store at ``root``.
        ExportError: the store does not verify or is not finalized, the report is missing or
            stale, the config is not the locked one, ``out`` exists, or the run sent a key and
            none was given to check the bundle for.
        StudyKindError: the store is a static study's.
        PrivacyError: the bundle would carry a credential, a local path or a local name.
    """
    base = Path(root)
    if out.exists():
        raise ExportError(f"{out} already exists; the bundle is written to a new directory")
    view = read_store(base)
    report = view.report
    if not report:
        raise ExportError(f"store {base} does not verify ({report.code}): {report.reason}")
    if report.manifest_digest is None or report.head is None:
        raise ExportError(f"store {base} is not finalized; finish and finalize the run first")
    if study_kind(view, str(base)) != "v2":
        raise StudyKindError(f"{base} is a static study store: export bundles V2 stores only")
    if key is None and used_a_key(view):
        raise ExportError(
            f"store {base} was made with an API key, and the bundle is checked for that key "
            "itself: give it as the run took it (--credential-file PATH or --credential-env "
            "NAME); nothing written"
        )
    files = _store_files(base)
    files[CONFIG_NAME] = _config_file(base, config_path, files["study.lock"])
    files.update(_report_files(base, report_dir or base / "report", report.head))
    found = privacy_findings(files, local_names() if names is None else names, key)
    if found:
        listed = "; ".join(f.line() for f in found[:_MAX_LISTED])
        more = f" (and {len(found) - _MAX_LISTED} more)" if len(found) > _MAX_LISTED else ""
        raise PrivacyError(
            f"export refused: {len(found)} privacy finding(s): {listed}{more}; nothing written"
        )
    manifest = BundleManifest(
        store_head=report.head,
        store_manifest=report.manifest_digest,
        lock_digest=lock_digest(files["study.lock"]),
        schedule_digest=report.schedule_digest or "",
        cells=report.cells,
        simulated=all(cell.result.get("simulated") is True for cell in view.cells),
        replay=f"harness replay BUNDLE --config BUNDLE/{CONFIG_NAME}",
        files=tuple(
            BundleFile(path=path, size=len(data), digest=digest_bytes(Domain.EXPORT, data))
            for path, data in sorted(files.items())
        ),
    )
    encoded = msgspec.json.format(canonical_bytes(manifest), indent=2) + b"\n"
    _write(out, {**files, BUNDLE_MANIFEST: encoded})
    return manifest


def _write(out: Path, files: dict[str, bytes]) -> None:
    try:
        publish_dir(out, files.items())
    except OSError as e:
        raise ExportError(f"cannot write the bundle {out}: {e.strerror}") from e
