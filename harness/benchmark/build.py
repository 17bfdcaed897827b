"""The whole generated benchmark: 12 worlds, 72 admitted tasks, the static grid and V2 snapshots.

``build_benchmark()`` generates everything from the world ids alone: each world, one task per
family admitted by both oracles, each task's clean snapshot, and the fault snapshots -

- static grid (worlds 00-07): 48 tasks x (C0 + F1..F8) = 432 snapshots, 36 + 288 held out;
- V2 (worlds 10-13): 24 tasks x (C0 + every one of F1..F8, U1..U3, T1 that applies).

``benchmark()`` caches the result for the process (it is a pure function of the code).
This module lives beside, not inside, the package's ``__init__``: it imports ``harness.faults``,
which itself builds on ``harness.worlds``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import msgspec

from harness.errors import FaultNotApplicableError, UnknownTaskError, UnknownWorldError
from harness.faults import ALL_FAULTS, STATIC_FAULTS, apply_fault
from harness.worlds.admission import build_tasks
from harness.worlds.snapshots import Snapshot, clean_snapshot
from harness.worlds.tasks import Task
from harness.worlds.world import WORLD_IDS, Split, World, generate_world

__all__ = ["Benchmark", "benchmark", "build_benchmark"]


class Benchmark(msgspec.Struct, frozen=True, kw_only=True):
    """Every world, task and snapshot of the benchmark, in canonical order.

    Order: worlds by id; tasks by world then family; snapshots by task then fault.
    """

    worlds: tuple[World, ...]
    tasks: tuple[Task, ...]
    static: tuple[Snapshot, ...]
    v2: tuple[Snapshot, ...]

    def world(self, world_id: str) -> World:
        """One world by id.

        Raises:
            UnknownWorldError: when the benchmark has no such world.
        """
        for world in self.worlds:
            if world.world_id == world_id:
                return world
        raise UnknownWorldError(f"no benchmark world {world_id!r}")

    def task(self, task_id: str) -> Task:
        """One task by id.

        Raises:
            UnknownTaskError: when the benchmark has no such task.
        """
        for task in self.tasks:
            if task.task_id == task_id:
                return task
        raise UnknownTaskError(f"no benchmark task {task_id!r}")

    def snapshot(self, snapshot_id: str) -> Snapshot:
        """One static or V2 snapshot by id.

        Raises:
            UnknownTaskError: when the benchmark has no such snapshot.
        """
        for snapshot in self.snapshots():
            if snapshot.snapshot_id == snapshot_id:
                return snapshot
        raise UnknownTaskError(f"no benchmark snapshot {snapshot_id!r}")

    def snapshots(self) -> Iterator[Snapshot]:
        """All snapshots: the static grid, then V2."""
        yield from self.static
        yield from self.v2

    def tasks_in(self, split: Split) -> tuple[Task, ...]:
        """The tasks of one split, in canonical order."""
        return tuple(t for t in self.tasks if t.split == split)

    def plain_world(self, world_id: str) -> dict[str, Any]:
        """A world as the plain data tools read."""
        return self.world(world_id).to_plain()


def build_benchmark() -> Benchmark:
    """Generate, admit and derive the whole benchmark from scratch (deterministic)."""
    worlds: list[World] = []
    tasks: list[Task] = []
    static: list[Snapshot] = []
    v2: list[Snapshot] = []
    for world_id in WORLD_IDS:
        world = generate_world(world_id)
        plain = world.to_plain()
        worlds.append(world)
        for task in build_tasks(world):
            tasks.append(task)
            clean = clean_snapshot(task, plain)
            if task.split == "v2":
                v2.append(clean)
                for fault in ALL_FAULTS:
                    try:
                        v2.append(apply_fault(fault, clean, task, plain))
                    except FaultNotApplicableError:
                        continue
            else:
                static.append(clean)
                static.extend(apply_fault(f, clean, task, plain) for f in STATIC_FAULTS)
    return Benchmark(worlds=tuple(worlds), tasks=tuple(tasks), static=tuple(static), v2=tuple(v2))


@functools.cache
def benchmark() -> Benchmark:
    """The benchmark, built once per process."""
    return build_benchmark()
