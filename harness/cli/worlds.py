"""``harness worlds show``, ``harness tasks list`` and ``harness static export``."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import click
import msgspec

from harness.benchmark.build import benchmark
from harness.canonical import canonical_bytes
from harness.terminal import echo, json_out
from harness.worlds.admission import build_tasks
from harness.worlds.export import export_snapshots
from harness.worlds.world import SPLITS, World, generate_world, world_digest

__all__ = ["WORLD_COMMANDS", "static_group", "tasks_group", "worlds_group"]


def _split_label(world_id: str) -> str:
    for split, ids in SPLITS.items():
        if world_id in ids:
            return split
    return "none (not a benchmark world)"


def _gaps(world: World) -> list[str]:
    out = []
    for site, by_metric in world.values.items():
        for metric, series in by_metric.items():
            missing = [world.periods[i] for i, v in enumerate(series) if v is None]
            if missing:
                out.append(f"{site} {metric}: {', '.join(missing)}")
    return out


@click.group("worlds")
def worlds_group() -> None:
    """Inspect the generated worlds."""


@worlds_group.command("show")
@click.argument("world_id")
@click.option("--json", "as_json", is_flag=True, help="Print the world as the JSON tools read.")
def show_cmd(world_id: str, as_json: bool) -> None:
    """Show world WORLD_ID (two digits): hierarchy, metrics, missing values, tasks."""
    world = generate_world(world_id)
    if as_json:
        json_out(msgspec.json.format(canonical_bytes(world), indent=2))
        return
    split = _split_label(world_id)
    lines = [
        f"world {world_id}  split {split}  {world_digest(world)}",
        f"periods {world.periods[0]}..{world.periods[-1]} ({len(world.periods)})",
        "metrics " + ", ".join(f"{m.name} ({m.unit})" for m in world.metrics),
        "hierarchy:",
    ]
    for region in world.ids("region"):
        lines.append(f"  {region} {world.entities[region].name}")
        for district in world.entities[region].children:
            sites = ", ".join(
                f"{s} {world.entities[s].name}" for s in world.entities[district].children
            )
            lines.append(f"    {district} {world.entities[district].name}: {sites}")
    gaps = _gaps(world)
    lines.append(f"missing values ({sum(g.count(',') + 1 for g in gaps)}):")
    lines.extend(f"  {gap}" for gap in gaps)
    if split in SPLITS:
        lines.append("tasks:")
        for task in build_tasks(world):
            lines.append(f"  {task.task_id}: {task.question}")
    echo("\n".join(lines))


@click.group("tasks")
def tasks_group() -> None:
    """List the admitted benchmark tasks."""


@tasks_group.command("list")
@click.option("--split", type=click.Choice(sorted(SPLITS)), help="Only tasks of this split.")
@click.option("--json", "as_json", is_flag=True, help="Print full tasks (contract, gold) as JSON.")
def list_cmd(split: str | None, as_json: bool) -> None:
    """List tasks: id, split, family, required slots, admitted candidate."""
    tasks = [t for t in benchmark().tasks if split is None or t.split == split]
    if as_json:
        json_out(msgspec.json.format(canonical_bytes(tasks), indent=2))
        return
    for task in tasks:
        slots = ",".join(task.descriptor.required_slots)
        echo(
            f"{task.task_id:<30} {task.split:<8} {task.family:<24} {slots}  "
            f"(candidate {task.admission.attempt})"
        )


@click.group("static")
def static_group() -> None:
    """The static study's snapshot grid (48 tasks x clean + F1..F8)."""


@static_group.command("export")
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="New or empty directory."
)
@click.option(
    "--split",
    type=click.Choice(["all", "dev", "heldout"]),
    default="all",
    show_default=True,
    help="Which static worlds to export.",
)
def export_cmd(out: Path, split: str) -> None:
    """Write one folder per static snapshot, ready for ``harness verify``."""
    snapshots = [s for s in benchmark().static if split in ("all", s.split)]
    count = export_snapshots(snapshots, out)
    echo(f"wrote {count} snapshot folders to {out}")


WORLD_COMMANDS: Final = (worlds_group, tasks_group, static_group)
