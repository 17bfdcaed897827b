"""Same inputs, same bytes: two simulated ``harness v2 run`` write byte-identical stores.

The two runs differ in everything that is not an input: the working directory they start from,
the store's path and name, the process, the time. Every evidence file (record log, journal,
HEAD, manifest, input copies, every blob including the preflight report kept in the store) must
be byte-identical, so the manifest digest is too. No record carries a timing field: the wall
clock appears only on the console. ``writer.lock`` names its holder's pid; it is not evidence
and never hashed, so it is the one file left out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FullStudy

from harness.store import read_store

EVIDENCE = ("records.log", "journal.log", "HEAD", "MANIFEST", "study.lock", "schedule.json")


def _run(cwd: Path, store: Path, lock: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "v2", "run", "--store", str(store), "--lock", str(lock)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return next(line for line in done.stdout.splitlines() if line.startswith("manifest: "))


def _files(store: Path) -> dict[str, bytes]:
    found = {name: (store / name).read_bytes() for name in EVIDENCE}
    for blob in sorted((store / "blobs").iterdir()):
        found[f"blobs/{blob.name}"] = blob.read_bytes()
    return found


@pytest.mark.slow
def test_store_two_identical_simulated_runs_write_the_same_bytes(
    tmp_path: Path, full_study: FullStudy
) -> None:
    # The first run is the session's full study (started from its own directory, into its own
    # store); the second starts elsewhere, deeper, into a store of another name.
    second_cwd = tmp_path / "b" / "deeper"
    second_cwd.mkdir(parents=True)
    first = full_study.manifest_line
    second = _run(second_cwd, tmp_path / "elsewhere" / "run-two", full_study.lock)
    assert first.split()[1] == second.split()[1]  # the manifest digest
    one, two = _files(full_study.store), _files(tmp_path / "elsewhere" / "run-two")
    assert sorted(one) == sorted(two)
    assert [name for name in one if one[name] != two[name]] == []
    # Every record's blob list is in canonical (sorted, unique) order.
    for cell in read_store(full_study.store).cells:
        assert list(cell.blobs) == sorted(set(cell.blobs))
