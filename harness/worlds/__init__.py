"""The generated benchmark: seeded worlds, six task families, dual-oracle admission, snapshots.

Public types (msgspec Structs) and builders:

- ``World`` / ``generate_world(id)``: a world from its two-digit id alone.
- ``Task`` (descriptor, trusted ``Requirements``, oracle ``gold``, evidence ``plan``) and
  ``build_tasks(world)`` / ``admit(world, family)``: SQLite and pure-Python oracles must agree.
- ``Snapshot`` (descriptor, contract, trace, ledger, certificate or None, answer, terminal
  message, ``RecoveryState``, gold decision, fault id, split) and ``clean_snapshot(task, world)``;
  fault snapshots come from ``harness.faults.apply_fault``.
- The assembled benchmark (72 tasks, 432 static and the V2 snapshots) is
  ``harness.benchmark.build.benchmark()``; its pinned manifest is ``harness.benchmark.manifest``.
  Those two modules are not imported here because they build on ``harness.faults``.

Nothing here performs I/O except ``export`` (writing snapshot folders) and ``manifest``
(reading the pinned file).
"""

from harness.worlds.admission import MAX_ATTEMPTS, admit, build_tasks, default_oracles
from harness.worlds.families import draw_candidate
from harness.worlds.oracles import BoundOracle, OracleResult, Rejection, python_oracle, sql_oracle
from harness.worlds.snapshots import (
    CLEAN,
    FAULT_IDS,
    FaultId,
    GoldDecision,
    RecoveryState,
    Snapshot,
    SnapshotView,
    answer_message,
    certificate_for,
    clean_snapshot,
    clean_trace,
    find_support,
    run_calls,
    snapshot_digest,
    snapshot_id,
)
from harness.worlds.tasks import (
    FAMILIES,
    Admission,
    CallSpec,
    Candidate,
    EvidenceItem,
    Family,
    SlotPlan,
    Task,
    oracle_digest,
    task_digest,
)
from harness.worlds.world import (
    DEV_WORLDS,
    HELDOUT_WORLDS,
    PERIODS,
    SPLITS,
    STATIC_WORLDS,
    V2_WORLDS,
    WORLD_IDS,
    Entity,
    Metric,
    Split,
    World,
    generate_world,
    split_of,
    world_digest,
)

__all__ = [
    "CLEAN",
    "DEV_WORLDS",
    "FAMILIES",
    "FAULT_IDS",
    "HELDOUT_WORLDS",
    "MAX_ATTEMPTS",
    "PERIODS",
    "SPLITS",
    "STATIC_WORLDS",
    "V2_WORLDS",
    "WORLD_IDS",
    "Admission",
    "BoundOracle",
    "CallSpec",
    "Candidate",
    "Entity",
    "EvidenceItem",
    "Family",
    "FaultId",
    "GoldDecision",
    "Metric",
    "OracleResult",
    "RecoveryState",
    "Rejection",
    "SlotPlan",
    "Snapshot",
    "SnapshotView",
    "Split",
    "Task",
    "World",
    "admit",
    "answer_message",
    "build_tasks",
    "certificate_for",
    "clean_snapshot",
    "clean_trace",
    "default_oracles",
    "draw_candidate",
    "find_support",
    "generate_world",
    "oracle_digest",
    "python_oracle",
    "run_calls",
    "snapshot_digest",
    "snapshot_id",
    "split_of",
    "sql_oracle",
    "task_digest",
    "world_digest",
]
