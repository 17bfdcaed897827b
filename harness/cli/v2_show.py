"""``harness v2 show STORE CELL_ID`` and ``harness v2 cells STORE``: read one cell, find cells.

Added to the ``v2`` group by ``harness.cli``. Both read the store through verification and work
on a partial store and on one a writer is still filling (they see what was committed when
they began). ``show`` prints one cell's transcript (``harness.studies.v2.transcript``);
``cells`` lists committed cell ids with their outcome, filtered by pipeline, outcome and fault.
Cell ids complete in the shell (click's shell completion).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec
from click.shell_completion import CompletionItem

from harness.errors import StoreError
from harness.resources import data_path
from harness.studies.v2.config import DEFAULT_CONFIG_PATH
from harness.studies.v2.outcomes import POLICIES, CellResult, decode_cell, read_v2_store
from harness.terminal import echo, json_out

__all__ = ["v2_cells_cmd", "v2_show_cmd"]

_OUTCOMES = (
    "supported",
    "unsupported",
    "stuck",
    "recoverable_stuck",
    "budget_exhausted",
    "premature_unsupported_termination",
    "clean_false_continuation",
    "recovery_event",
)


def _complete_cell_id(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Committed cell ids of the store named on the command line that start with the prefix."""
    from harness.store import read_store

    store = ctx.params.get("store")
    if store is None:
        return []
    try:
        view = read_store(Path(store))
    except (StoreError, OSError):
        return []
    ids = (str(r.row.get("cell_id", "")) for r in view.cells)
    return [CompletionItem(i) for i in ids if i.startswith(incomplete)]


_CONFIG_HELP = (
    f"The frozen study config (default: {DEFAULT_CONFIG_PATH}); it must be the one the store's "
    "study lock covers. Used to regenerate the worlds that receipt values come from."
)


@click.command("show")
@click.argument("store", type=click.Path(path_type=Path, file_okay=False))
@click.argument("cell_id", shell_complete=_complete_cell_id)
@click.option("--json", "as_json", is_flag=True, help="Print the transcript as JSON.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=_CONFIG_HELP,
)
def v2_show_cmd(store: Path, cell_id: str, as_json: bool, config_path: Path | None) -> None:
    """One committed cell: row, checkpoint, every decision, the verdicts and the outcome.

    Exit 2 when the store is tampered or the cell is not committed.
    """
    from harness.studies.v2.transcript import load_transcripts, render_transcript

    config = config_path if config_path is not None else data_path(DEFAULT_CONFIG_PATH)
    (transcript,) = load_transcripts(store, config, cell_ids=[cell_id])
    if as_json:
        data = msgspec.json.encode(transcript, order="sorted")
        json_out(msgspec.json.format(data, indent=2))
        sys.stdout.flush()
        return
    echo(render_transcript(transcript))


def _matches(result: CellResult, outcome: str | None, fault: str | None) -> bool:
    from harness.studies.v2.transcript import cell_outcome

    if fault is not None and result.fault != fault:
        return False
    if outcome is None:
        return True
    if outcome in ("premature_unsupported_termination", "clean_false_continuation"):
        return bool(getattr(result, outcome))
    if outcome == "recovery_event":
        return result.recovery_event
    if outcome == "stuck":
        return result.terminal == "stuck"
    return cell_outcome(result) == outcome


@click.command("cells")
@click.argument("store", type=click.Path(path_type=Path, file_okay=False))
@click.option("--pipeline", type=click.Choice(POLICIES), default=None, help="Only this pipeline.")
@click.option(
    "--outcome",
    type=click.Choice(_OUTCOMES),
    default=None,
    help="Only cells that ended so (stuck includes recoverable_stuck) or carry that flag.",
)
@click.option("--fault", default=None, help="Only cells of tasks assigned this fault (e.g. F3).")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def v2_cells_cmd(
    store: Path, pipeline: str | None, outcome: str | None, fault: str | None, as_json: bool
) -> None:
    """List committed cell ids with their outcome, to find the cells worth reading.

    Exit 2 when the store is tampered or a record is not a V2 cell result.
    """
    from harness.studies.v2.transcript import cell_outcome

    view = read_v2_store(store)
    rows = []
    for record in view.cells:
        result = decode_cell(record)
        if pipeline is not None and result.policy != pipeline:
            continue
        if not _matches(result, outcome, fault):
            continue
        rows.append(
            {
                "cell_id": result.cell_id,
                "row_index": record.row_index,
                "pipeline": result.policy,
                "checkpoint": result.checkpoint,
                "fault": result.fault,
                "outcome": cell_outcome(result),
                "turns": result.turns,
            }
        )
    if as_json:
        doc = {
            "store": str(store),
            "cells_committed": view.report.cells,
            "schedule_rows": view.report.schedule_rows,
            "matching": rows,
        }
        data = msgspec.json.encode(doc, order="sorted")
        json_out(msgspec.json.format(data, indent=2))
        sys.stdout.flush()
        return
    for row in rows:
        echo(f"{row['cell_id']}  {row['outcome']}  fault {row['fault']}  {row['turns']} turns")
    echo(
        f"{len(rows)} of {view.report.cells} committed cells match "
        f"({view.report.schedule_rows} in the schedule)",
        err=True,
    )
