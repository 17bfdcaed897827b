"""The comparison of ``scripts/same_outputs.py`` on hand-made output trees (no study is run).

Each tree imitates what the script collects: a study lock, a record log whose genesis binds the
lock's digest and whose records chain, a content-addressed blob naming the lock, a listing and a
digest set sorted by those names, a file size that holds the lock, a run.log and a writer.lock.
Two trees built from two locks must compare equal; any other change must be named.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.canonical import Domain, canonical_bytes, digest_bytes

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "same_outputs.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("same_outputs", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["same_outputs"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


same = _load()


def _lock(files: dict[str, str]) -> bytes:
    tree = {"digest": digest_bytes(Domain.SOURCE_TREE, canonical_bytes(files)), "path": "harness"}
    lock = {
        "files": [{"digest": "blake3:" + "1" * 64, "path": "schedules/v2-config.json"}],
        "schema": "harness.study-lock.v1",
        "trees": [{**tree, "files": files}],
    }
    return json.dumps(lock, indent=2, sort_keys=True).encode()


def _line(domain: Domain, body: dict[str, object]) -> bytes:
    data = canonical_bytes(body)
    return digest_bytes(domain, data).removeprefix("blake3:").encode() + b" " + data


def _build(
    root: Path, lock: bytes, *, answer: int = 42, request: str = "2" * 64, clock: str = "t0"
) -> None:
    lock_digest = digest_bytes(Domain.LOCK, lock)
    (root / "lock").mkdir(parents=True)
    (root / "lock" / "study-lock.json").write_bytes(lock)
    store = root / "v2"
    (store / "blobs").mkdir(parents=True)
    (store / "study.lock").write_bytes(lock)
    preflight = canonical_bytes({"lock_digest": lock_digest, "ok": True})
    response = canonical_bytes({"answer": answer})
    blobs = []
    for data in (preflight, response):
        name = digest_bytes(Domain.BLOB, data)
        blobs.append(name)
        (store / "blobs" / name.removeprefix("blake3:")).write_bytes(data)
    genesis = _line(Domain.STORE_RECORD, {"lock_digest": lock_digest, "prev": None, "seq": 0})
    cell = _line(
        Domain.STORE_RECORD,
        {
            "blobs": sorted(blobs),
            "prev": "blake3:" + genesis[:64].decode(),
            "request": "blake3:" + request,
            "seq": 1,
        },
    )
    (store / "records.log").write_bytes(genesis + b"\n" + cell + b"\n")
    listing = [
        {"path": "blobs/" + b.removeprefix("blake3:"), "size": 10} for b in sorted(blobs)
    ] + [{"path": "study.lock", "size": len(lock)}]
    (root / "bundle.json").write_text(json.dumps({"files": listing}, indent=2))
    (store / "run.log").write_text(json.dumps({"started_utc": clock}, separators=(",", ":")))
    (store / "writer.lock").write_text(f"pid {len(clock)} on host h\n")


BASE = _lock({"harness/a.py": "blake3:" + "a" * 64, "harness/cli.py": "blake3:" + "b" * 64})
MOVED = _lock(
    {"harness/a.py": "blake3:" + "a" * 64, "harness/cli/__init__.py": "blake3:" + "b" * 64}
)


def test_trees_of_two_locks_compare_equal_and_each_digest_is_rederived(tmp_path: Path) -> None:
    _build(tmp_path / "base", BASE, clock="2026-01-01T00:00:00Z")
    _build(tmp_path / "new", MOVED, clock="2026-12-02T18:00:00Z")
    tally, why, notes = same.compare_trees(tmp_path / "base", tmp_path / "new")
    reasons = sorted(set(why.values()))
    assert "the study lock's digest" in reasons
    assert "the lock's harness/ tree digest" in reasons
    assert any(r.startswith("store.record.v1 of v2/records.log") for r in reasons)
    assert any(r.startswith("store.blob.v1 of v2/blobs/") for r in reasons)
    assert tally.lock_copies == 2
    assert tally.left_out == 1  # writer.lock
    assert tally.sizes == 1  # study.lock's size in the listing
    assert notes == [
        "harness/: 2 -> 2 files; 0 changed, 1 only in base, 1 only in new "
        "(1 of them byte-identical moves)"
    ]


def test_a_changed_value_is_named_with_its_place(tmp_path: Path) -> None:
    _build(tmp_path / "base", BASE)
    _build(tmp_path / "new", MOVED, answer=43)
    with pytest.raises(
        same.DiffError, match=r"^v2/blobs/[0-9a-f]{64}\.answer: 42 in base, 43 in new$"
    ):
        same.compare_trees(tmp_path / "base", tmp_path / "new")


def test_a_digest_the_lock_does_not_explain_is_a_difference(tmp_path: Path) -> None:
    # The request digest differs, consistently, but it is no digest of anything compared.
    _build(tmp_path / "base", BASE)
    _build(tmp_path / "new", MOVED, request="3" * 64)
    with pytest.raises(
        same.DiffError, match=r"^digest 2{64} -> 3{64} is not derived from the lock"
    ):
        same.compare_trees(tmp_path / "base", tmp_path / "new")


def test_the_same_lock_gives_byte_identical_trees(tmp_path: Path) -> None:
    _build(tmp_path / "base", BASE)
    _build(tmp_path / "new", BASE)
    tally, why, _ = same.compare_trees(tmp_path / "base", tmp_path / "new")
    assert why == {}
    assert tally.identical == tally.files


def test_a_lock_field_outside_the_source_trees_must_not_differ(tmp_path: Path) -> None:
    other = json.loads(MOVED)
    other["schema"] = "harness.study-lock.v2"
    _build(tmp_path / "base", BASE)
    _build(tmp_path / "new", json.dumps(other, indent=2, sort_keys=True).encode())
    with pytest.raises(
        same.DiffError, match=r"fields other than the source trees differ: \['schema'\]"
    ):
        same.compare_trees(tmp_path / "base", tmp_path / "new")


def test_a_token_standing_for_two_tokens_is_a_difference() -> None:
    mapping = same.Mapping()
    mapping.add(b"a" * 64, b"b" * 64, "one")
    with pytest.raises(same.DiffError, match=r"but for b{64} at one"):
        mapping.add(b"a" * 64, b"c" * 64, "two")
    with pytest.raises(same.DiffError, match="stands for two base tokens"):
        mapping.add(b"d" * 64, b"b" * 64, "three")


def test_only_a_byte_count_holding_the_lock_may_differ_by_its_growth() -> None:
    sizes = same.LockSizes(base=100, new=90)
    assert sizes.explains(b"1000", b"990")
    assert not sizes.explains(b"1000", b"991")
    assert not sizes.explains(b"50", b"40")  # smaller than the lock: it cannot hold it
    assert not sizes.explains(b"7", b"7")
    mapping = same.Mapping()
    assert same.align("f", b"size 1000 of x", b"size 990 of x", mapping, sizes) == 1
    with pytest.raises(same.DiffError, match="f, line 1"):
        same.align("f", b"count 1000 of x", b"count 990 of y", mapping, sizes)
