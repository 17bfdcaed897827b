"""``harness store verify|finalize``: output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.store import RunStore, finalize_store

LOCK = b"study lock for cli tests\n"
ROWS = [{"cell": i} for i in range(3)]


def make(root: Path, cells: int) -> None:
    with RunStore.create(root, LOCK, ROWS) as writer:
        for row in range(cells):
            writer.commit_cell(row, {"row": row}, [])


def test_store_cli_verify_intact_but_not_finalized_exit_4(tmp_path: Path) -> None:
    make(tmp_path / "run", 2)
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path / "run")])
    assert result.exit_code == 4, result.output
    assert result.stdout.splitlines()[0] == "status: not finalized (NOT_FINALIZED)"
    assert "records: 3 valid (2 of 3 cells), HEAD claims 3" in result.stdout
    assert "manifest: none (not finalized)" in result.stdout


def test_store_cli_verify_finalized_exit_0(tmp_path: Path) -> None:
    make(tmp_path / "run", 3)
    finalize_store(tmp_path / "run")
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "status: ok (OK)"


def test_store_cli_verify_json(tmp_path: Path) -> None:
    make(tmp_path / "run", 1)
    result = CliRunner().invoke(main, ["store", "verify", "--json", str(tmp_path / "run")])
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert (report["status"], report["code"], report["records"]) == ("ok", "NOT_FINALIZED", 2)


def test_store_cli_verify_torn_exit_1(tmp_path: Path) -> None:
    make(tmp_path / "run", 1)
    with (tmp_path / "run" / "records.log").open("ab") as f:
        f.write(b'0123 {"partial')
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "status: torn (RECORDS_TORN_TAIL)"


def test_store_cli_verify_tamper_exit_3(tmp_path: Path) -> None:
    make(tmp_path / "run", 2)
    log = tmp_path / "run" / "records.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0] + lines[2] + lines[1])
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path / "run")])
    assert result.exit_code == 3
    assert result.stdout.splitlines()[0] == "status: tamper (RECORD_SEQ)"
    assert result.stdout.splitlines()[1].startswith("reason: record 1 (byte ")


def test_store_cli_verify_missing_store_is_one_line_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["store", "verify", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert result.stderr == f"error: no store at {tmp_path / 'none'}\n"


def test_store_cli_finalize_prints_the_manifest_digest(tmp_path: Path) -> None:
    make(tmp_path / "run", 3)
    result = CliRunner().invoke(main, ["store", "finalize", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    digest = result.stdout.strip()
    verified = CliRunner().invoke(main, ["store", "verify", "--json", str(tmp_path / "run")])
    assert json.loads(verified.stdout)["manifest_digest"] == digest


def test_store_cli_finalize_incomplete_is_one_line_exit_2(tmp_path: Path) -> None:
    make(tmp_path / "run", 1)
    result = CliRunner().invoke(
        main, ["store", "finalize", "--expected-cells", "3", str(tmp_path / "run")]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("error: store ")
    run = tmp_path / "run"
    assert result.stderr.endswith(
        f"holds 1 of 3 cells; continue it with its study's resume (`harness v2 resume {run}` "
        f"or `harness static resume {run}`), which finalizes it when complete\n"
    )
    assert result.stderr.count("\n") == 1
