"""``harness static run``, ``resume`` and ``report``: output, exit codes, one-line errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.resources import default_stores_dir
from harness.studies.runs import default_store_dir
from harness.studies.static.report import REPORT_DIR, REPORT_FILES


@pytest.fixture(scope="module")
def dev_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "dev"
    result = CliRunner().invoke(main, ["static", "run", "--split", "dev", "--out", str(out)])
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert first == (
        f"wrote 1512 decisions on 108 snapshots (108 provider attempts, simulated) to {out}; "
        "108/108 snapshots committed"
    )
    assert re.fullmatch(r"manifest: blake3:[0-9a-f]{64} \(keep this digest elsewhere: .*\)", second)
    return out


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_static_group_keeps_export_and_adds_run_and_report() -> None:
    result = CliRunner().invoke(main, ["static", "--help"])
    assert result.exit_code == 0
    commands = re.findall(r"^  (\w+)\s", result.stdout.split("Commands:")[1], re.MULTILINE)
    assert commands == ["export", "report", "resume", "run"]


def test_static_report_prints_table2_and_h1_and_writes_files(dev_run: Path) -> None:
    result = CliRunner().invoke(main, ["static", "report", str(dev_run)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "| Policy | U/96 | C/12 | S/96 | F1 |"
    assert lines[2:9] == [
        "| Completion | 84 | 0 | 0 | .222 |",
        "| Self-check | 84 | 0 | 0 | .222 |",
        "| Heuristic | 84 | 0 | 0 | .222 |",
        "| Critic core | 84 | 0 | 12 | .222 |",
        lines[6],
        "| Postcondition oracle | 48 | 0 | 0 | .500 |",
        "| ECT | 0 | 0 | 0 | 1.000 |",
    ]
    assert lines[6].startswith("| Full-trace critic (simulated) | ")
    assert lines[-1].startswith(
        "H1 (ECT vs critic core, 12 task clusters): b_ECT = 0, b_critic = 12"
    )
    assert lines[-1].endswith("H1 passed.")
    assert result.stderr.startswith("wrote table2.md, ")
    for name in REPORT_FILES:
        assert (dev_run / REPORT_DIR / name).is_file(), name


def test_static_run_refuses_a_non_empty_directory_and_leaves_it_alone(dev_run: Path) -> None:
    before = _files(dev_run)
    result = CliRunner().invoke(main, ["static", "run", "--split", "dev", "--out", str(dev_run)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"error: {dev_run} already holds a run store; continue it with `harness static resume "
        f"{dev_run}` or choose another --out\n"
    )
    assert _files(dev_run) == before


def test_static_run_refuses_a_file_as_out(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = CliRunner().invoke(main, ["static", "run", "--out", str(target)])
    assert result.exit_code == 2
    assert result.stderr.endswith(
        f"Error: Invalid value for '--out': Directory '{target}' is a file.\n"
    )
    assert target.read_text() == "x"


def test_static_run_default_out_is_a_new_store_under_stores() -> None:
    # Named like V2's stores (the study, then the UTC time); not run here: it would write
    # into the checkout's stores/.
    made = default_store_dir("static-dev", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert made == default_stores_dir() / "static-dev-20260102T030405Z"


def test_static_run_refuses_a_non_empty_directory_that_is_no_store(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("x")
    result = CliRunner().invoke(main, ["static", "run", "--split", "dev", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path} exists and is not empty; a run never writes into one - choose "
        "another --out or remove it\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["x"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--credential-env", "KEY"],
            r"^error: --credential-env applies only to --provider gemini .*\n$",
        ),
        (
            ["run", "--provider", "gemini", "--credential-file", "{tmp}/missing-key"],
            r"^error: .*missing-key.*\n$",
        ),
        (["report", "{tmp}/nowhere"], r"^error: no store at .*nowhere\n$"),
        (["report", "{tmp}"], r"^error: .* is not a run store \(no records\.log and no HEAD\)\n$"),
    ],
    ids=["credential-for-simulated", "gemini-missing-key", "report-missing", "report-empty"],
)
def test_static_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    filled = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = tmp_path / "out"
    if filled[0] == "run":
        filled += ["--split", "dev", "--out", str(out)]
    result = CliRunner().invoke(main, ["static", *filled])
    assert result.exit_code == 2, result.output
    assert re.match(message, result.stderr), result.stderr
    assert result.stdout == ""
    assert not out.exists()  # nothing written for a refused run


def test_static_run_unknown_split_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["static", "run", "--split", "v2"])
    assert result.exit_code == 2
    assert "Invalid value for '--split'" in result.stderr
