"""``harness sandbox ...`` through click's CliRunner: output and exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.sandbox import default_seatbelt_profile_path, load_linux_policy
from harness.sandbox._cgroup import TaskCgroup
from harness.sandbox._policy import NO_TASK_CAP
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
    # No user namespace of its own: a cgroup of the call's own caps its tasks where one can be
    # made; otherwise the tier holds no task cap and the probe says so.
    capped = report["backend"]["limits"]["tasks"] is not None
    assert verdicts.pop("threads_300") == ("denied" if capped else "not_applicable")
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
    capped = _host_makes_task_cgroups()
    # No user namespace of its own in this tier: a cgroup of the call's own holds the task cap
    # where one can be made, and describe says which.
    assert info["limits"] == {
        "address_space_bytes": limits.address_space_bytes,
        "cpu_seconds": limits.cpu_seconds,
        "file_size_bytes": limits.file_size_bytes,
        "open_files": limits.open_files,
        "tasks": limits.tasks if capped else None,
    }
    assert info["scopes"] == {"abstract_unix_socket": "landlock", "signal": "landlock"}
    if capped:
        assert info["task_cap"].startswith(
            f"{limits.tasks} (pids.max of a cgroup of the call's own under "
        )
        assert result.stderr == ""
    else:
        assert info["task_cap"] == NO_TASK_CAP
        assert result.stderr == f"warning: tier landlock has no task cap: {NO_TASK_CAP}\n"


def _host_makes_task_cgroups() -> bool:
    made = TaskCgroup.make(4)
    if made is None:
        return False
    made.close()
    return True


_HARNESS = Path(sys.executable).with_name("harness")
_HIDE_CGROUPS = 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"'


def _without_cgroups(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line in a mount namespace of its own where no cgroup file system is
    mounted: a host where no task cgroup can be made, made for real (root only)."""
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _HIDE_CGROUPS, "sh"]
    return subprocess.run(
        [*argv, str(_HARNESS), *args], capture_output=True, text=True, timeout=300, check=False
    )


_needs_mount_namespace = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="hiding the cgroup file system needs root and unshare",
)


@_needs_mount_namespace
def test_a_tier_without_any_task_cap_says_so_in_describe_and_probe() -> None:
    described = _without_cgroups("sandbox", "describe", "--tier", "landlock")
    assert described.returncode == 0, described.stderr
    info = json.loads(described.stdout)
    assert info["limits"]["tasks"] is None
    assert info["task_cap"] == NO_TASK_CAP
    assert NO_TASK_CAP.startswith("none: ")
    assert NO_TASK_CAP.endswith("the userns tier is preferred")
    assert described.stderr.endswith(f"warning: tier landlock has no task cap: {NO_TASK_CAP}\n")
    probed = _without_cgroups("sandbox", "probe", "--tier", "landlock")
    assert probed.returncode == 0, probed.stdout + probed.stderr
    lines = probed.stdout.splitlines()
    assert lines[2] == f"task cap: {NO_TASK_CAP}"
    row = next(line for line in lines if line.startswith("threads_300 "))
    assert row.split()[1] == "not_applicable"
    assert lines[-1] == (
        f"{len(PROBE_NAMES) - 1} of {len(PROBE_NAMES)} probes denied, not applicable here: "
        "threads_300; positive control passed"
    )


@linux_only
def test_a_cgroup_caps_the_tasks_of_a_tier_without_a_user_namespace() -> None:
    if not _host_makes_task_cgroups():
        pytest.skip("this host lets the harness make no task cgroup")
    result = CliRunner().invoke(main, ["sandbox", "probe", "--tier", "landlock"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2].startswith("task cap: 32 (pids.max of a cgroup of the call's own under ")
    row = next(line for line in lines if line.startswith("threads_300 "))
    assert row.split()[1] == "denied"
    assert lines[-1] == f"all {len(PROBE_NAMES)} probes denied; positive control passed"


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
