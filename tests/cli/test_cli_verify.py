"""``harness verify`` and ``harness schema``: output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result

from harness import ect
from harness.cli import main
from harness.ect import MAX_INPUT_BYTES

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


def test_schema_of_the_decision_lists_every_reason_code() -> None:
    from harness.ect import ReasonCode

    schema = json.loads(CliRunner().invoke(main, ["schema", "decision"]).stdout)
    assert sorted(schema["$defs"]["ReasonCode"]["enum"]) == sorted(
        code.value for code in ReasonCode
    )


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


def _one_line_exit_2(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


UNUSABLE = {
    "deep-nesting": b"[" * 100_000 + b"]" * 100_000,
    "deep-objects": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "invalid-utf8": b'{"task_id": "\xff\xfe"}',
    "duplicate-key": b'{"task_id": "a", "task_id": "b"}',
    "nan-literal": b'{"value": NaN}',
    "not-json": b"{not json",
    "empty": b"",
}


@pytest.mark.parametrize("name", ["descriptor", "requirements", "ledger", "certificate", "answer"])
@pytest.mark.parametrize("content", list(UNUSABLE), ids=list(UNUSABLE))
def test_verify_undecodable_input_exit_2(tmp_path: Path, name: str, content: str) -> None:
    directory = _copy(tmp_path)
    (directory / "answer.json").write_text('{"total_visits": 293, "busiest_site": "site-a"}')
    (directory / f"{name}.json").write_bytes(UNUSABLE[content])
    args = [*_args(directory), "--answer", str(directory / "answer.json")]
    line = _one_line_exit_2(CliRunner().invoke(main, args))
    assert line.startswith(f"error: {name} file ")


@pytest.mark.parametrize("name", ["descriptor", "certificate", "answer"])
def test_verify_input_over_the_size_limit_exit_2(tmp_path: Path, name: str) -> None:
    directory = _copy(tmp_path)
    (directory / "answer.json").write_text("{}")
    (directory / f"{name}.json").write_bytes(b" " * MAX_INPUT_BYTES + b"{}")
    args = [*_args(directory), "--answer", str(directory / "answer.json")]
    line = _one_line_exit_2(CliRunner().invoke(main, args))
    assert line.endswith(f"is larger than the {MAX_INPUT_BYTES}-byte input limit")


@pytest.mark.parametrize(
    ("slot", "given"),
    [
        ("descriptor", "certificate"),
        ("requirements", "descriptor"),
        ("ledger", "requirements"),
        ("descriptor", "ledger"),
    ],
)
def test_verify_trusted_input_of_the_wrong_kind_exit_2(
    tmp_path: Path, slot: str, given: str
) -> None:
    directory = _copy(tmp_path)
    (directory / f"{slot}.json").write_bytes((EXAMPLE / f"{given}.json").read_bytes())
    line = _one_line_exit_2(CliRunner().invoke(main, _args(directory)))
    assert line.startswith(f"error: {slot} file ")
    assert f"is not a usable {slot}" in line


def test_verify_deep_nesting_in_a_real_process_exit_2(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    (directory / "descriptor.json").write_bytes(UNUSABLE["deep-nesting"])
    run = subprocess.run(
        [sys.executable, "-m", "harness", *_args(directory)], capture_output=True, check=False
    )
    assert run.returncode == 2
    assert run.stdout == b""
    assert b"Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def _answer(tmp_path: Path, answer: object) -> list[str]:
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer))
    return [*_args(EXAMPLE), "--answer", str(path)]


def test_verify_certified_answer_complete_exit_0(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, _answer(tmp_path, {"total_visits": 293, "busiest_site": "site-a"})
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["decision"] == "complete"


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ({"total_visits": 290, "busiest_site": "site-a"}, "REPLAY_ANSWER_MISMATCH"),
        ({"total_visits": "293", "busiest_site": "site-a"}, "REPLAY_ANSWER_MISMATCH"),
        ({"total_visits": 293}, "COVERAGE_ANSWER_SLOT"),
        ({"total_visits": 293, "busiest_site": "site-a", "x": 1}, "COVERAGE_ANSWER_SLOT"),
        ([293, "site-a"], "ADAPTER_ANSWER_MALFORMED"),
    ],
    ids=["altered-value", "string-for-int", "missing-slot", "extra-slot", "not-an-object"],
)
def test_verify_answer_not_the_certified_one_continue_exit_1(
    tmp_path: Path, answer: object, code: str
) -> None:
    result = CliRunner().invoke(main, _answer(tmp_path, answer))
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["reason_codes"] == [code]


def test_verify_without_answer_says_the_answer_was_not_checked() -> None:
    result = CliRunner().invoke(main, _args(EXAMPLE))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["decision"] == "complete"
    assert out["answer_checked"] is False
    assert result.stderr.strip().splitlines() == ["complete; answer: not checked (pass --answer)"]


def test_verify_with_answer_says_it_was_checked(tmp_path: Path) -> None:
    ok = CliRunner().invoke(
        main, _answer(tmp_path, {"total_visits": 293.0, "busiest_site": "site-a"})
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["answer_checked"] is True
    assert "not checked" not in ok.stderr
    wrong = CliRunner().invoke(
        main, _answer(tmp_path, {"total_visits": 294, "busiest_site": "site-a"})
    )
    assert wrong.exit_code == 1
    assert json.loads(wrong.stdout)["answer_checked"] is True
    assert "not checked" not in wrong.stderr


def test_the_audited_forgery_is_refused_by_the_command(tmp_path: Path) -> None:
    # Two receipts of one call, response and path (r1: 120, r1b: 500); the certificate cites
    # the forged copy and re-binds the ledger digest.
    directory = _copy(tmp_path)
    ledger = json.loads((directory / "ledger.json").read_text())
    cert = json.loads((directory / "certificate.json").read_text())
    forged = {**ledger["receipts"][0], "receipt_id": "r1b", "value": 500}
    forged["value_hash"] = ect.value_hash(500)
    ledger["receipts"].append(forged)
    receipts = msgspec.json.decode(json.dumps(ledger["receipts"]), type=tuple[ect.Receipt, ...])
    cert["ledger_digest"] = ect.ledger_digest(receipts)
    for claim in cert["claims"]:
        claim["evidence"] = ["r1b", "r2", "r3"]
    cert["claims"][0]["value"] = 500 + 75 + 98
    (directory / "ledger.json").write_text(json.dumps(ledger))
    (directory / "certificate.json").write_text(json.dumps(cert))
    result = CliRunner().invoke(main, _args(directory))
    assert result.exit_code == 1, result.output
    assert "COVERAGE_CONFLICTING_RECEIPTS" in json.loads(result.stdout)["reason_codes"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1" + "0" * 4300, "an integer has more than 4300 digits"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("1e400", "Number out of range"),
    ],
    ids=["too-many-digits", "too-deep", "beyond-binary64"],
)
def test_a_receipt_value_beyond_the_limits_is_unusable_input(
    tmp_path: Path, value: str, problem: str
) -> None:
    directory = _copy(tmp_path)
    text = (directory / "ledger.json").read_text()
    assert '"value": 98' in text or '"value":98' in text
    text = text.replace('"value": 98', f'"value": {value}').replace(
        '"value":98', f'"value":{value}'
    )
    (directory / "ledger.json").write_text(text)
    result = CliRunner().invoke(main, _args(directory))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ledger file ")
    assert problem in lines[0]
