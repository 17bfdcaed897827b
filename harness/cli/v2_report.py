"""``harness v2 report DIR``: recompute the V2 analysis from a store and write every report file.

Added to the ``v2`` group by ``harness.cli``. Prints ``report.md`` (Table 4 and one line each for
H2, H3 and H4) and writes the Markdown, CSV, LaTeX, JSON and PNG files into ``--out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import click
import msgspec

from harness.canonical import is_digest
from harness.errors import AnchorMismatchError, InputError
from harness.resources import data_path
from harness.studies.v2.config import DEFAULT_CONFIG_PATH
from harness.studies.v2.report import REPORT_DIR, build_report, write_report
from harness.terminal import echo, json_out

__all__ = ["brief_report", "v2_compare_cmd", "v2_report_cmd"]


@click.command("report")
@click.argument("store", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"The frozen study config (default: {DEFAULT_CONFIG_PATH}); it must be the one the "
    "store's study lock covers.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help=f"Where the report files go (default: STORE/{REPORT_DIR}).",
)
@click.option(
    "--expect-manifest",
    "expected",
    metavar="DIGEST",
    default=None,
    help="Refuse (exit 3, nothing written) unless the store is sealed by exactly this manifest "
    "digest (the one published when the run was finalized).",
)
@click.option(
    "--brief",
    is_flag=True,
    help="Print only Table 4, the H2-H4 lines and the page to open (every file is written).",
)
def v2_report_cmd(
    store: Path, config_path: Path | None, out: Path | None, expected: str | None, brief: bool
) -> None:
    """Table 4, H2-H4, strata and paired deltas, recomputed from the store alone."""
    if expected is not None and not is_digest(expected):
        raise InputError(f"--expect-manifest {expected!r} is not a digest `blake3:<64 hex>`")
    config = config_path if config_path is not None else data_path(DEFAULT_CONFIG_PATH)
    bundle = build_report(store, config)
    if expected is not None:
        found = bundle.document.store.manifest_digest
        if found != expected:
            raise AnchorMismatchError(
                f"store {store} is sealed by manifest {found or 'none (not finalized)'}, not "
                f"the expected {expected}: no report written"
            )
    target = out if out is not None else store / REPORT_DIR
    written = write_report(bundle, target)
    markdown = bundle.files["report.md"].decode()
    if brief:
        echo(brief_report(markdown))
        echo(f"wrote {len(written)} files to {target}; the whole report, every cell's")
        echo("transcript included, is one page:")
        echo(f"open {target / 'report.html'}")
        return
    echo(markdown, nl=False)
    echo(f"wrote {len(written)} files to {target}", err=True)


_BRIEF: Final = ("## Table 4", "## Hypotheses")


def brief_report(markdown: str) -> str:
    """The sections of ``report.md`` a first screen shows: Table 4 and the hypotheses (H2-H4,
    or the line saying a pilot gives none), up to the next section."""
    lines = markdown.splitlines()
    if _BRIEF[0] not in lines:
        return markdown
    start = lines.index(_BRIEF[0])
    end = next(
        (
            i
            for i in range(start, len(lines))
            if lines[i].startswith("## ") and lines[i] not in _BRIEF
        ),
        len(lines),
    )
    return "\n".join(lines[start:end]).rstrip() + "\n"


@click.command("compare")
@click.argument("store_a", type=click.Path(path_type=Path, file_okay=False))
@click.argument("store_b", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"The frozen study config (default: {DEFAULT_CONFIG_PATH}); both stores must be locked "
    "to it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def v2_compare_cmd(store_a: Path, store_b: Path, config_path: Path | None, as_json: bool) -> None:
    """Two runs side by side: both Table 4s and paired deltas A - B by task cluster."""
    from harness.studies.v2.compare import compare_stores, render_comparison

    config = config_path if config_path is not None else data_path(DEFAULT_CONFIG_PATH)
    comparison = compare_stores(store_a, store_b, config)
    if as_json:
        encoded = msgspec.json.format(msgspec.json.encode(comparison), indent=2)
        json_out(encoded)
        return
    echo(render_comparison(comparison), nl=False)
