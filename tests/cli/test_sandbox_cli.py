"""``harness sandbox ...`` through click's CliRunner: output and exit codes."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.sandbox import default_seatbelt_profile_path, load_linux_policy
from harness.sandbox._probes import PROBE_NAMES

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the Linux backend needs Linux")


@linux_only
def test_probe_prints_table_and_exits_zero() -> None:
    result = CliRunner().invoke(main, ["sandbox", "probe"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("backend linux, tier userns, Landlock ABI ")
    assert lines[1].endswith(load_linux_policy().digest)
    rows = {line.split()[0]: line.split()[1] for line in lines[4:] if line and "  " in line}
    assert rows["positive_control"] == "passed"
    assert all(rows[name] == "denied" for name in PROBE_NAMES)
    assert lines[-1] == f"all {len(PROBE_NAMES)} probes denied; positive control passed"


@linux_only
def test_probe_json_and_store_dir(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["sandbox", "probe", "--tier", "landlock", "--json", "--store-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["backend"]["tier"] == "landlock"
    verdicts = {p["name"]: p["verdict"] for p in report["probes"]}
    # The landlock tier holds no task cap (no user namespace of its own) and says so.
    assert verdicts.pop("threads_300") == "not_applicable"
    assert set(verdicts.values()) == {"denied"}
    assert list(tmp_path.iterdir()) == []


@linux_only
def test_probe_weakened_policy_exits_one(tmp_path: Path) -> None:
    policy = json.loads(Path(load_linux_policy().path).read_text())
    for t in policy["tiers"]:
        t["seccomp"] = False
    path = tmp_path / "weak.json"
    path.write_text(json.dumps(policy))
    result = CliRunner().invoke(main, ["sandbox", "probe", "--policy", str(path)])
    assert result.exit_code == 1
    assert "NOT CONFINED: positive control passed; not denied: " in result.stdout
    assert "unix_socket_path" in result.stdout.splitlines()[-1]
    assert "unix_socket_path      allowed" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sandbox", "probe", "--tier", "nope"], r"^error: no tier 'nope' in the Linux sandbox"),
        (["sandbox", "probe", "--store-dir", "/nonexistent/store"], r"^error: the store dir"),
        (["sandbox", "exec", "/nonexistent.py"], r"^error: cannot read Python file"),
    ],
    ids=["unknown-tier", "missing-store", "missing-file"],
)
@linux_only
def test_bad_input_is_one_line_exit_two(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.match(message, result.stderr), result.stderr


@linux_only
def test_exec_passes_output_input_and_status(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint(sys.stdin.read()[::-1])\nsys.exit(4)\n")
    data = tmp_path / "in.txt"
    data.write_text("abc")
    result = CliRunner().invoke(main, ["sandbox", "exec", str(script), "--input", str(data)])
    assert (result.exit_code, result.stdout) == (4, "cba\n")


@linux_only
def test_exec_timeout_exits_124(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import time\ntime.sleep(30)\n")
    result = CliRunner().invoke(main, ["sandbox", "exec", str(script), "--timeout", "0.3"])
    assert result.exit_code == 124
    assert "its process group was killed" in result.stderr


@linux_only
def test_exec_refuses_a_symlink_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    link = tmp_path / "link.py"
    link.symlink_to(script)
    result = CliRunner().invoke(main, ["sandbox", "exec", str(link)])
    assert result.exit_code == 2
    assert result.stdout == ""
    last = result.stderr.splitlines()[-1]  # after the backend's log line
    assert last == f"error: {str(link)!r} is a symbolic link; name the file itself"
    assert "Traceback" not in result.stderr


@linux_only
def test_describe_prints_backend_facts() -> None:
    result = CliRunner().invoke(main, ["sandbox", "describe", "--tier", "landlock"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert (info["backend"], info["tier"]) == ("linux", "landlock")
    assert info["profile_digest"] == load_linux_policy().digest
    assert info["landlock_abi"] >= 3
    limits = load_linux_policy().policy.limits
    # No user namespace of its own in this tier: no task cap, and describe says so.
    assert info["limits"] == {
        "address_space_bytes": limits.address_space_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "file_size_bytes": limits.file_size_bytes,
        "open_files": limits.open_files,
        "tasks": None,
    }
    assert info["scopes"] == {"abstract_unix_socket": "landlock", "signal": "landlock"}
    assert info["task_cap"].startswith("none: this tier cannot cap a call's threads")
    assert info["task_cap"].endswith("the userns tier is preferred")
    assert result.stderr == f"warning: tier landlock has no task cap: {info['task_cap']}\n"


@linux_only
def test_probe_table_of_a_tier_without_task_cap_says_so() -> None:
    result = CliRunner().invoke(main, ["sandbox", "probe", "--tier", "landlock"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2].startswith("task cap: none: this tier cannot cap")
    assert lines[-1] == (
        f"{len(PROBE_NAMES) - 1} of {len(PROBE_NAMES)} probes denied, not applicable here: "
        "threads_300; positive control passed"
    )


def test_check_profile_ok_and_broken(tmp_path: Path) -> None:
    ok = CliRunner().invoke(main, ["sandbox", "check-profile"])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.splitlines()[-1] == "deny-default shape: ok"
    broken = tmp_path / "p.sb"
    broken.write_text(default_seatbelt_profile_path().read_text() + "(allow network*)\n")
    bad = CliRunner().invoke(main, ["sandbox", "check-profile", str(broken)])
    assert bad.exit_code == 1
    assert "operation network* is not allowed" in bad.stdout


@linux_only
def test_unprovable_sandbox_refuses_with_exit_three(tmp_path: Path) -> None:
    policy = json.loads(Path(load_linux_policy().path).read_text())
    policy["landlock"]["min_abi"] = 99
    path = tmp_path / "future.json"
    path.write_text(json.dumps(policy))
    result = CliRunner().invoke(main, ["sandbox", "probe", "--policy", str(path)])
    assert result.exit_code == 3
    assert result.stdout == ""
    # Log lines name each tier's failure; the error itself is one line, the last.
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [result.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith("error: cannot sandbox tool calls on this machine, no tier of the")
