"""``harness stores [DIR]``: list the run stores under the default ``stores/`` (or DIR).

With no DIR and no ``stores/`` folder, the current directory's stores are listed.

Thin: ``harness.studies.runs.list_runs`` finds and describes them; this prints a table or JSON.
A missing or unreadable DIR is one line and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec

from harness.errors import InputError
from harness.terminal import echo, escape, json_out

__all__ = ["stores_cmd"]


@click.command("stores")
@click.argument("directory", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def stores_cmd(directory: Path | None, as_json: bool) -> None:
    """List run stores: id, study, provider and model, cells, state, last write (UTC).

    States: in progress, interrupted, finalized, pilot, damaged. With no DIR and no stores/
    folder, lists the current directory. Exit 2 when DIR is not a readable directory.
    """
    from harness.resources import default_stores_dir
    from harness.studies.runs import list_runs

    # Where `v2 run` and `static run` put a store by default, wherever this runs from; with no
    # such folder, the current directory (a user who ran with --store/--out next to them).
    parent = directory if directory is not None else default_stores_dir()
    if directory is None and not parent.is_dir():
        parent = Path.cwd()
    if not parent.is_dir():
        raise InputError(f"{str(parent)!r} is not a directory of run stores")
    try:
        entries = list_runs(parent)
    except OSError as e:
        raise InputError(f"cannot list {str(parent)!r}: {e.strerror}") from e
    if as_json:
        data = msgspec.json.encode({"directory": str(parent), "runs": entries}, order="sorted")
        json_out(msgspec.json.format(data, indent=2))
        sys.stdout.flush()
        return
    if not entries:
        echo(f"no run stores under {parent}")
        return
    header = ("ID", "STUDY", "PROVIDER", "MODEL", "CELLS", "STATE", "LAST WRITE (UTC)")
    # A directory name, a provider or a model name read from a store is anyone's text: one
    # line each, made inert, before the columns are measured.
    rows = [
        tuple(
            escape(str(cell))
            for cell in (
                e.id,
                e.study,
                e.provider,
                e.model,
                f"{e.cells}/{e.expected if e.expected is not None else '?'}",
                e.state,
                e.last_write or "-",
            )
        )
        for e in entries
    ]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
