"""The canonical V2 schedule: 24 tasks x 2 checkpoints x 4 policies x 3 seeds = 576 rows.

Canonical order (outermost first): seed (1, 2, 3); task, by world (10, 11, 12, 13) then family
(lookup, aggregation, top_k, temporal_comparison, hierarchy_join, missing_data_abstention);
checkpoint (clean, incomplete); policy (critic, controller, full_trace, ect). A run that stops
early thus leaves whole seed replicates behind it, and the four pipelines of one (task,
checkpoint, seed) run back to back.

Fault assignment rule: the task of world index ``w`` (0..3 in world order) and family index
``f`` (0..5 in family order) gets fault number ``(2 f + w) mod 12`` of (F1..F8, U1, U2, U3, T1).
Every fault then falls on exactly two tasks, always of two different families (and worlds), and
on tasks it applies to (U1 needs a parameterised transform; this rule never gives it to an
aggregation or missing-data task). ``assign_faults`` recomputes the table and checks all of it.
The two tasks assigned T1 (the trust-boundary challenge) are the clusters the confirmatory
analysis excludes.

A row is a plain JSON object: index, cell_id, seed, task_id, world_id, family, checkpoint,
policy, fault, primary. The schedule file (``schedules/v2-schedule.json``) is the JSON array of
the rows, one canonical row per line; its digest (``harness.store.schedule_digest``: what the
store's genesis binds, over the canonical bytes of the array) is kept beside it in
``schedules/v2-schedule.digest``. ``canonical_schedule()`` regenerates the rows from the
committed config (preflight compares the file with it). This module builds, encodes and
checks schedules; it runs nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.errors import V2ConfigError, V2ScheduleError
from harness.faults import ALL_FAULTS
from harness.resources import data_path
from harness.store import schedule_digest
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, V2Config, load_config
from harness.studies.v2.outcomes import CheckpointKind, PolicyArm
from harness.worlds.snapshots import FaultId

__all__ = [
    "DEFAULT_DIGEST_PATH",
    "DEFAULT_SCHEDULE_PATH",
    "Row",
    "assign_faults",
    "build_rows",
    "canonical_schedule",
    "cell_id",
    "digest_line",
    "encode_schedule",
    "load_schedule",
    "plain_rows",
]

DEFAULT_SCHEDULE_PATH: Final = "schedules/v2-schedule.json"
DEFAULT_DIGEST_PATH: Final = "schedules/v2-schedule.digest"


class Row(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One schedule row (stored as a plain JSON object)."""

    index: int
    cell_id: str
    seed: int
    task_id: str
    world_id: str
    family: str
    checkpoint: CheckpointKind
    policy: PolicyArm
    fault: str
    primary: bool


def cell_id(task_id: str, checkpoint: str, policy: str, seed: int) -> str:
    """``<task id>.<checkpoint>.<policy>.s<seed>``, e.g. ``w10-lookup.clean.ect.s1``."""
    return f"{task_id}.{checkpoint}.{policy}.s{seed}"


def _task_id(world_id: str, family: str) -> str:
    return f"w{world_id}-{family}"


def assign_faults(worlds: Sequence[str], families: Sequence[str]) -> dict[str, FaultId]:
    """The fault of every task under the study's rule (see the module docstring).

    Raises:
        V2ConfigError: when the grid is not 4 worlds x 6 families, or the rule does not give
            every fault exactly two tasks of two families.
    """
    if len(worlds) != 4 or len(families) != 6:
        raise V2ConfigError(
            f"the fault rule needs 4 worlds x 6 families, got {len(worlds)} x {len(families)}"
        )
    table: dict[str, FaultId] = {}
    for w, world in enumerate(worlds):
        for f, family in enumerate(families):
            table[_task_id(world, family)] = ALL_FAULTS[(2 * f + w) % len(ALL_FAULTS)]
    counts = Counter(table.values())
    for fault in ALL_FAULTS:
        tasks = [t for t, assigned in table.items() if assigned == fault]
        fams = {t.split("-", 1)[1] for t in tasks}
        if counts[fault] != 2 or len(fams) != 2:
            raise V2ConfigError(f"the fault rule gives {fault} to {tasks}, not two families")
    return table


def _check_config(config: V2Config) -> dict[str, FaultId]:
    rule = assign_faults(config.worlds, config.families)
    assignment = config.fault_assignment
    if tuple(assignment.faults) != ALL_FAULTS:
        raise V2ConfigError(f"fault_assignment.faults must be {list(ALL_FAULTS)}")
    if assignment.tasks != rule:
        raise V2ConfigError("fault_assignment.tasks differs from what the stated rule assigns")
    excluded = config.excluded_from_confirmatory
    expected = tuple(t for t, fault in rule.items() if fault in excluded.faults)
    if tuple(excluded.tasks) != expected:
        raise V2ConfigError(
            f"excluded_from_confirmatory.tasks must be {list(expected)} (the tasks assigned "
            f"{', '.join(excluded.faults)})"
        )
    return rule


def build_rows(config: V2Config) -> tuple[Row, ...]:
    """Every row of the schedule, in canonical order.

    Raises:
        V2ConfigError: when the config's fault table or exclusions disagree with the rule.
    """
    table = _check_config(config)
    excluded = set(config.excluded_from_confirmatory.tasks)
    rows: list[Row] = []
    for seed in config.seeds:
        for world in config.worlds:
            for family in config.families:
                task = _task_id(world, family)
                for checkpoint in config.checkpoints:
                    for policy in config.policies:
                        rows.append(
                            Row(
                                index=len(rows),
                                cell_id=cell_id(task, checkpoint, policy, seed),
                                seed=seed,
                                task_id=task,
                                world_id=world,
                                family=family,
                                checkpoint=checkpoint,
                                policy=policy,
                                fault=table[task],
                                primary=task not in excluded,
                            )
                        )
    return tuple(rows)


def plain_rows(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The rows as plain JSON objects (what the store binds)."""
    return [msgspec.to_builtins(row) for row in rows]


def encode_schedule(rows: Sequence[Row]) -> bytes:
    """The schedule file's bytes: a JSON array, one canonical (sorted-key) row per line."""
    lines = [msgspec.json.encode(row, order="sorted") for row in rows]
    return b"[\n" + b",\n".join(lines) + b"\n]\n"


def digest_line(rows: Sequence[Row]) -> bytes:
    """The digest file's bytes: the schedule digest the store binds, and the row count."""
    return f"{schedule_digest(plain_rows(rows))} {len(rows)} rows\n".encode()


def canonical_schedule(config_path: Path | None = None) -> list[dict[str, Any]]:
    """The canonical rows regenerated from the frozen config (default: the committed one).

    Raises:
        V2ConfigError: the config is unreadable or inconsistent with the fault rule.
    """
    path = config_path if config_path is not None else data_path(DEFAULT_CONFIG_PATH)
    config, _ = load_config(path)
    return plain_rows(build_rows(config))


def load_schedule(path: Path, config: V2Config) -> tuple[tuple[Row, ...], list[dict[str, Any]]]:
    """Read the schedule file and return its rows, refusing one ``config`` does not generate.

    Raises:
        V2ScheduleError: the file is missing, unreadable, or not exactly the regenerated
            schedule (regenerate it with scripts/make_v2_schedule.py).
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise V2ScheduleError(f"cannot read the V2 schedule {path}: {e.strerror}") from e
    rows = build_rows(config)
    if data != encode_schedule(rows):
        raise V2ScheduleError(
            f"V2 schedule {path} is not the schedule the study config generates; "
            "run scripts/make_v2_schedule.py"
        )
    return rows, plain_rows(rows)
