"""Shared by the gate tests: twelve benchmark tasks (two per family) and the scripted
behaviours of ``harness.examples.scripted``."""

from __future__ import annotations

import functools
from typing import Any, Final

from harness.examples.scripted import (
    BEHAVIOURS,
    Behaviour,
    CallAction,
    Script,
    Seen,
    SubmitAction,
    alter,
)
from harness.worlds import Task, build_tasks, generate_world

__all__ = [
    "BEHAVIOURS",
    "WORLDS",
    "Behaviour",
    "CallAction",
    "Script",
    "Seen",
    "SubmitAction",
    "alter",
    "gate_tasks",
    "task_by_id",
    "task_ids",
]

WORLDS: Final = ("00", "01")


@functools.cache
def gate_tasks() -> tuple[tuple[Task, dict[str, Any]], ...]:
    """(task, plain world) for the twelve tasks, world by world, in family order."""
    out: list[tuple[Task, dict[str, Any]]] = []
    for world_id in WORLDS:
        world = generate_world(world_id)
        plain = world.to_plain()
        out.extend((task, plain) for task in build_tasks(world))
    return tuple(out)


def task_ids() -> list[str]:
    """The ids, for parametrisation."""
    return [task.task_id for task, _ in gate_tasks()]


def task_by_id(task_id: str) -> tuple[Task, dict[str, Any]]:
    """One of the twelve."""
    return next(pair for pair in gate_tasks() if pair[0].task_id == task_id)
