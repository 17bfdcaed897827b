"""The Linux zygote for real: every call a fresh child it forked, failing closed when it dies.

Real processes throughout: the zygote is spawned, its children confine themselves with the
pinned tiers, and the tests kill it the way a host would (SIGKILL from outside).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sandbox_support import weakened_policy
from structlog.testing import capture_logs

from harness.cli import main
from harness.errors import SandboxZygoteError
from harness.sandbox import LinuxBackend, Outcome, open_backend

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote is Linux only")

ECHO = {"tool_id": "echo", "args": {"n": 1}, "world": {}}


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if state[state.rfind(")") + 2] == "Z":
            return True
        time.sleep(0.01)
    return False


def _kill_zygote(backend: LinuxBackend) -> int:
    pid = backend.zygote_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    return pid


def test_default_is_the_zygote_and_spawn_has_none() -> None:
    backend = open_backend()
    assert isinstance(backend, LinuxBackend)
    assert backend.describe().mode == "zygote"
    assert backend.zygote_pid() is not None
    spawned = open_backend(spawn=True)
    assert spawned.describe().mode == "spawn"
    assert spawned.zygote_pid() is None
    assert spawned.call(ECHO, timeout_s=20).response == {"n": 1}
    backend.close()
    spawned.close()


def test_every_call_is_a_fresh_child_forked_by_the_zygote(tmp_path: Path) -> None:
    backend = open_backend()
    assert isinstance(backend, LinuxBackend)
    zygote = backend.zygote_pid()
    script = tmp_path / "who.py"
    script.write_text("import os, sys\nprint(os.getppid())\n")
    pids: list[int] = []
    parents: list[str] = []
    for _ in range(3):
        run = backend.exec_file(script, timeout_s=20, on_start=pids.append)
        assert run.exit_status == 0, run.stderr
        parents.append(run.stdout.decode().strip())
    assert len(set(pids)) == 3  # one child per call, never reused
    assert zygote not in pids
    tiers = {t.name: t for t in backend.loaded.policy.tiers}
    tier_has_pid_ns = "pid" in tiers[backend.tier].unshare
    # As pid 1 of its own namespace its parent is outside (0); else the zygote itself.
    assert set(parents) == ({"0"} if tier_has_pid_ns else {str(zygote)})
    backend.close()


def test_calls_from_many_threads_at_once() -> None:
    backend = open_backend()
    results: list[Any] = []

    def one(i: int) -> None:
        request = {"tool_id": "echo", "args": {"i": i}, "world": {}}
        results.append((i, backend.call(request, timeout_s=30)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(i for i, _ in results) == list(range(8))
    assert all(r.outcome is Outcome.OK and r.response == {"i": i} for i, r in results)
    backend.close()


def test_zygote_death_fails_closed_in_one_line() -> None:
    backend = open_backend()
    assert isinstance(backend, LinuxBackend)
    _kill_zygote(backend)
    with pytest.raises(SandboxZygoteError) as caught:
        backend.call(ECHO, timeout_s=20)
    message = str(caught.value)
    assert "the sandbox zygote is gone" in message
    assert "the policy allows no fallback" in message
    assert "\n" not in message
    assert caught.value.exit_code == 75


def test_a_stopped_zygote_fails_closed_as_a_dead_one() -> None:
    """A zygote that stops answering (SIGSTOP from outside) is killed and the call fails
    closed within its own time, as for a zygote that died: never a late call judged on what
    is left of its deadline."""
    backend = open_backend()
    assert isinstance(backend, LinuxBackend)
    pid = backend.zygote_pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    start = time.monotonic()
    with pytest.raises(SandboxZygoteError) as caught:
        backend.call(ECHO, timeout_s=3)
    assert time.monotonic() - start < 6
    message = str(caught.value)
    assert message.startswith("the sandbox zygote stopped answering")
    assert "process state T" in message
    assert "\n" not in message
    assert caught.value.exit_code == 75
    assert _gone(pid)
    backend.close()


def test_a_zygote_stopped_during_a_call_fails_closed(tmp_path: Path) -> None:
    """Stopped while a call runs and still stopped when the call's time is up: the zygote is
    killed and the call fails closed, not judged a tool timeout."""
    backend = open_backend()
    assert isinstance(backend, LinuxBackend)
    pid = backend.zygote_pid()
    assert pid is not None
    script = tmp_path / "nap.py"
    script.write_text("import time\ntime.sleep(1)\nprint('done')\n")

    def stop_soon(_child: int) -> None:
        threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP)).start()

    with pytest.raises(SandboxZygoteError, match="the sandbox zygote stopped answering"):
        backend.exec_file(script, timeout_s=3, on_start=stop_soon)
    assert _gone(pid)
    backend.close()


def test_policy_fallback_spawns_once_the_zygote_is_gone(tmp_path: Path) -> None:
    def allow_spawn(policy: dict[str, Any]) -> None:
        policy["zygote_fallback"] = "spawn"

    backend = open_backend(policy_path=weakened_policy(tmp_path, allow_spawn))
    assert isinstance(backend, LinuxBackend)
    assert backend.describe().mode == "zygote"
    _kill_zygote(backend)
    with capture_logs() as logs:
        result = backend.call(ECHO, timeout_s=20)
    assert result.outcome is Outcome.OK
    assert result.response == {"n": 1}
    assert backend.describe().mode == "spawn"
    assert [entry["event"] for entry in logs] == ["sandbox.zygote_fallback"]


def test_close_ends_the_zygote_and_its_waiting_child() -> None:
    backend = open_backend()
    pid = backend.zygote_pid()
    assert pid is not None
    assert backend.call(ECHO, timeout_s=20)
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    backend.close()
    assert _gone(pid)
    assert all(_gone(int(child)) for child in children)
    assert backend.describe().mode == "spawn"


def test_cli_describe_names_the_mode() -> None:
    zygote = CliRunner().invoke(main, ["sandbox", "describe"])
    spawn = CliRunner().invoke(main, ["sandbox", "describe", "--spawn"])
    assert zygote.exit_code == 0, zygote.output
    assert spawn.exit_code == 0, spawn.output
    assert json.loads(zygote.output)["mode"] == "zygote"
    assert json.loads(spawn.output)["mode"] == "spawn"


def test_cli_exec_spawn_and_zygote_give_the_same_result(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint(sys.stdin.read().upper())\nsys.exit(3)\n")
    data = tmp_path / "in.txt"
    data.write_text("hello")
    for extra in ([], ["--spawn"]):
        result = CliRunner().invoke(
            main, ["sandbox", "exec", str(script), "--input", str(data), *extra]
        )
        assert (result.exit_code, result.stdout) == (3, "HELLO\n"), extra
