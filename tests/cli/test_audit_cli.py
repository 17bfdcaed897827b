"""``harness audit DIR``: text and JSON, exit 0 when clean and 3 when a problem is found."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.store import RunStore

ROWS = [{"cell_id": "a"}, {"cell_id": "b"}]


def _store(root: Path, blob: bytes) -> None:
    with RunStore.create(root, b"lock\n", ROWS) as writer:
        digest = writer.put_blob(blob)
        writer.commit_cell(0, {"cell": 0}, [], blobs=[digest])


def test_audit_cli_clean_store(tmp_path: Path) -> None:
    _store(tmp_path / "run", b"plain bytes")
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("provider: simulated only")
    assert lines[1].startswith("store: ok (NOT_FINALIZED)")
    assert result.stdout.rstrip().endswith("audit passed")
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "run"), "--json"])
    report = json.loads(result.stdout)
    assert report["problems"] == []
    assert report["cells"] == 1


def test_audit_cli_credential_in_store_exits_3(tmp_path: Path) -> None:
    _store(tmp_path / "run", b"key=AIza" + b"x" * 35)
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "run")])
    assert result.exit_code == 3
    assert "credential-shaped string in blobs/" in result.stdout
    assert "AIzaxxx" not in result.stdout


def test_audit_cli_no_store_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert result.output.startswith("error: no store at ")
    assert result.output.count("\n") == 1


def test_audit_and_replay_of_a_store_a_live_writer_holds_is_one_line_exit_5(
    tmp_path: Path,
) -> None:
    store = tmp_path / "live"
    with RunStore.create(store, b"lock\n", [{"cell": 0}, {"cell": 1}]) as writer:
        writer.commit_cell(0, {"row": 0}, [])
        for command in (["audit", str(store)], ["replay", str(store)]):
            result = CliRunner().invoke(main, command)
            assert result.exit_code == 5, result.output
            assert result.stdout == ""
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"error: store {store} is in progress (")
            assert line.endswith(f"holds it); {command[0]} it once the run has stopped")
