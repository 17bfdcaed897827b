"""``harness static run`` and ``harness static report``, added to the existing ``static`` group.

The ``static`` group itself (with ``export``) belongs to the benchmark's command module; this
module only adds the study's two commands to it (``add_static_commands``), so both live under
one ``harness static``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from harness.errors import ProviderSelectionError, StaticStudyError
from harness.providers.config import default_generation_config
from harness.providers.selection import ProviderSelection, provider_options
from harness.studies.static.run import STUDY_SPLITS, Progress, StudySplit, default_out, run_static

__all__ = ["add_static_commands", "report_cmd", "run_cmd"]


@contextmanager
def _bar(length: int) -> Iterator[Progress]:
    with click.progressbar(
        length=length, label="static study", file=sys.stderr, show_pos=True
    ) as bar:
        yield bar


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
    help="New or empty directory for the records "
    "[default: stores/static-<split>-<provider>-<config digest>].",
)
def run_cmd(provider: ProviderSelection, split: StudySplit, out: Path | None) -> None:
    """Run the seven termination policies and the ECT ablations over the static grid.

    Writes decisions.jsonl (one record per policy and snapshot), attempts.jsonl, blobs/ and
    run.json into the output directory, then prints its path. Tables come from
    ``harness static report DIR``.
    """
    if provider.planner is not None:
        # The static study has no planner: its snapshots are fixed, only critics are asked.
        raise ProviderSelectionError("--planner applies only to harness v2 run")
    target = out if out is not None else default_out(split, provider, default_generation_config())
    info = run_static(target, split=split, selection=provider, progress=_bar)
    click.echo(
        f"wrote {info.records} decisions on {info.snapshots} snapshots "
        f"({info.attempts} provider attempts, {provider.provider.value}) to {target}"
    )


@click.command("report")
@click.argument("run_dir", metavar="DIR", type=click.Path(path_type=Path))
def report_cmd(run_dir: Path) -> None:
    """Recompute every number from a run's records; print Table 2 and the H1 line.

    Writes Table 2 and Table 3 (Markdown, CSV, LaTeX, JSON), the secondary endpoints and
    ucr.png into DIR.
    """
    from harness.studies.static.report import REPORT_FILES, h1_line, render_table2, write_report

    results = write_report(run_dir)
    table = render_table2(results)["md"].split("\n\n", 1)[0]
    click.echo(table.rstrip("\n"))
    click.echo()
    click.echo(h1_line(results))
    written = [name for name in REPORT_FILES if (run_dir / name).is_file()]
    click.echo(f"wrote {', '.join(written)} to {run_dir}", err=True)


def add_static_commands(main: click.Group) -> None:
    """Add ``run`` and ``report`` to ``main``'s existing ``static`` group.

    Raises:
        StaticStudyError: when ``main`` has no ``static`` group to extend (a wiring mistake).
    """
    group = main.commands.get("static")
    if not isinstance(group, click.Group):
        raise StaticStudyError("the CLI has no 'static' command group to add run and report to")
    group.add_command(run_cmd)
    group.add_command(report_cmd)
