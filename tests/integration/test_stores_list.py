"""``harness stores [DIR]``: every run under a folder with its study, provider, cells and state.

Real stores written by the real writer under the project's study lock: a finalized full-size
store (576 synthetic cells, the frozen schedule's length), an interrupted one, a pilot (a
finalized subset of the schedule), a damaged one, a store a writer still holds, and static runs
finished and unfinished.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from v2_report_support import make_result, synthetic_store

from harness.cli import main
from harness.lock import build_lock, encode_lock
from harness.resources import default_stores_dir
from harness.store import RunStore, VerifyStatus
from harness.studies.runs import list_runs
from harness.studies.v2.outcomes import CellResult

_OUTCOME_KEYS = [
    (t, c, p)
    for t in ("w90-a", "w90-b", "w90-t")
    for c in ("clean", "incomplete")
    for p in ("critic", "controller", "full_trace", "ect")
]


def _full() -> list[CellResult]:
    return [make_result(t, c, p, seed) for seed in range(1, 25) for (t, c, p) in _OUTCOME_KEYS]


def _rows(results: list[CellResult]) -> list[dict[str, object]]:
    return [{"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in results]


def _interrupted(root: Path, commit: int) -> None:
    results = _full()[:30]
    with RunStore.create(root, encode_lock(build_lock()), _rows(results)) as writer:
        for index, result in enumerate(results[:commit]):
            writer.commit_cell(index, msgspec.to_builtins(result), [])


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("stores")
    synthetic_store(base / "a-finalized", results=_full())
    _interrupted(base / "b-interrupted", commit=7)
    synthetic_store(base / "c-pilot")
    synthetic_store(base / "d-damaged")
    log = base / "d-damaged" / "records.log"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"seed":1', b'"seed":3', 1)
    log.write_bytes(b"".join(lines))
    (base / "e-not-a-run").mkdir()
    (base / "e-not-a-run" / "notes.txt").write_text("hello")
    return base


def test_stores_lists_every_run_with_its_state(folder: Path) -> None:
    got = [
        (e.id, e.study, e.provider, e.model, e.cells, e.expected, e.state)
        for e in list_runs(folder)
    ]
    assert got == [
        ("a-finalized", "v2", "simulated", "unknown", 576, 576, "finalized"),
        ("b-interrupted", "v2", "simulated", "unknown", 7, 30, "pilot"),
        ("c-pilot", "v2", "simulated", "unknown", 24, 24, "pilot"),
        ("d-damaged", "v2", "simulated", "unknown", 2, 24, "damaged"),
    ]


def test_stores_interrupted_full_schedule(tmp_path: Path) -> None:
    results = _full()
    with RunStore.create(tmp_path / "run", encode_lock(build_lock()), _rows(results)) as writer:
        writer.commit_cell(0, msgspec.to_builtins(results[0]), [])
    (entry,) = list_runs(tmp_path)
    assert (entry.cells, entry.expected, entry.state) == (1, 576, "interrupted")
    assert entry.reason.startswith("OK") or entry.reason.startswith("NOT_FINALIZED")


@pytest.mark.skipif(
    not hasattr(VerifyStatus, "IN_PROGRESS"), reason="this store API does not report live writers"
)
def test_stores_reports_a_live_writer_in_progress(tmp_path: Path) -> None:  # pragma: no cover
    results = _full()
    with RunStore.create(tmp_path / "run", encode_lock(build_lock()), _rows(results)) as writer:
        writer.commit_cell(0, msgspec.to_builtins(results[0]), [])
        (entry,) = list_runs(tmp_path)
        assert entry.state == "in progress"


def test_stores_cli_table_and_json(folder: Path) -> None:
    result = CliRunner().invoke(main, ["stores", str(folder)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "STUDY",
        "PROVIDER",
        "MODEL",
        "CELLS",
        "STATE",
        "LAST",
        "WRITE",
        "(UTC)",
    ]
    assert lines[1].split()[:6] == [
        "a-finalized",
        "v2",
        "simulated",
        "unknown",
        "576/576",
        "finalized",
    ]
    assert len(lines) == 5  # e-not-a-run is no store
    doc = json.loads(CliRunner().invoke(main, ["stores", str(folder), "--json"]).stdout)
    assert doc["directory"] == str(folder)
    first = doc["runs"][0]
    assert first["state"] == "finalized"
    assert first["last_write"].endswith("Z")
    assert first["path"] == str(folder / "a-finalized")
    # The full-size store's report is the study's: no pilot banner; the subset's has one.
    assert "PILOT" not in (folder / "a-finalized" / "report" / "report.md").read_text()
    assert "PILOT" in (folder / "c-pilot" / "report" / "report.md").read_text()


def test_stores_finds_a_static_run(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        main, ["static", "run", "--split", "dev", "--out", str(tmp_path / "st")]
    )
    assert done.exit_code == 0, done.output
    (entry,) = list_runs(tmp_path)
    assert (entry.study, entry.provider, entry.model, entry.state) == (
        "static",
        "simulated",
        "simulated",  # the model word every report file uses
        "finalized",
    )
    assert entry.cells == entry.expected == 108  # one cell per snapshot
    log = tmp_path / "st" / "records.log"
    log.write_bytes(log.read_bytes().replace(b'"decision":"stuck"', b'"decision":"complete"', 1))
    assert list_runs(tmp_path)[0].state == "damaged"


def test_stores_defaults_to_where_runs_put_stores_and_refuses_a_missing_folder(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    here = os.getcwd()
    try:
        os.chdir(tmp_path)  # the default does not depend on where the command runs
        result = runner.invoke(main, ["stores", "--json"])
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["directory"] == str(default_stores_dir())
    missing = tmp_path / "stores"
    result = runner.invoke(main, ["stores", str(missing)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {str(missing)!r} is not a directory of run stores\n"
    missing.mkdir()
    result = runner.invoke(main, ["stores", str(missing)])
    assert (result.exit_code, result.stdout) == (0, f"no run stores under {missing}\n")


def test_stores_skips_a_create_cut_short(tmp_path: Path) -> None:
    partial = tmp_path / ".st.partial-k9x2"
    done = CliRunner().invoke(main, ["static", "run", "--split", "dev", "--out", str(partial)])
    assert done.exit_code == 0, done.output  # a whole store under a partial's name
    assert list_runs(tmp_path) == []


def test_stores_with_no_stores_folder_lists_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "work"
    here.mkdir()
    _interrupted(here / "my-run", 3)
    monkeypatch.setattr("harness.resources.default_stores_dir", lambda: tmp_path / "no-stores")
    monkeypatch.chdir(here)
    result = CliRunner().invoke(main, ["stores", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed["directory"] == str(here)
    assert [run["id"] for run in listed["runs"]] == ["my-run"]
