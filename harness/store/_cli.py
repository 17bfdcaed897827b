"""``harness store``: verify and finalize run stores from the command line.

Thin: it calls ``verify_store`` / ``finalize_store`` and prints. Expected failures are
``HarnessError``s, printed once by the main CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import click
import msgspec

from harness.canonical import canonical_bytes
from harness.store._model import VerifyReport, VerifyStatus
from harness.store._seal import finalize_store
from harness.store._view import verify_store

__all__ = ["store_group"]

EXIT_OK: Final = 0
EXIT_TORN: Final = 1
EXIT_TAMPER: Final = 3
_EXIT: Final = {
    VerifyStatus.OK: EXIT_OK,
    VerifyStatus.TORN: EXIT_TORN,
    VerifyStatus.TAMPER: EXIT_TAMPER,
}


@click.group("store")
def store_group() -> None:
    """Verify and finalize append-only run stores."""


def _text(report: VerifyReport) -> str:
    lines = [
        f"status: {report.status} ({report.code})",
        f"reason: {report.reason}",
        f"records: {report.records} valid ({report.cells} of {report.schedule_rows} cells), "
        f"HEAD claims {report.head_claimed}, head {report.head}",
        f"torn bytes: records {report.torn_bytes}, journal {report.journal_torn_bytes}",
        f"journal: {report.journal_entries} entries, {report.pending_attempts} attempts "
        "not yet bound to a record",
        f"lock: {report.lock_digest}",
        f"schedule: {report.schedule_digest}",
        f"manifest: {report.manifest_digest or 'none'}",
    ]
    return "\n".join(lines)


@store_group.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify_cmd(directory: Path, as_json: bool) -> None:
    """Verify a store from its stored bytes; report the longest valid prefix and why it stops.

    Exit 0 when intact, 1 for a torn tail resume can repair, 3 for tamper (resume refused).
    """
    report = verify_store(directory)
    if as_json:
        sys.stdout.buffer.write(msgspec.json.format(canonical_bytes(report)) + b"\n")
        sys.stdout.flush()
    else:
        click.echo(_text(report))
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
    click.echo(finalize_store(directory, expected_cells))
