"""Anchors kept outside the store: the expected manifest digest and an SSH signature over it.

The chain is unkeyed: anyone who can write a store can rewrite a cell and recompute the chain,
HEAD and MANIFEST. What reveals it is an anchor kept elsewhere: the manifest digest printed at
finalize and published by the user (``--expect-manifest``), and optionally a signature of the
manifest made with the user's SSH key (``ssh-keygen -Y sign``, the convention git uses for
signed commits), checked against an allowed-signers file.

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

from harness.errors import AnchorMismatchError, StoreError, UnsafeFileError
from harness.safeio import open_dir, read_regular
from harness.store._files import MANIFEST, MANIFEST_SIG, MAX_SMALL, Durable, FileOps
from harness.store._model import VerifyReport, VerifyStatus

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


def _manifest_bytes(root: Path, name: str) -> bytes:
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


def sign_manifest(root: Path, report: VerifyReport, key: Path) -> Path:
    """Sign the store's MANIFEST with the SSH private key ``key``; write ``MANIFEST.sig``.

    Args:
        root: the run directory.
        report: its verification report (must be ok and finalized).
        key: the private key file (``ssh-keygen -Y sign -f``; an agent-held key works too when
            ``key`` is its public half).

    Raises:
        AnchorMismatchError: the store is not intact and finalized, or signing failed.
        StoreError: ssh-keygen is missing.
        DurabilityError: writing the signature failed.
    """
    if report.status is not VerifyStatus.OK or report.manifest_digest is None:
        raise AnchorMismatchError(f"store {root} is not finalized and intact: nothing to sign")
    manifest = _manifest_bytes(root, MANIFEST)
    signature = _run(
        ["-Y", "sign", "-q", "-f", str(key), "-n", SIGNATURE_NAMESPACE],
        manifest,
        "sign the manifest",
    )
    Durable(FileOps()).replace(root / MANIFEST_SIG, root / f".{MANIFEST_SIG}.tmp", signature)
    return root / MANIFEST_SIG


def verify_signature(root: Path, allowed_signers: Path, identity: str | None = None) -> str:
    """Check ``MANIFEST.sig`` over ``MANIFEST`` against an allowed-signers file.

    Args:
        root: the run directory.
        allowed_signers: the ``ssh-keygen`` allowed-signers file (``principal key``).
        identity: the principal that must have signed; None accepts any principal the file
            names for the signing key.

    Returns:
        The principal that signed.

    Raises:
        AnchorMismatchError: no signature, or it does not verify for an allowed principal.
        StoreError: ssh-keygen is missing.
    """
    manifest = _manifest_bytes(root, MANIFEST)
    signature = _manifest_bytes(root, MANIFEST_SIG)
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
