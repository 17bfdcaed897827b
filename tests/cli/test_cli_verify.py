"""``harness verify`` and ``harness schema``: output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from harness.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "harness" / "examples" / "regional-sum"


def _args(directory: Path, *, certificate: bool = True) -> list[str]:
    args = ["verify"]
    for name in ("descriptor", "requirements", "ledger") + (
        ("certificate",) if certificate else ()
    ):
        args += [f"--{name}", str(directory / f"{name}.json")]
    return args


def _copy(tmp_path: Path) -> Path:
    for path in EXAMPLE.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


def test_verify_example_complete_exit_0() -> None:
    result = CliRunner().invoke(main, _args(EXAMPLE))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["decision"] == "complete"


def test_verify_wrong_value_continue_exit_1(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    cert = json.loads((directory / "certificate.json").read_text())
    cert["claims"][0]["value"] = 294
    (directory / "certificate.json").write_text(json.dumps(cert))
    result = CliRunner().invoke(main, _args(directory))
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["reason_codes"] == ["REPLAY_VALUE_MISMATCH"]
    assert out["findings"][0]["path"] == "$.claims[0].value"


def test_verify_without_certificate_continue(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, _args(EXAMPLE, certificate=False))
    assert result.exit_code == 1
    assert "ADAPTER_CERTIFICATE_MISSING" in json.loads(result.stdout)["reason_codes"]


def test_verify_extra_field_continue_exit_1(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    cert = json.loads((directory / "certificate.json").read_text())
    cert["approved_by"] = "me"
    (directory / "certificate.json").write_text(json.dumps(cert))
    result = CliRunner().invoke(main, _args(directory))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reason_codes"] == ["ADAPTER_CERTIFICATE_MALFORMED"]


def test_verify_missing_file_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, _args(tmp_path))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: cannot read descriptor file")


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"truncated": [1, 2', b"\xff\xfe"])
def test_verify_not_json_exit_2(tmp_path: Path, content: bytes) -> None:
    directory = _copy(tmp_path)
    (directory / "certificate.json").write_bytes(content)
    result = CliRunner().invoke(main, _args(directory))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert "certificate file" in result.stderr


@pytest.mark.parametrize("kind", ["certificate", "receipt", "ledger", "requirements", "descriptor"])
def test_schema_prints_json_schema(kind: str) -> None:
    result = CliRunner().invoke(main, ["schema", kind])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$ref"].startswith("#/$defs/")


def test_schema_refuses_extra_fields() -> None:
    schema = json.loads(CliRunner().invoke(main, ["schema", "certificate"]).stdout)
    assert schema["$defs"]["Certificate"]["additionalProperties"] is False


def test_python_dash_m_harness_runs() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "harness", *_args(EXAMPLE)], capture_output=True, check=False
    )
    assert run.returncode == 0
    assert msgspec.json.decode(run.stdout)["decision"] == "complete"


def test_log_json_flag_accepted() -> None:
    result = CliRunner().invoke(main, ["--log-json", *_args(EXAMPLE)])
    assert result.exit_code == 0
