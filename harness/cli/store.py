"""``harness store``: verify, finalize and sign run stores from the command line.

Thin: it calls ``verify_store`` / ``finalize_store`` / the anchors and prints. Expected failures are
``HarnessError``s, printed once by the main CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import click
import msgspec

from harness.canonical import canonical_bytes, is_digest
from harness.errors import InputError, StoreInProgressError, TamperError
from harness.store._anchor import require_manifest, sign_manifest, verify_signature
from harness.store._model import VerifyReport, VerifyStatus
from harness.store._seal import finalize_store
from harness.store._view import read_sealed
from harness.terminal import echo, json_out

__all__ = ["store_group"]

# The verdicts of ``store verify``; tamper and in progress are the errors' own codes.
EXIT_OK: Final = 0
EXIT_TORN: Final = 1
EXIT_TAMPER: Final = TamperError.exit_code
EXIT_NOT_FINALIZED: Final = 4
EXIT_IN_PROGRESS: Final = StoreInProgressError.exit_code
_EXIT: Final = {
    VerifyStatus.OK: EXIT_OK,
    VerifyStatus.TORN: EXIT_TORN,
    VerifyStatus.TAMPER: EXIT_TAMPER,
    VerifyStatus.IN_PROGRESS: EXIT_IN_PROGRESS,
}
_KEEP: Final = "publish this digest where the store's writer cannot change it"


@click.group("store")
def store_group() -> None:
    """Verify, finalize and sign append-only run stores."""


def _status(report: VerifyReport) -> str:
    if report.status is VerifyStatus.IN_PROGRESS:
        return "in progress"
    if report.status is VerifyStatus.OK and not report.finalized:
        return "not finalized"
    return str(report.status)


def _text(report: VerifyReport) -> str:
    lines = [
        f"status: {_status(report)} ({report.code})",
        f"reason: {report.reason}",
        f"records: {report.records} valid ({report.cells} of {report.schedule_rows} cells), "
        f"HEAD claims {report.head_claimed}, head {report.head}",
        f"torn bytes: records {report.torn_bytes}, journal {report.journal_torn_bytes}",
        f"journal: {report.journal_entries} entries, {report.pending_attempts} attempts "
        "not yet bound to a record",
        f"lock: {report.lock_digest}",
        f"schedule: {report.schedule_digest}",
        f"manifest: {report.manifest_digest or 'none (not finalized)'}",
    ]
    if report.writer is not None:
        lines.append(f"writer: {report.writer}")
    return "\n".join(lines)


@store_group.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--expect-manifest",
    "expected",
    metavar="DIGEST",
    default=None,
    help="Refuse (exit 3) unless the store is intact and sealed by exactly this manifest digest.",
)
@click.option(
    "--allowed-signers",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also require MANIFEST.sig to verify against this ssh-keygen allowed-signers file.",
)
@click.option(
    "--signer",
    default=None,
    help="The principal that must have signed (default: any the allowed-signers file names).",
)
def verify_cmd(
    directory: Path,
    as_json: bool,
    expected: str | None,
    allowed_signers: Path | None,
    signer: str | None,
) -> None:
    """Verify a store from its stored bytes; report the longest valid prefix and why it stops.

    Exit 0 intact and finalized, 1 torn (resume repairs it), 3 tamper or not the expected
    manifest, 4 intact but not finalized, 5 in progress (a live writer holds it).
    """
    if expected is not None and not is_digest(expected):
        raise InputError(f"--expect-manifest {expected!r} is not a digest `blake3:<64 hex>`")
    sealed = read_sealed(directory)
    report = sealed.report
    if as_json:
        json_out(msgspec.json.format(canonical_bytes(report)))
        sys.stdout.flush()
    else:
        echo(_text(report))
    if expected is not None:
        require_manifest(report, expected, directory)
        echo(f"manifest matches the expected {expected}", err=True)
    if allowed_signers is not None:
        require_manifest(report, report.manifest_digest or "a manifest", directory)
        principal = verify_signature(directory, sealed, allowed_signers, signer)
        echo(f"manifest signature verifies: signed by {principal}", err=True)
    if report.status is VerifyStatus.OK and not report.finalized:
        sys.exit(EXIT_NOT_FINALIZED)
    sys.exit(_EXIT[report.status])


@store_group.command("finalize")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--expected-cells",
    type=click.IntRange(min=1),
    default=None,
    help="Cells the study expects (e.g. 576); default: the bound schedule's length.",
)
def finalize_cmd(directory: Path, expected_cells: int | None) -> None:
    """Seal a complete store with a manifest and print the manifest's digest.

    Keep the printed digest somewhere else: it is what reveals a cut or rewritten store later.
    """
    digest = finalize_store(directory, expected_cells)
    echo(digest)
    echo(f"manifest {digest}: {_KEEP}", err=True)


@store_group.command("sign")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--key",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="SSH private key to sign with (ssh-keygen -Y sign -f KEY).",
)
def sign_cmd(directory: Path, key: Path) -> None:
    """Sign a finalized store's MANIFEST with an SSH key; writes DIRECTORY/MANIFEST.sig.

    Check it with `harness store verify DIR --allowed-signers FILE`.
    """
    sealed = read_sealed(directory)
    path = sign_manifest(directory, sealed, key)
    echo(f"signed manifest {sealed.report.manifest_digest}: {path}")
