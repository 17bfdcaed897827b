"""``harness v2 report DIR``: recompute the V2 analysis from a store and write every report file.

Added to the ``v2`` group by ``harness.cli``. Prints ``report.md`` (Table 4 and one line each for
H2, H3 and H4) and writes the Markdown, CSV, LaTeX, JSON and PNG files into ``--out``.
"""

from __future__ import annotations

from pathlib import Path

import click
import msgspec

from harness.canonical import is_digest
from harness.errors import AnchorMismatchError, InputError
from harness.resources import data_path
from harness.studies.v2.config import DEFAULT_CONFIG_PATH
from harness.studies.v2.report import REPORT_DIR, build_report, write_report
from harness.terminal import echo, json_out

__all__ = ["v2_compare_cmd", "v2_report_cmd"]


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
def v2_report_cmd(
    store: Path, config_path: Path | None, out: Path | None, expected: str | None
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
    echo(bundle.files["report.md"].decode(), nl=False)
    echo(f"wrote {len(written)} files to {target}", err=True)


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
