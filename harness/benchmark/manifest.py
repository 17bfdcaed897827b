"""The pinned benchmark manifest: every world, task, oracle answer and snapshot with its digest.

``schedules/benchmark-manifest.json`` is committed; ``scripts/pin_benchmark.py`` rewrites it and
a test regenerates the benchmark and compares bytes, so any change to generation, admission, the
adapter or a fault operator shows up as a diff. The manifest lists only digests and gold
labels; it carries no policy decision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from harness.benchmark.build import Benchmark
from harness.canonical import Domain, canonical_bytes, digest
from harness.ect.model import descriptor_digest
from harness.errors import InputError, ManifestMismatchError
from harness.resources import data_path
from harness.worlds.snapshots import FaultId, GoldDecision, snapshot_digest
from harness.worlds.tasks import oracle_digest, task_digest
from harness.worlds.world import Split, split_of, world_digest

__all__ = [
    "MANIFEST_PATH",
    "BenchmarkManifest",
    "SnapshotEntry",
    "TaskEntry",
    "WorldEntry",
    "check_manifest",
    "manifest_bytes",
    "manifest_of",
]

MANIFEST_PATH: Final = data_path("schedules/benchmark-manifest.json")


class _Entry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of manifest rows."""


class WorldEntry(_Entry, frozen=True, kw_only=True):
    """One world and its digest."""

    world_id: str
    split: Split
    digest: str


class TaskEntry(_Entry, frozen=True, kw_only=True):
    """One admitted task: its digests, the admitted candidate and the oracle answer."""

    task_id: str
    world_id: str
    family: str
    split: Split
    admitted_attempt: int
    descriptor_digest: str
    requirements_digest: str
    oracle_digest: str
    task_digest: str
    gold: dict[str, Any]


class SnapshotEntry(_Entry, frozen=True, kw_only=True):
    """One snapshot, its gold label and digest."""

    snapshot_id: str
    task_id: str
    fault: FaultId
    split: Split
    gold_decision: GoldDecision
    digest: str


class BenchmarkManifest(_Entry, frozen=True, kw_only=True):
    """The whole pinned manifest; ``digest`` covers every other field."""

    schema_version: Literal[1] = 1
    worlds: tuple[WorldEntry, ...]
    tasks: tuple[TaskEntry, ...]
    static_snapshots: tuple[SnapshotEntry, ...]
    v2_snapshots: tuple[SnapshotEntry, ...]
    digest: str = ""


def manifest_of(bench: Benchmark) -> BenchmarkManifest:
    """The manifest of a built benchmark."""
    body = BenchmarkManifest(
        worlds=tuple(
            WorldEntry(world_id=w.world_id, split=split_of(w.world_id), digest=world_digest(w))
            for w in bench.worlds
        ),
        tasks=tuple(
            TaskEntry(
                task_id=t.task_id,
                world_id=t.world_id,
                family=t.family,
                split=t.split,
                admitted_attempt=t.admission.attempt,
                descriptor_digest=descriptor_digest(t.descriptor),
                requirements_digest=digest(Domain.REQUIREMENTS, t.requirements),
                oracle_digest=oracle_digest(t.gold),
                task_digest=task_digest(t),
                gold=t.gold,
            )
            for t in bench.tasks
        ),
        static_snapshots=tuple(_snapshot_entry(s) for s in bench.static),
        v2_snapshots=tuple(_snapshot_entry(s) for s in bench.v2),
    )
    return msgspec.structs.replace(body, digest=digest(Domain.MANIFEST, body))


def _snapshot_entry(s: Any) -> SnapshotEntry:
    return SnapshotEntry(
        snapshot_id=s.snapshot_id,
        task_id=s.task_id,
        fault=s.fault,
        split=s.split,
        gold_decision=s.gold_decision,
        digest=snapshot_digest(s),
    )


def manifest_bytes(manifest: BenchmarkManifest) -> bytes:
    """The committed file's bytes: canonical JSON (sorted keys), indented, newline-terminated."""
    return msgspec.json.format(canonical_bytes(manifest), indent=2) + b"\n"


def check_manifest(bench: Benchmark, path: Path = MANIFEST_PATH) -> BenchmarkManifest:
    """Compare the pinned manifest at ``path`` with ``bench``; return the manifest when equal.

    Raises:
        InputError: when the pinned file is missing or unreadable.
        ManifestMismatchError: naming the first world, task or snapshot whose digest differs.
    """
    try:
        pinned_bytes = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read pinned manifest {str(path)!r}: {e.strerror}") from e
    current = manifest_of(bench)
    if pinned_bytes == manifest_bytes(current):
        return current
    try:
        pinned = msgspec.json.decode(pinned_bytes, type=BenchmarkManifest)
    except msgspec.DecodeError as e:
        raise ManifestMismatchError(f"pinned manifest {str(path)!r} is malformed: {e}") from e
    for field in ("worlds", "tasks", "static_snapshots", "v2_snapshots"):
        old, new = getattr(pinned, field), getattr(current, field)
        for before, after in zip(old, new, strict=False):
            if before != after:
                name = next(iter(msgspec.structs.asdict(after).values()))
                raise ManifestMismatchError(
                    f"pinned manifest differs at {field} {name!r}; regenerate it with "
                    "scripts/pin_benchmark.py if the change is intended"
                )
        if len(old) != len(new):
            raise ManifestMismatchError(
                f"pinned manifest lists {len(old)} {field}, the generator {len(new)}"
            )
    raise ManifestMismatchError(
        f"pinned manifest {str(path)!r} differs from the generator (digest {pinned.digest} "
        f"vs {current.digest})"
    )
