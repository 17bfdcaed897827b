"""``harness preflight``: one line per check, exit 3 when anything blocks the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.lock import DEFAULT_LOCK_PATH, project_root

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox probes need Linux")


def _args(tmp_path: Path, *extra: str) -> list[str]:
    schedule = tmp_path / "schedule.json"
    schedule.write_text('[{"cell_id": "a"}]')
    return [
        "preflight",
        "--lock",
        str(project_root() / DEFAULT_LOCK_PATH),
        "--schedule",
        str(schedule),
        "--store",
        str(tmp_path / "store"),
        *extra,
    ]


def test_preflight_cli_ambient_only_gemini_is_a_failed_check(tmp_path: Path) -> None:
    runner = CliRunner(env={"GEMINI_API_KEY": "AIzaAMBIENT0123456789"})
    result = runner.invoke(main, _args(tmp_path, "--provider", "gemini"))
    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        f"{'ok  ' if line.startswith('ok') else 'FAIL'} {name}"
        for line, name in zip(
            lines,
            ["lock", "schedule", "store", "credential", "generation_config", "sandbox", "provider"],
            strict=True,
        )
    ]
    credential = next(line for line in lines if " credential:" in line)
    assert credential.startswith("FAIL credential: --provider gemini needs exactly one of")
    assert credential.endswith("ambient GEMINI_API_KEY is never used")
    assert "AIzaAMBIENT" not in result.output
    assert "the run is blocked" in result.stderr
    assert "FAIL schedule: " in result.stdout  # a one-row schedule is not the study's


def test_preflight_cli_json_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [*_args(tmp_path), "--json"])
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["schema"] == "harness.preflight-report.v1"
    assert [c["name"] for c in report["checks"]] == [
        "lock",
        "schedule",
        "store",
        "credential",
        "generation_config",
        "sandbox",
        "provider",
    ]
    assert report["provider"] == "simulated"
    assert str(tmp_path) not in result.stdout
