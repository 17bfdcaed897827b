"""``harness static run``, ``resume`` and ``report``, added to the existing ``static`` group.

The ``static`` group itself (with ``export``) belongs to the benchmark's command module; this
module only adds the study's commands to it (``add_static_commands``), so all live under one
``harness static``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.provider_options import provider_options, resume_provider_options
from harness.cli.run_options import confirm, pacing_of, pacing_options, yes_option
from harness.errors import StaticStudyError
from harness.log import verbosity
from harness.providers.selection import ProviderFlags, ProviderSelection
from harness.studies.progress import Progress
from harness.studies.provenance import REQUIRE_ENVIRONMENT_HELP
from harness.studies.runs import default_store_dir
from harness.studies.static.records import StudySplit
from harness.studies.static.run import (
    STUDY_SPLITS,
    ProgressFactory,
    RunControls,
    StaticOutcome,
    resume_static,
    run_static,
)
from harness.terminal import echo

__all__ = ["add_static_commands", "report_cmd", "resume_cmd", "run_cmd"]

_LOCK_HELP = "Study lock the store is bound to (default: schedules/study-lock.json)."


def _line(total: int, done: int, priced: bool) -> Progress:
    return Progress(sys.stderr, total=total, done=done, live=True, priced=priced, unit="snapshots")


def _progress() -> ProgressFactory | None:
    # Drawn on a terminal only: off one, the closing summary says it all.
    return _line if verbosity() >= 0 and sys.stderr.isatty() else None


def _controls(max_rpm: int | None, max_tpm: int | None, assume_yes: bool) -> RunControls:
    """V2's cost question, circuit breaker (its frozen K) and pacing, for a static run."""
    from harness.resources import data_path
    from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config

    config, _ = load_config(data_path(DEFAULT_CONFIG_PATH))
    return RunControls(
        breaker_limit=config.circuit_breaker.consecutive_infrastructure_failures,
        confirm=confirm(assume_yes),
        stream=sys.stderr,
        show=verbosity() >= 0,
        pacing=pacing_of(max_rpm, max_tpm),
    )


def _echo(outcome: StaticOutcome) -> None:
    if outcome.complete:
        echo(f"complete: {outcome.done} snapshots, manifest {outcome.manifest}")
        return
    if outcome.orphaned_attempts:
        echo(
            f"orphaned attempts from an earlier session: {outcome.orphaned_attempts} "
            "(bound into the first record of this session)"
        )
    echo(
        f"wrote {outcome.decisions} decisions on {outcome.committed} snapshots "
        f"({outcome.attempts} provider attempts, {outcome.provider}) to {outcome.store}; "
        f"{outcome.done}/{outcome.snapshots} snapshots committed"
    )
    echo(
        f"manifest: {outcome.manifest} (keep this digest elsewhere: it reveals a cut or "
        "rewritten store)"
    )


@click.command("run")
@provider_options
@click.option(
    "--split",
    type=click.Choice(STUDY_SPLITS),
    default="heldout",
    show_default=True,
    help="heldout: the study (36 tasks, 324 snapshots); dev: development (12 tasks).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="New run store directory [default: stores/static-<split>-<UTC time>]. Refused if "
    "it exists and is not empty.",
)
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), default=None, help=_LOCK_HELP)
@pacing_options
@yes_option
@click.option("--require-environment", is_flag=True, help=REQUIRE_ENVIRONMENT_HELP)
def run_cmd(
    provider: ProviderSelection,
    split: StudySplit,
    out: Path | None,
    lock_path: Path | None,
    max_rpm: int | None,
    max_tpm: int | None,
    assume_yes: bool,
    require_environment: bool,
) -> None:
    """Run the seven termination policies and the ECT ablations over the static grid.

    Writes a run store (one record per snapshot holding every policy's decision, the
    provider-attempt journal, raw responses as blobs, the manifest at the end) and prints its
    path. Ctrl-C stops it (exit 130), a provider outage too (exit 75): `harness static resume
    STORE` continues. Tables come from `harness static report STORE`.
    """
    target = out if out is not None else default_store_dir(f"static-{split}")
    outcome = run_static(
        target,
        split=split,
        selection=provider,
        lock_path=lock_path,
        progress=_progress(),
        controls=_controls(max_rpm, max_tpm, assume_yes),
        require_environment=require_environment,
    )
    _echo(outcome)


@click.command("resume")
@click.argument("store_dir", metavar="STORE", type=click.Path(path_type=Path, file_okay=False))
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), default=None, help=_LOCK_HELP)
@resume_provider_options
@pacing_options
@yes_option
@click.option("--require-environment", is_flag=True, help=REQUIRE_ENVIRONMENT_HELP)
def resume_cmd(
    store_dir: Path,
    lock_path: Path | None,
    provider: ProviderFlags,
    max_rpm: int | None,
    max_tpm: int | None,
    assume_yes: bool,
    require_environment: bool,
) -> None:
    """Continue a static store from its verified prefix and finalize it.

    The split, provider, model, endpoint and generation config come from the store's genesis;
    only the credential is given again (a gemini store needs --credential-file or
    --credential-env). A flag that contradicts the store is refused. A finalized store: exit 0,
    nothing written.
    """
    outcome = resume_static(
        store_dir,
        flags=provider,
        lock_path=lock_path,
        progress=_progress(),
        controls=_controls(max_rpm, max_tpm, assume_yes),
        require_environment=require_environment,
    )
    _echo(outcome)


@click.command("report")
@click.argument("store_dir", metavar="STORE", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the report files go (default: STORE/report).",
)
def report_cmd(store_dir: Path, out: Path | None) -> None:
    """Recompute every number from a static store; print Table 2 and the H1 line.

    The store is read through verification: a tampered one is refused (exit 3), an unfinalized
    one is reported as PARTIAL in every file. Writes Table 2 and Table 3 (Markdown, CSV,
    LaTeX, JSON), the secondary endpoints, report.html and ucr.png/.svg/.pdf.
    """
    from harness.studies.static.report import (
        REPORT_DIR,
        REPORT_FILES,
        h1_line,
        partial_line,
        render_table2,
        write_report,
    )

    results = write_report(store_dir, out)
    target = out if out is not None else store_dir / REPORT_DIR
    table = render_table2(results)["md"].split("\n\n", 1)[0]
    partial = partial_line(results)
    if partial is not None:
        echo(partial)
    echo(table.rstrip("\n"))
    echo()
    echo(h1_line(results))
    written = [name for name in REPORT_FILES if (target / name).is_file()]
    echo(f"wrote {', '.join(written)} to {target}", err=True)


def add_static_commands(main: click.Group) -> None:
    """Add ``run``, ``resume`` and ``report`` to ``main``'s existing ``static`` group.

    Raises:
        StaticStudyError: when ``main`` has no ``static`` group to extend (a wiring mistake).
    """
    group = main.commands.get("static")
    if not isinstance(group, click.Group):
        raise StaticStudyError("the CLI has no 'static' command group to add its commands to")
    group.add_command(run_cmd)
    group.add_command(resume_cmd)
    group.add_command(report_cmd)
