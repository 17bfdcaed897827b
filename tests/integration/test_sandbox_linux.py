"""The Linux backend with real confined children: tiers, calls, limits and every failure kind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import (
    FIXTURE_CATALOG,
    busy_zygote_children,
    project_copy,
    tier,
    weakened_policy,
)
from structlog.testing import capture_logs

from harness.errors import (
    SandboxError,
    SandboxPolicyError,
    SandboxRequestError,
    SandboxUnavailableError,
)
from harness.sandbox import (
    Limits,
    LinuxBackend,
    Outcome,
    kernel_landlock_abi,
    load_linux_policy,
    open_backend,
)
from harness.sandbox._probes import _session_members
from harness.sandbox._runner import child_env, run_child

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the Linux backend needs Linux")

TIERS = [t.name for t in load_linux_policy().policy.tiers]


def _echo(args: Any) -> dict[str, Any]:
    return {"tool_id": "echo", "args": args, "world": {}}


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project copy whose catalog is the misbehaving fixture catalog."""
    return project_copy(tmp_path_factory.mktemp("fixture-project"), catalog=FIXTURE_CATALOG)


@pytest.fixture(scope="module", params=TIERS)
def fixture_backend(request: pytest.FixtureRequest, fixture_root: Path) -> LinuxBackend:
    backend = open_backend(tier=request.param, project_root=fixture_root)
    assert isinstance(backend, LinuxBackend)
    return backend


def test_open_backend_default_is_first_tier_and_logged() -> None:
    with capture_logs() as logs:
        backend = open_backend()
    info = backend.describe()
    assert info.backend == "linux"
    assert info.tier == TIERS[0]
    assert info.landlock_abi == kernel_landlock_abi() >= 3
    assert info.profile_digest == load_linux_policy().digest
    event = next(e for e in logs if e["event"] == "sandbox.backend")
    assert (event["tier"], event["landlock_abi"]) == (info.tier, info.landlock_abi)


@pytest.mark.parametrize("name", TIERS)
def test_call_echo_returns_args_in_every_tier(name: str) -> None:
    backend = open_backend(tier=name)
    args = {"a": [1, 2.5, "é", None, True], "b": {"c": -3}}
    result = backend.call(_echo(args), timeout_s=20)
    assert result.outcome is Outcome.OK, result.error
    assert result.response == args
    assert result.exit_status == 0
    assert result.elapsed_s > 0


def test_call_passes_world_to_catalog(fixture_backend: LinuxBackend) -> None:
    request = {"tool_id": "world_value", "args": {"key": "k"}, "world": {"k": [1, 2]}}
    result = fixture_backend.call(request, timeout_s=20)
    assert result.outcome is Outcome.OK, result.error
    assert result.response == {"status": "ok", "value": [1, 2]}


def test_call_real_catalog_imports_under_confinement() -> None:
    root = open_backend().project_root
    if not (root / "harness" / "tools" / "catalog.py").is_file():
        pytest.skip("harness/tools/catalog.py is not in this tree")
    result = open_backend().call({"tool_id": "no_such_tool", "args": {}, "world": {}}, timeout_s=20)
    # Whatever the catalog answers for an unknown tool, it must have been imported and run.
    assert result.outcome in (Outcome.OK, Outcome.TOOL_ERROR), result.error
    assert "catalog_unavailable" not in result.error


@pytest.mark.parametrize(
    ("tool_id", "args", "outcome", "error"),
    [
        ("exit", {"code": 3}, Outcome.DIED, r"^the child exited with status 3$"),
        ("garbage", {"text": "not json"}, Outcome.GARBAGE, r"^stdout is not one reply object"),
        ("garbage", {"text": '{"ok": true, "resp'}, Outcome.GARBAGE, r"^stdout is not one"),
        ("garbage", {"text": '{"ok": true}'}, Outcome.GARBAGE, r"contradicts"),
        ("garbage", {"text": '{"ok":true,"response":1}{}'}, Outcome.GARBAGE, r"^stdout is"),
        ("garbage", {"text": '{"ok":true,"response":NaN}'}, Outcome.GARBAGE, r"^stdout is"),
        ("raise", {"message": "boom"}, Outcome.TOOL_ERROR, r"^tool_exception: ValueError: boom$"),
        ("nan", {}, Outcome.TOOL_ERROR, r"^unencodable_response: "),
    ],
    ids=[
        "exit-3",
        "not-json",
        "partial-json",
        "reply-without-response",
        "two-objects",
        "nan-literal",
        "tool-raises",
        "nan-response",
    ],
)
def test_call_failure_is_typed(
    fixture_backend: LinuxBackend, tool_id: str, args: Any, outcome: Outcome, error: str
) -> None:
    result = fixture_backend.call({"tool_id": tool_id, "args": args, "world": {}}, timeout_s=20)
    assert result.outcome is outcome
    assert not result
    assert result.response is None
    assert result.elapsed_s > 0
    assert re.search(error, result.error), result.error


def test_call_timeout_kills_and_reports(fixture_backend: LinuxBackend) -> None:
    start = time.monotonic()
    result = fixture_backend.call(
        {"tool_id": "sleep", "args": {"seconds": 30}, "world": {}}, timeout_s=0.5
    )
    assert time.monotonic() - start < 10
    assert result.outcome is Outcome.TIMEOUT
    assert result.exit_status == -9
    assert result.error == "no complete reply within 0.5 s; its process group was killed"


def test_call_reply_over_limit_is_too_large(fixture_root: Path) -> None:
    backend = open_backend(project_root=fixture_root, limits=Limits(max_response_bytes=100_000))
    result = backend.call({"tool_id": "huge", "args": {"chunks": 64}, "world": {}}, timeout_s=20)
    assert result.outcome is Outcome.TOO_LARGE
    assert result.stdout_bytes <= 100_000 + 65536
    assert result.exit_status is not None
    assert result.exit_status < 0


def test_call_stderr_is_kept_as_a_bounded_tail(fixture_root: Path) -> None:
    backend = open_backend(project_root=fixture_root, limits=Limits(max_stderr_bytes=1000))
    request = {"tool_id": "stderr_flood", "args": {"bytes": 500_000}, "world": {}}
    result = backend.call(request, timeout_s=20)
    assert result.outcome is Outcome.OK, result.error
    assert len(result.stderr_tail) <= 1000
    assert result.stderr_tail.endswith("last line of stderr\n")


def test_call_request_over_limit_starts_no_child() -> None:
    backend = open_backend(limits=Limits(max_request_bytes=1000))
    result = backend.call(_echo("x" * 2000), timeout_s=20)
    assert result.outcome is Outcome.REQUEST_TOO_LARGE
    assert result.exit_status is None


@pytest.mark.parametrize(
    ("request_obj", "message"),
    [
        ({"tool_id": "echo", "args": {}}, r"^a tool request needs exactly the keys"),
        ({"tool_id": "echo", "args": {}, "world": {}, "x": 1}, r"^a tool request needs exactly"),
        ({"tool_id": 3, "args": {}, "world": {}}, r"^a tool request's tool_id must be"),
        ({"tool_id": "echo", "args": float("nan"), "world": {}}, r"^the tool request cannot"),
    ],
    ids=["missing-world", "extra-key", "tool-id-not-str", "nan"],
)
def test_call_malformed_request_raises(request_obj: dict[str, Any], message: str) -> None:
    with pytest.raises(SandboxRequestError, match=message):
        open_backend().call(request_obj, timeout_s=20)


def test_child_env_holds_only_the_allowlist() -> None:
    source = {"GEMINI_API_KEY": "k", "HOME": "/root", "LD_LIBRARY_PATH": "/x", "PATH": "/evil"}
    assert child_env(source) == {
        "PATH": "/usr/bin:/bin",
        "LC_ALL": "C.UTF-8",
        "LD_LIBRARY_PATH": "/x",
    }


def test_interpreter_shim_is_refused(tmp_path: Path) -> None:
    shim = tmp_path / "python3"
    shim.write_text('#!/bin/sh\nexec python3 "$@"\n')
    shim.chmod(0o755)
    with pytest.raises(SandboxError, match=r"is a script \(a shim\?\), not a binary$"):
        open_backend(interpreter=shim)


def test_unprovable_tier_refuses_in_one_sentence(tmp_path: Path) -> None:
    def demand_future_abi(policy: dict[str, Any]) -> None:
        policy["landlock"]["min_abi"] = 99

    path = weakened_policy(tmp_path, demand_future_abi)
    with pytest.raises(SandboxUnavailableError) as info:
        open_backend(policy_path=path)
    message = str(info.value)
    assert message.startswith("cannot sandbox tool calls on this machine, no tier")
    assert "older than the policy's minimum 99" in message
    assert "\n" not in message


def test_broken_worker_cannot_open(tmp_path: Path) -> None:
    root = project_copy(tmp_path / "p", worker_text="import sys\nsys.exit(5)\n")
    # The zygote imports the worker first: it fails closed, in one line, naming its status.
    with pytest.raises(
        SandboxUnavailableError, match=r"zygote did not start: it exited with status 5"
    ) as caught:
        open_backend(project_root=root)
    assert "\n" not in str(caught.value)
    with pytest.raises(SandboxUnavailableError, match=r"died: the child exited with status 5"):
        open_backend(project_root=root, spawn=True)


def test_exec_file_runs_confined_and_passes_exit_status(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(
        "import sys\n"
        "print(sys.stdin.read().upper())\n"
        "try:\n"
        "    open('/etc/hostname').read()\n"
        "except PermissionError:\n"
        "    print('denied')\n"
        "sys.exit(7)\n"
    )
    run = open_backend().exec_file(script, stdin=b"hello", timeout_s=20)
    assert (run.exit_status, run.stdout) == (7, b"HELLO\ndenied\n")


def test_runner_timeout_kills_the_whole_process_group() -> None:
    seen: list[int] = []
    start = time.monotonic()
    run = run_child(
        ["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"],
        stdin=b"",
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        timeout_s=0.5,
        max_stdout=1000,
        max_stderr=1000,
        on_exit=seen.append,
    )
    assert run.timed_out
    assert time.monotonic() - start < 10
    (pid,) = seen
    deadline = time.monotonic() + 5
    while _session_members(pid, include_zombies=False) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _session_members(pid, include_zombies=False) == []


def test_runner_does_not_wait_for_descendants_holding_stdout() -> None:
    start = time.monotonic()
    run = run_child(
        ["/bin/sh", "-c", "sleep 60 & echo done"],
        stdin=b"",
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        timeout_s=30,
        max_stdout=1000,
        max_stderr=1000,
    )
    assert time.monotonic() - start < 10
    assert (run.exit_status, run.stdout, run.timed_out) == (0, b"done\n", False)


def _children(pid: str) -> list[str]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += f.read().split()
    return found


def _worker_children() -> list[int]:
    """Pids of the tool children of this process: spawned ones, and those its zygotes forked."""
    found = []
    for pid in _children("self"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"worker.py" in cmdline:
            found.append(int(pid))
        elif b"_zygote.py" in cmdline:
            found += busy_zygote_children(int(pid))
    return found


def test_child_killed_from_outside_is_killed_not_died(fixture_backend: LinuxBackend) -> None:
    """A SIGKILL the harness did not send is KILLED (the loop retries it), never DIED."""
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 20
        while not killed and time.monotonic() < deadline:
            for pid in _worker_children():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.01)

    thread = threading.Thread(target=killer)
    thread.start()
    request = {"tool_id": "sleep", "args": {"seconds": 15}, "world": {}}
    result = fixture_backend.call(request, timeout_s=30)
    thread.join()
    assert killed
    assert result.outcome is Outcome.KILLED, result
    assert result.error == "the child was killed by SIGKILL, a signal the harness did not send"
    assert result.elapsed_s < 15


def _signal_the_call(sig: int, sent: list[int]) -> threading.Thread:
    """Send ``sig`` once to the first tool child that runs a call (its waiting copy, with a
    pid namespace: the process the harness sees), from a thread, as an operator would."""

    def sender() -> None:
        deadline = time.monotonic() + 20
        while not sent and time.monotonic() < deadline:
            for pid in _worker_children()[:1]:
                os.kill(pid, sig)
                sent.append(pid)
            time.sleep(0.01)

    thread = threading.Thread(target=sender)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("sig", "error"),
    [
        (
            signal.SIGSTOP,
            "the child was stopped by a signal the harness did not send; its process group "
            "was killed",
        ),
        (signal.SIGXCPU, "the child was killed by SIGXCPU, a signal the harness did not send"),
    ],
    ids=["SIGSTOP", "SIGXCPU"],
)
def test_child_stopped_or_signalled_from_outside_is_killed(
    fixture_backend: LinuxBackend, sig: int, error: str
) -> None:
    """A stop or a cap's signal the harness did not send (no cap was reached: the tool sleeps)
    is KILLED, which the loop retries and then stops the run on, never a TIMEOUT or a
    resource limit charged to the tool; a stopped child is ended at once, not at its deadline."""
    sent: list[int] = []
    thread = _signal_the_call(sig, sent)
    request = {"tool_id": "sleep", "args": {"seconds": 15}, "world": {}}
    result = fixture_backend.call(request, timeout_s=30)
    thread.join()
    assert sent
    assert result.outcome is Outcome.KILLED, result
    assert result.error == error
    assert result.elapsed_s < 10
    assert not any(_alive(pid) for pid in sent)


def test_a_tool_killing_itself(fixture_backend: LinuxBackend) -> None:
    """Without a pid namespace a self-inflicted SIGKILL is KILLED; as pid 1 of its own pid
    namespace the child cannot kill itself (the kernel drops it) and the tool goes on."""
    result = fixture_backend.call({"tool_id": "kill_self", "args": {}, "world": {}}, timeout_s=20)
    pid_namespace = "pid" in tier(_policy_dict(), fixture_backend.tier)["unshare"]
    if pid_namespace:
        assert result.outcome is Outcome.OK, result
    else:
        assert result.outcome is Outcome.KILLED, result


def _policy_dict() -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(Path(load_linux_policy().path).read_text())
    return policy


def test_runner_missing_program_raises() -> None:
    with pytest.raises(SandboxError, match=r"^cannot start the sandbox child"):
        run_child(
            ["/nonexistent/python"],
            stdin=b"",
            env={},
            cwd="/",
            timeout_s=5,
            max_stdout=10,
            max_stderr=10,
        )


_DENY_AND_OPEN = """
import json, os, sys
from harness.sandbox import _confine
spec = {"deny": sys.argv[1].split(","), "unified_numbers": {}, "enosys": [],
        "deny_process_clone": False, "signal_only_self": [], "self_only": {},
        "deny_commands": {}}
libc = _confine._libc()
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs, as seccomp requires
program = _confine.compile_seccomp(spec, pid=os.getpid()).hex()
_confine._seccomp(libc, {"bpf": program, "pid_sentinel": os.getpid(), "denies_socket": False})
from harness.errors import SandboxUnavailableError
from harness.sandbox import open_backend, run_probes
try:
    backend = open_backend()
except SandboxUnavailableError as e:
    print(json.dumps({"error": str(e)}))
else:
    report = run_probes(backend)
    print(json.dumps({"tier": backend.describe().tier, "ok": report.ok,
                      "allowed": report.allowed()}))
"""


def _open_with_syscalls_denied(names: str) -> dict[str, Any]:
    """Open a backend in a process whose kernel refuses ``names`` (EPERM), as some hosts do."""
    out = subprocess.run(
        [sys.executable, "-c", _DENY_AND_OPEN, names],
        capture_output=True,
        check=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_without_user_namespaces_the_landlock_tier_is_chosen_and_holds() -> None:
    result = _open_with_syscalls_denied("unshare")
    assert result == {"tier": "landlock", "ok": True, "allowed": []}


def test_without_user_namespaces_or_landlock_it_refuses() -> None:
    result = _open_with_syscalls_denied("unshare,landlock_create_ruleset")
    message = result["error"]
    assert message.startswith("cannot sandbox tool calls on this machine, no tier of the Linux")
    assert "Landlock ABI unavailable" in message
    assert (
        "tier 'userns': confine_failed: sandbox: unshare(user,net,mount,ipc,uts,pid) failed"
        in message
    )
    assert "tier 'landlock': confine_failed: sandbox: Landlock (landlock_create_ruleset)" in message


def test_weakened_tier_policy_is_rejected_when_inconsistent(tmp_path: Path) -> None:
    def ro_without_mount_ns(policy: dict[str, Any]) -> None:
        tier(policy, "userns")["unshare"] = ["user", "net"]

    with pytest.raises(SandboxPolicyError, match=r"remounts / read-only without a mount"):
        open_backend(policy_path=weakened_policy(tmp_path, ro_without_mount_ns))


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"
