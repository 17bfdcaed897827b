"""Anchors kept outside the store: the expected manifest digest and an SSH signature over it.

The chain is unkeyed: anyone who can write a store can rewrite a cell and recompute the chain,
HEAD and MANIFEST. What reveals it is an anchor kept elsewhere: the manifest digest printed at
finalize and published by the user (``--expect-manifest``), and optionally a signature of the
manifest made with the user's SSH key (``ssh-keygen -Y sign``, the convention git uses for
signed commits), checked against an allowed-signers file.

Both work on one ``SealedView``: the MANIFEST bytes signed or checked are the bytes verification
read and checked the chain against, never a second read of the file (a MANIFEST swapped between
two reads would otherwise get, or pass, a signature over what was not checked).

This module refuses or accepts; it never changes the store's records. ``sign_manifest`` writes
only ``MANIFEST.sig``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from harness.canonical import Domain
from harness.errors import AnchorMismatchError, StoreError, UnsafeFileError
from harness.safeio import open_dir, read_regular
from harness.store._files import MANIFEST_SIG, MAX_SMALL, Durable, FileOps, Line, parse_line
from harness.store._model import VerifyReport, VerifyStatus
from harness.store._view import SealedView

__all__ = ["SIGNATURE_NAMESPACE", "require_manifest", "sign_manifest", "verify_signature"]

SIGNATURE_NAMESPACE: Final = "ect-harness-store-manifest"
"""The ``ssh-keygen -Y`` namespace of a manifest signature (a signature made for anything
else, e.g. a git commit, does not verify as one)."""
_SSH_TIMEOUT_S: Final = 60.0


def require_manifest(report: VerifyReport, expected: str, root: Path) -> None:
    """Refuse unless ``report`` is an intact store sealed by exactly the manifest ``expected``.

    Raises:
        AnchorMismatchError: the store is not finalized, is in progress, torn or tampered, or
            its manifest digest is another.
    """
    if report.status is not VerifyStatus.OK or report.manifest_digest is None:
        state = (
            "not finalized (no MANIFEST)"
            if report.status is VerifyStatus.OK
            else f"{report.status} ({report.code})"
        )
        raise AnchorMismatchError(f"store {root} is {state}; expected manifest {expected}: refused")
    if report.manifest_digest != expected:
        raise AnchorMismatchError(
            f"store {root} is sealed by manifest {report.manifest_digest}, not the expected "
            f"{expected}: refused"
        )


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise StoreError("ssh-keygen is not installed: manifest signatures need OpenSSH 8.2+")
    return found


def _run(args: list[str], data: bytes, what: str) -> bytes:
    try:
        done = subprocess.run(
            [_ssh_keygen(), *args],
            input=data,
            capture_output=True,
            timeout=_SSH_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StoreError(f"ssh-keygen could not {what}: {e}") from e
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = lines[-1] if lines else f"exit {done.returncode}"
        raise AnchorMismatchError(f"ssh-keygen could not {what}: {detail}")
    return done.stdout


def _sealed_manifest(root: Path, sealed: SealedView, action: str) -> bytes:
    """The MANIFEST bytes ``sealed`` verified; refuse a store that is not intact and sealed."""
    report, manifest = sealed.report, sealed.manifest
    if report.status is not VerifyStatus.OK or report.manifest_digest is None or manifest is None:
        raise AnchorMismatchError(f"store {root} is not finalized and intact: {action}")
    line = parse_line(manifest, 0, Domain.STORE_MANIFEST)
    if not isinstance(line, Line) or line.digest != report.manifest_digest:
        # Unreachable from one scan; refused rather than signing bytes the report did not pin.
        raise AnchorMismatchError(f"store {root}: the manifest read is not the one verified")
    return manifest


def _store_file(root: Path, name: str) -> bytes:
    try:
        dir_fd = open_dir(root, follow=True)
        try:
            return read_regular(name, MAX_SMALL, dir_fd=dir_fd, what=f"{root}/{name}")
        finally:
            os.close(dir_fd)
    except FileNotFoundError as e:
        raise AnchorMismatchError(f"store {root} has no {name}") from e
    except UnsafeFileError as e:
        raise AnchorMismatchError(f"{e}; refused") from e
    except OSError as e:
        raise StoreError(f"cannot read {name} of {root}: {e.strerror or e}") from e


def sign_manifest(root: Path, sealed: SealedView, key: Path) -> Path:
    """Sign the MANIFEST bytes ``sealed`` verified with the SSH key ``key``; write ``MANIFEST.sig``.

    Args:
        root: the run directory.
        sealed: its verification (``read_sealed``: must be ok and finalized); its MANIFEST bytes
            are what is signed, never a second read of the file.
        key: the private key file (``ssh-keygen -Y sign -f``; an agent-held key works too when
            ``key`` is its public half).

    Raises:
        AnchorMismatchError: the store is not intact and finalized, or signing failed.
        StoreError: ssh-keygen is missing.
        DurabilityError: writing the signature failed.
    """
    manifest = _sealed_manifest(root, sealed, "nothing to sign")
    signature = _run(
        ["-Y", "sign", "-q", "-f", str(key), "-n", SIGNATURE_NAMESPACE],
        manifest,
        "sign the manifest",
    )
    Durable(FileOps()).replace(root / MANIFEST_SIG, root / f".{MANIFEST_SIG}.tmp", signature)
    return root / MANIFEST_SIG


def verify_signature(
    root: Path, sealed: SealedView, allowed_signers: Path, identity: str | None = None
) -> str:
    """Check ``MANIFEST.sig`` over the MANIFEST bytes ``sealed`` verified.

    Args:
        root: the run directory.
        sealed: its verification (``read_sealed``); the signature is checked over the very
            MANIFEST bytes the chain was checked against.
        allowed_signers: the ``ssh-keygen`` allowed-signers file (``principal key``).
        identity: the principal that must have signed; None accepts any principal the file
            names for the signing key.

    Returns:
        The principal that signed.

    Raises:
        AnchorMismatchError: the store is not intact and finalized, no signature, or it does
            not verify for an allowed principal.
        StoreError: ssh-keygen is missing.
    """
    manifest = _sealed_manifest(root, sealed, "no signature can hold")
    signature = _store_file(root, MANIFEST_SIG)
    with tempfile.TemporaryDirectory(prefix="harness-sig-") as tmp:
        sig_path = Path(tmp) / "manifest.sig"
        sig_path.write_bytes(signature)
        allowed = str(allowed_signers)
        if identity is None:
            found = _run(
                ["-Y", "find-principals", "-s", str(sig_path), "-f", allowed],
                b"",
                "find a principal allowed to sign the manifest",
            )
            names = found.decode("utf-8", "replace").split()
            if not names:
                raise AnchorMismatchError(f"no allowed signer of {root}'s manifest")
            identity = names[0]
        _run(
            [
                "-Y",
                "verify",
                "-f",
                allowed,
                "-I",
                identity,
                "-n",
                SIGNATURE_NAMESPACE,
                "-s",
                str(sig_path),
            ],
            manifest,
            f"verify the manifest signature of {root} for {identity}",
        )
    return identity
