"""Hardening of the Linux sandbox against a hostile child: caps, parent death, exec by descriptor.

Real confined children in every tier of the pinned policy (or of a copy changed on purpose):
a call that passes a resource cap is a RESOURCE_LIMIT result and the next call runs; no child
outlives its parent; ``exec_file`` reads its file once and never by path in the child; and a
Landlock ABI without scopes is accepted only where the seccomp filter closes each hole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sandbox_support import (
    FIXTURE_CATALOG,
    busy_zygote_children,
    host_makes_task_cgroups,
    project_copy,
    tier,
    weakened_policy,
)

from harness.cli import main
from harness.errors import SandboxError
from harness.sandbox import LinuxBackend, Outcome, _confine, load_linux_policy, open_backend
from harness.sandbox._policy import instantiate_tier, scopes_closed_by_seccomp

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the Linux backend needs Linux")

TIERS = [t.name for t in load_linux_policy().policy.tiers]
_GIB = 1 << 30


def _policy() -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(Path(load_linux_policy().path).read_text())
    return policy


def _caps_tasks(name: str) -> bool:
    """A tier caps a call's tasks with a user namespace of its own, or else with a cgroup of
    the call's own where this host lets one be made."""
    return "user" in tier(_policy(), name)["unshare"] or host_makes_task_cgroups()


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_copy(tmp_path_factory.mktemp("hardening-project"), catalog=FIXTURE_CATALOG)


@pytest.fixture(scope="module", params=TIERS)
def backend(request: pytest.FixtureRequest, fixture_root: Path) -> LinuxBackend:
    opened = open_backend(tier=request.param, project_root=fixture_root)
    assert isinstance(opened, LinuxBackend)
    return opened


def _call(backend: LinuxBackend, tool_id: str, args: dict[str, Any], timeout_s: float = 60) -> Any:
    return backend.call({"tool_id": tool_id, "args": args, "world": {}}, timeout_s=timeout_s)


def _then_echo_works(backend: LinuxBackend) -> None:
    after = backend.call({"tool_id": "echo", "args": [1], "world": {}}, timeout_s=20)
    assert after.outcome is Outcome.OK
    assert after.response == [1]


# -- resource caps ---------------------------------------------------------------------------


def test_describe_shows_the_policy_limits(backend: LinuxBackend) -> None:
    limits = _policy()["limits"]
    info = backend.describe()
    assert info.limits == {
        **limits,
        "tasks": limits["tasks"] if _caps_tasks(backend.tier) else None,
    }
    assert limits["address_space_bytes"] == _GIB
    assert info.scopes == {"abstract_unix_socket": "landlock", "signal": "landlock"}


def test_sandbox_describe_cli_prints_limits() -> None:
    result = CliRunner().invoke(main, ["sandbox", "describe"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["limits"]["address_space_bytes"] == _GIB
    assert doc["limits"]["tasks"] == _policy()["limits"]["tasks"]


def test_two_gib_of_memory_is_a_resource_refusal(backend: LinuxBackend) -> None:
    result = _call(backend, "hog_memory", {"mib": 2048})
    assert result.outcome is Outcome.RESOURCE_LIMIT, result
    assert "MemoryError" in result.error
    _then_echo_works(backend)


def test_three_hundred_threads_is_a_resource_refusal(backend: LinuxBackend) -> None:
    result = _call(backend, "threads", {"count": 300})
    if not _caps_tasks(backend.tier):
        # No user namespace of its own and no cgroup to be made: this tier holds no task
        # cap, and describe and the probe table say so.
        assert (backend.describe().limits or {"tasks": 0})["tasks"] is None
        assert result.outcome is Outcome.OK, result
        return
    assert result.outcome is Outcome.RESOURCE_LIMIT, result
    assert "can't start new thread" in result.error
    _then_echo_works(backend)


def test_a_huge_memfd_is_refused(backend: LinuxBackend) -> None:
    result = _call(backend, "memfd", {"mib": 4096})
    # memfd_create is denied outright: nothing outside the address-space cap can be filled.
    assert result.outcome is Outcome.TOOL_ERROR, result
    assert "PermissionError" in result.error
    _then_echo_works(backend)


def test_too_many_open_files_is_a_resource_refusal(backend: LinuxBackend) -> None:
    result = _call(backend, "open_files", {"count": 200})
    assert result.outcome is Outcome.RESOURCE_LIMIT, result
    assert "Too many open files" in result.error


def test_a_tool_may_still_act_on_itself(backend: LinuxBackend) -> None:
    result = _call(backend, "own_limits", {})
    assert result.outcome is Outcome.OK, result
    assert result.response["cpus"] >= 1


@pytest.mark.parametrize("tool_id", ["spin", "ignore_xcpu_spin"])
@pytest.mark.parametrize("name", TIERS)
def test_cpu_cap_is_a_resource_refusal(
    tmp_path: Path, fixture_root: Path, name: str, tool_id: str
) -> None:
    def one_second(policy: dict[str, Any]) -> None:
        policy["limits"]["cpu_seconds"] = 1

    weak = open_backend(
        tier=name, project_root=fixture_root, policy_path=weakened_policy(tmp_path, one_second)
    )
    assert isinstance(weak, LinuxBackend)
    result = _call(weak, tool_id, {"seconds": 30}, timeout_s=60)
    assert result.outcome is Outcome.RESOURCE_LIMIT, result
    assert result.elapsed_s < 20


# -- a child never outlives its call ----------------------------------------------------------

_PARENT = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from harness.sandbox import open_backend
backend = open_backend(tier=sys.argv[2], spawn=sys.argv[4] == "spawn")
print("ready", flush=True)
backend.exec_file(Path(sys.argv[3]), timeout_s=120)
"""


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    found = []
    for pid in parents:
        node = pid
        while node > 1 and node != root:
            node = parents.get(node, 0)
        if node == root and pid != root:
            found.append(pid)
    return found


def _is_zygote(pid: int) -> bool:
    """A zygote: a direct child of this process running ``_zygote.py`` (its forks are not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return int(stat[stat.rfind(")") + 2 :].split()[1]) == os.getpid() and b"_zygote.py" in cmdline


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


@pytest.mark.parametrize("mode", ["zygote", "spawn"])
@pytest.mark.parametrize("name", TIERS)
def test_children_die_with_their_parent(tmp_path: Path, name: str, mode: str) -> None:
    """Killing the harness ends its calls: spawned ones by the tie to their parent, forked
    ones because the zygote sees its socket close, kills them and exits (and they are tied
    to the zygote)."""
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(100)\n")
    root = str(open_backend().project_root)
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, root, name, str(sleeper), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert parent.stdout is not None
    assert parent.stdout.readline() == b"ready\n"
    deadline = time.monotonic() + 30
    children: list[int] = []
    expected = (2 if "pid" in tier(_policy(), name)["unshare"] else 1) + (mode == "zygote")
    while len(children) < expected:
        assert time.monotonic() < deadline, "the sandboxed child never started"
        children = [p for p in _descendants(parent.pid) if _alive(p)]
        time.sleep(0.01)
    time.sleep(0.3)  # past confinement: the tie to the parent is in place by now
    parent.kill()
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in children):
        assert time.monotonic() < deadline, f"outlived their parent: {children}"
        time.sleep(0.01)


def test_a_child_whose_parent_is_not_the_one_named_exits_at_once() -> None:
    """The race check: a parent that died before the tie was made is noticed."""
    backend = open_backend()
    argv = backend.argv()
    argv[argv.index("--parent") + 1] = "1"  # not this child's parent
    done = subprocess.run(argv, input=b"", capture_output=True, timeout=30)
    assert done.returncode == 118
    assert done.stdout == b""


def test_timeout_kills_everything_the_call_started(backend: LinuxBackend) -> None:
    started = time.monotonic()
    result = _call(backend, "sleep", {"seconds": 60}, timeout_s=1.0)
    assert result.outcome is Outcome.TIMEOUT
    assert time.monotonic() - started < 10
    zygotes = {p for p in _descendants(os.getpid()) if _is_zygote(p)}
    assert zygotes or backend.zygote_pid() is None
    # A zygote keeps the next call's child waiting (and its pid 1): nothing of this call.
    # Listed after the others, so a child forked meanwhile is among them.
    alive = [p for p in _descendants(os.getpid()) if _alive(p)]
    waiting = {w for z in zygotes for w in _descendants(z)}
    assert [p for p in alive if p not in zygotes | waiting] == []
    assert [busy for z in zygotes for busy in busy_zygote_children(z)] == []


# -- exec by descriptor ------------------------------------------------------------------------


def test_exec_refuses_a_symlink_a_directory_and_a_fifo(tmp_path: Path) -> None:
    backend = open_backend()
    real = tmp_path / "real.py"
    real.write_text("print('ran')\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    with pytest.raises(SandboxError, match=r"is a symbolic link; name the file itself$"):
        backend.exec_file(link, timeout_s=20)
    with pytest.raises(SandboxError, match=r"is not a regular file$"):
        backend.exec_file(fifo, timeout_s=20)  # refused by type, without blocking on the open
    with pytest.raises(SandboxError, match=r"cannot open .*: Is a directory$|not a regular"):
        backend.exec_file(tmp_path, timeout_s=20)
    run = backend.exec_file(real, timeout_s=20)
    assert (run.exit_status, run.stdout) == (0, b"ran\n")


def test_swapping_the_file_for_a_symlink_grants_nothing(tmp_path: Path) -> None:
    """The file is opened once in the parent; the child never resolves its path, and no
    Landlock rule names it, so a swap to a directory link cannot open that tree to it."""
    backend = open_backend()
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    secret = f"swap-secret-{os.getpid()}"
    (secret_dir / "key.txt").write_text(secret)
    script = tmp_path / "swap.py"
    code = (
        "import os, sys, time\n"
        "time.sleep(0.5)  # the parent swaps the path right after the start\n"
        "print('ran')\n"
        f"for p in (sys.argv[0], sys.argv[0] + '/key.txt', {str(secret_dir / 'key.txt')!r}):\n"
        "    try:\n"
        "        print(open(p).read())\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
    )
    script.write_text(code)
    link = tmp_path / "staged-link"

    def swap(_pid: int) -> None:  # after the parent opened the file: the path becomes a link
        link.symlink_to(secret_dir)
        os.replace(link, script)

    run = backend.exec_file(script, timeout_s=20, on_start=swap)
    assert script.is_symlink()
    assert run.stdout.decode().splitlines()[0] == "ran"  # the script itself, via the descriptor
    assert secret.encode() not in run.stdout + run.stderr
    # Named as the link now, the file is refused before anything starts.
    with pytest.raises(SandboxError, match="is a symbolic link; name the file itself"):
        backend.exec_file(script, timeout_s=20)


def test_a_path_flipping_between_file_and_link_never_shows_the_secret(tmp_path: Path) -> None:
    """Whichever state each open lands on (the script runs, or the link is refused), the
    secret behind the link never shows."""
    backend = open_backend()
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    secret = f"swap-secret-{os.getpid()}"
    (secret_dir / "key.txt").write_text(secret)
    script = tmp_path / "swap.py"
    code = (
        "import os, sys\n"
        f"for p in (sys.argv[0], sys.argv[0] + '/key.txt', {str(secret_dir / 'key.txt')!r}):\n"
        "    try:\n"
        "        print(open(p).read())\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
    )
    staged = tmp_path / "staged.py"
    link = tmp_path / "staged-link"
    script.write_text(code)
    stop = threading.Event()

    def swapper() -> None:
        while not stop.is_set():
            staged.write_text(code)
            os.replace(staged, script)
            time.sleep(0.002)
            link.symlink_to(secret_dir)
            os.replace(link, script)
            time.sleep(0.002)

    thread = threading.Thread(target=swapper)
    thread.start()
    ran, refusals = 0, []
    try:
        for _ in range(20):
            try:
                run = backend.exec_file(script, timeout_s=20)
            except SandboxError as e:
                refusals.append(str(e))
                continue
            ran += 1
            assert secret.encode() not in run.stdout + run.stderr
    finally:
        stop.set()
        thread.join()
    assert ran + len(refusals) == 20
    assert all("is a symbolic link; name the file itself" in r for r in refusals)


# -- Landlock scopes on kernels without them ---------------------------------------------------


def test_scopes_closed_by_the_pinned_seccomp_filter() -> None:
    closed = scopes_closed_by_seccomp(load_linux_policy().policy.seccomp)
    assert closed == ("abstract_unix_socket", "signal")


@pytest.mark.parametrize("abi", [4, 5])
def test_abi_without_scopes_is_accepted_only_when_seccomp_closes_them(
    tmp_path: Path, abi: int
) -> None:
    loaded = load_linux_policy()
    interp = Path(sys.executable).resolve()
    root = open_backend().project_root
    held = LinuxBackend(
        loaded=loaded,
        tier="landlock",
        interpreter=interp,
        project_root=root,
        limits=open_backend().limits,
        landlock_abi=abi,
    )
    assert held.describe().scopes == {"abstract_unix_socket": "seccomp", "signal": "seccomp"}

    def no_fcntl_rule(policy: dict[str, Any]) -> None:
        policy["seccomp"]["deny_commands"]["fcntl"] = []

    weak = load_linux_policy(weakened_policy(tmp_path, no_fcntl_rule))
    with pytest.raises(
        _confine.ConfineError,
        match=rf"^Landlock ABI {abi} has no signal scope and the policy's seccomp filter does "
        r"not close the hole$",
    ):
        LinuxBackend(
            loaded=weak,
            tier="landlock",
            interpreter=interp,
            project_root=root,
            limits=open_backend().limits,
            landlock_abi=abi,
        )
    # The child refuses the same way, should a parent ever hand it such a tier.
    spec = instantiate_tier(
        weak.policy, "landlock", interpreter_prefix=str(interp.parent.parent), tool_code="/x"
    )["landlock"]
    assert _confine.missing_scopes(abi, spec) == ["signal"]
    assert _confine.missing_scopes(6, spec) == []


def test_task_cgroups_of_a_harness_killed_outright_are_swept_by_the_next() -> None:
    """A harness killed by SIGKILL cannot remove its calls' cgroups; the next backend made on
    the host removes the empty ones named for a process that is gone, and no other."""
    from harness.sandbox._cgroup import TaskCgroup

    made = TaskCgroup.make(4)
    if made is None:
        pytest.skip("this host lets the harness make no task cgroup")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = made.base.with_name(f"harness-sandbox-{gone.pid}-deadbeef")
    (stale / "4242").mkdir(parents=True)  # a cgroup directory and a call's cgroup in it
    live = made.base  # this process's own: alive, never touched by another's sweep
    again = TaskCgroup.make(4)
    assert again is not None
    assert not stale.exists()
    assert live.is_dir()
    again.close()
    made.close()
    assert not live.exists()
