"""A run killed while its store was being created: resume says so in one line; run starts again.

The state is the one a SIGKILL during ``RunStore.create`` leaves: no store directory, only the
private partial directory beside it (``partial_prefix``), holding part of a genesis. Nothing
was recorded, so nothing - not even whether the run was a pilot - can be resumed from it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.store import verify_store
from harness.store._files import partial_prefix


def _cut_short(store: Path) -> Path:
    partial = store.parent / f"{partial_prefix(store.name)}k9x2"
    partial.mkdir(parents=True)
    (partial / "writer.lock").write_bytes(b"")
    (partial / "study.lock").write_bytes(b"half a lo")
    return partial


@pytest.mark.parametrize("study", ["v2", "static"])
def test_resume_of_a_store_whose_creation_was_cut_short_is_one_line(
    tmp_path: Path, study: str
) -> None:
    store = tmp_path / "run"
    partial = _cut_short(store)
    result = CliRunner().invoke(main, [study, "resume", str(store)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: no store at {store}: the run creating it was cut short before the store "
        "existed (no cell and no attempt were recorded); start that run again"
    ]
    assert not store.exists()  # nothing written
    assert partial.exists()  # nothing removed


def test_store_verify_names_a_creation_cut_short(tmp_path: Path) -> None:
    store = tmp_path / "run"
    _cut_short(store)
    store.mkdir()  # an empty directory where the store was to appear
    result = CliRunner().invoke(main, ["store", "verify", str(store)])
    assert result.exit_code == 2, result.output
    assert "the run creating it was cut short" in result.stderr


def test_an_unrelated_empty_directory_is_not_called_a_creation_cut_short(tmp_path: Path) -> None:
    store = tmp_path / "run"
    store.mkdir()
    result = CliRunner().invoke(main, ["static", "resume", str(store)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: {store} is not a run store (no records.log and no HEAD)"
    ]


def test_running_again_clears_the_leftover_and_finishes(tmp_path: Path) -> None:
    store = tmp_path / "run"
    partial = _cut_short(store)
    result = CliRunner().invoke(
        main, ["-q", "static", "run", "--split", "dev", "--out", str(store)]
    )
    assert result.exit_code == 0, result.output
    assert not partial.exists()
    assert verify_store(store).finalized


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")
def test_a_v2_pilot_cut_short_is_started_again_as_the_pilot(tmp_path: Path) -> None:
    store = tmp_path / "pilot"
    partial = _cut_short(store)
    result = CliRunner().invoke(main, ["-q", "v2", "run", "--store", str(store), "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert not partial.exists()
    report = verify_store(store)
    assert (report.cells, report.schedule_rows, report.finalized) == (2, 2, True)
