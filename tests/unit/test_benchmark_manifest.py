"""Structural checks of the pinned benchmark manifest (no policy decision is computed here)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from harness.benchmark.build import benchmark, build_benchmark
from harness.benchmark.manifest import (
    MANIFEST_PATH,
    check_manifest,
    manifest_bytes,
    manifest_of,
)
from harness.canonical import Domain, canonical_bytes, digest
from harness.errors import InputError, ManifestMismatchError
from harness.worlds import HELDOUT_WORLDS, V2_WORLDS, generate_world, world_digest


def test_regenerated_manifest_equals_the_pinned_file() -> None:
    # A fresh build, not the cached one, so the whole generator runs under the test.
    fresh = build_benchmark()
    assert manifest_bytes(manifest_of(fresh)) == MANIFEST_PATH.read_bytes()
    assert check_manifest(fresh).digest == json.loads(MANIFEST_PATH.read_bytes())["digest"]


def test_manifest_pins_worlds_tasks_oracles_and_snapshots() -> None:
    manifest = manifest_of(benchmark())
    assert len(manifest.worlds) == 12
    assert len(manifest.tasks) == 72
    assert len(manifest.static_snapshots) == 432
    assert len(manifest.v2_snapshots) == len(benchmark().v2)
    for world in manifest.worlds:
        assert world.digest == world_digest(generate_world(world.world_id))
    for entry, task in zip(manifest.tasks, benchmark().tasks, strict=True):
        assert entry.oracle_digest == digest(Domain.ORACLE, task.gold)
        assert entry.gold == task.gold
    body = msgspec.structs.replace(manifest, digest="")
    assert manifest.digest == digest(Domain.MANIFEST, body)


def test_split_worlds_in_manifest_are_disjoint() -> None:
    manifest = manifest_of(benchmark())
    by_split: dict[str, set[str]] = {}
    for world in manifest.worlds:
        by_split.setdefault(world.split, set()).add(world.world_id)
    assert by_split == {"dev": {"00", "01"}, "heldout": set(HELDOUT_WORLDS), "v2": set(V2_WORLDS)}
    for entry in manifest.tasks:
        assert entry.world_id in by_split[entry.split]
    static_splits = {e.split for e in manifest.static_snapshots}
    assert static_splits == {"dev", "heldout"}
    assert {e.split for e in manifest.v2_snapshots} == {"v2"}


def test_generation_is_deterministic_across_builds() -> None:
    assert canonical_bytes(build_benchmark()) == canonical_bytes(benchmark())


def test_check_manifest_names_the_entry_that_changed(tmp_path: Path) -> None:
    pinned = json.loads(MANIFEST_PATH.read_bytes())
    pinned["static_snapshots"][5]["digest"] = "blake3:" + "0" * 64
    changed = tmp_path / "manifest.json"
    changed.write_text(json.dumps(pinned))
    target = pinned["static_snapshots"][5]["snapshot_id"]
    with pytest.raises(ManifestMismatchError, match=rf"differs at static_snapshots '{target}'"):
        check_manifest(benchmark(), changed)
    pinned["tasks"][3]["gold"] = {"value": -1}
    changed.write_text(json.dumps(pinned))
    task = pinned["tasks"][3]["task_id"]
    with pytest.raises(ManifestMismatchError, match=rf"differs at tasks '{task}'"):
        check_manifest(benchmark(), changed)


def test_check_manifest_missing_or_malformed_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^cannot read pinned manifest"):
        check_manifest(benchmark(), tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ManifestMismatchError, match=r"is malformed"):
        check_manifest(benchmark(), bad)
