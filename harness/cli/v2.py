"""``harness v2``: run, resume and inspect the frozen V2 closed-loop study.

Thin: it resolves paths, calls ``harness.studies.v2.study`` (handing in ``preflight``'s
checks, which the harness does not import) and prints. Expected failures are
``HarnessError``s (a blocked preflight, an existing store, a stop by signal), printed once by
the main CLI with their exit codes. Progress goes to stderr; the final summary to stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click
import msgspec

from harness.cli.provider_options import provider_options, resume_provider_options
from harness.cli.run_options import confirm, pacing_of, pacing_options, yes_option
from harness.environment import session_environments
from harness.errors import StoreInProgressError
from harness.log import verbosity
from harness.providers.selection import ProviderFlags, ProviderSelection
from harness.store import VerifyStatus
from harness.studies.provenance import REQUIRE_ENVIRONMENT_HELP
from harness.studies.runs import default_store_dir
from harness.studies.v2.study import (
    RunOutcome,
    execute,
    read_results,
    status_lines,
    stored_identity,
    summary_rows,
)
from harness.terminal import echo, json_out
from preflight import run_preflight

__all__ = ["v2_group"]


@click.group("v2")
def v2_group() -> None:
    """The frozen V2 closed-loop study (576 cells): run, resume, status."""


_LOCK_HELP = "Study lock the run is bound to (default: schedules/study-lock.json)."


def _max_cells_option(f: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--max-cells",
        "max_cells",
        type=int,
        default=1,
        show_default=True,
        help="Cells in flight at once; records are committed in schedule order whatever it is.",
    )(f)


def _require_environment_option(f: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--require-environment",
        is_flag=True,
        help=REQUIRE_ENVIRONMENT_HELP,
    )(f)


def _echo_outcome(store: Path, outcome: RunOutcome) -> None:
    report = outcome.report
    if outcome.complete:
        echo(f"complete: {report.done} cells, manifest {outcome.manifest}")
        return
    rate = report.committed / report.wall_seconds if report.wall_seconds > 0 else 0.0
    lines = status_lines(store)
    echo(lines[0])  # the store, and the pilot label of a pilot
    echo(lines[1])  # the provider and model
    echo(lines[2])  # the environment that produced it
    if outcome.orphaned_attempts:
        echo(
            f"orphaned attempts from an earlier session: {outcome.orphaned_attempts} "
            "(bound into the first record of this session)"
        )
    echo(
        f"cells: {report.done}/{report.total} committed, {report.committed} this session in "
        f"{report.wall_seconds:.1f} s ({rate:.1f} cells/s)"
    )
    if outcome.manifest is not None:
        echo(
            f"manifest: {outcome.manifest} (keep this digest elsewhere: it reveals a cut or "
            "rewritten store)"
        )
    for line in lines[6:]:
        echo(line)


@v2_group.command("run")
@click.option(
    "--store",
    "store_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="New run store directory (default: stores/v2-<UTC time>). Refused if a store is there.",
)
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), default=None, help=_LOCK_HELP)
@provider_options
@_max_cells_option
@click.option(
    "--limit",
    type=int,
    default=None,
    help="Pilot: only the first K rows of the canonical order (a pilot store, not the study).",
)
@click.option(
    "--cells",
    "cell_patterns",
    multiple=True,
    help="Pilot: only cells whose id matches this glob (repeatable; a pilot store).",
)
@pacing_options
@yes_option
@_require_environment_option
def run_cmd(
    store_dir: Path | None,
    lock_path: Path | None,
    provider: ProviderSelection,
    max_cells: int,
    limit: int | None,
    cell_patterns: tuple[str, ...],
    max_rpm: int | None,
    max_tpm: int | None,
    assume_yes: bool,
    require_environment: bool,
) -> None:
    """Run the whole study into a new store: preflight, 576 cells in order, manifest.

    Ctrl-C or SIGTERM stops after journaling (exit 130); so does the provider circuit breaker
    after consecutive infrastructure failures (exit 75). `harness v2 resume DIR` continues.
    --limit/--cells write a pilot store, labelled everywhere, never the study.
    """
    store = store_dir if store_dir is not None else default_store_dir("v2")
    outcome = execute(
        store,
        resume=False,
        selection=provider,
        preflight=run_preflight,
        lock_path=lock_path,
        show_progress=verbosity() >= 0,
        max_cells=max_cells,
        limit=limit,
        cells=cell_patterns,
        confirm=confirm(assume_yes),
        pacing=pacing_of(max_rpm, max_tpm),
        require_environment=require_environment,
    )
    _echo_outcome(store, outcome)


@v2_group.command("resume")
@click.argument("store_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), default=None, help=_LOCK_HELP)
@resume_provider_options
@_max_cells_option
@pacing_options
@yes_option
@_require_environment_option
def resume_cmd(
    store_dir: Path,
    lock_path: Path | None,
    provider: ProviderFlags,
    max_cells: int,
    max_rpm: int | None,
    max_tpm: int | None,
    assume_yes: bool,
    require_environment: bool,
) -> None:
    """Continue a store from its verified prefix (a torn tail is repaired, never rewritten).

    The provider, model, endpoint and generation config come from the store's genesis; only
    the credential is given again (a gemini store needs --credential-file or --credential-env).
    A flag that contradicts the store is refused. A finalized store: exit 0, nothing written.
    """
    outcome = execute(
        store_dir,
        resume=True,
        selection=provider,
        preflight=run_preflight,
        lock_path=lock_path,
        show_progress=verbosity() >= 0,
        max_cells=max_cells,
        confirm=confirm(assume_yes),
        pacing=pacing_of(max_rpm, max_tpm),
        require_environment=require_environment,
    )
    _echo_outcome(store_dir, outcome)


@v2_group.command("status")
@click.argument("store_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the per-pipeline counts as JSON.")
def status_cmd(store_dir: Path, as_json: bool) -> None:
    """Verification state, committed cells and per-pipeline outcome counts so far.

    Exit 0, or 5 when a live writer holds the store (the counts are its committed snapshot).
    """
    results, view = read_results(store_dir)
    if as_json:
        doc = {
            "store": str(store_dir),
            "status": view.report.status.value,
            "cells": view.report.cells,
            "schedule_rows": view.report.schedule_rows,
            "finalized": view.report.finalized,
            "manifest": view.report.manifest_digest,
            "simulated": any(r.simulated for r in results),
            "pilot": view.pilot,
            "provider": msgspec.to_builtins(stored_identity(view)),
            "environment": msgspec.to_builtins(session_environments(view.genesis, view.journal)),
            "pipelines": summary_rows(results),
        }
        json_out(msgspec.json.format(msgspec.json.encode(doc), indent=2))
    else:
        for line in status_lines(store_dir, read=(results, view)):
            echo(line)
    if view.report.status is VerifyStatus.IN_PROGRESS:
        sys.stdout.flush()
        sys.exit(StoreInProgressError.exit_code)  # status lines are no error: no error line
