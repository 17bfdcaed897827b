"""``harness worlds show``, ``harness tasks list``, ``harness static export``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.worlds import generate_world, world_digest


def test_worlds_show_prints_hierarchy_and_tasks() -> None:
    result = CliRunner().invoke(main, ["worlds", "show", "03"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"world 03  split heldout  {world_digest(generate_world('03'))}"
    assert any(line.startswith("    R1.D1 ") for line in lines)
    assert "  w03-missing_data_abstention: For site" in result.stdout


def test_worlds_show_json_is_the_tool_world() -> None:
    result = CliRunner().invoke(main, ["worlds", "show", "12", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == generate_world("12").to_plain()


def test_worlds_show_non_benchmark_world_has_no_tasks() -> None:
    result = CliRunner().invoke(main, ["worlds", "show", "42"])
    assert result.exit_code == 0
    assert "split none (not a benchmark world)" in result.stdout
    assert "tasks:" not in result.stdout


def test_worlds_show_malformed_id_is_one_line_error() -> None:
    result = CliRunner().invoke(main, ["worlds", "show", "3"])
    assert result.exit_code == 2
    assert result.stderr == "error: world id must be two digits, got '3'\n"
    assert result.stdout == ""


def test_tasks_list_by_split() -> None:
    runner = CliRunner()
    counts = {}
    for split in ("dev", "heldout", "v2"):
        result = runner.invoke(main, ["tasks", "list", "--split", split])
        assert result.exit_code == 0
        rows = result.stdout.splitlines()
        counts[split] = len(rows)
        assert all(f" {split} " in row for row in rows)
    assert counts == {"dev": 12, "heldout": 36, "v2": 24}
    everything = runner.invoke(main, ["tasks", "list"])
    assert len(everything.stdout.splitlines()) == 72
    bad = runner.invoke(main, ["tasks", "list", "--split", "test"])
    assert bad.exit_code == 2


def test_tasks_list_json_carries_contract_and_gold() -> None:
    result = CliRunner().invoke(main, ["tasks", "list", "--split", "dev", "--json"])
    tasks = json.loads(result.stdout)
    assert len(tasks) == 12
    assert {"descriptor", "requirements", "gold", "plan", "question"} <= set(tasks[0])


def test_static_export_writes_432_folders(tmp_path: Path) -> None:
    out = tmp_path / "grid"
    result = CliRunner().invoke(main, ["static", "export", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote 432 snapshot folders to {out}\n"
    folder = out / "w04-top_k.F8"
    assert sorted(p.name for p in folder.iterdir()) == [
        "descriptor.json",
        "gold.json",
        "ledger.json",
        "message.json",
        "requirements.json",
    ]
    assert json.loads((folder / "gold.json").read_text()) == {
        "decision": "continue",
        "fault": "F8",
        "split": "heldout",
    }
    clean = out / "w00-lookup.C0"
    assert "DONE" in json.loads((clean / "message.json").read_text())["text"]
    assert (clean / "certificate.json").exists()


def test_static_export_dev_split_only(tmp_path: Path) -> None:
    out = tmp_path / "dev"
    result = CliRunner().invoke(main, ["static", "export", "--out", str(out), "--split", "dev"])
    assert result.exit_code == 0
    assert len(list(out.iterdir())) == 12 * 9


def test_static_export_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(main, ["static", "export", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == f"error: output directory {str(tmp_path)!r} exists and is not empty\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
