"""Denial probes against real confined children: every tier holds, as root and as an unprivileged
user; deliberately weakened policies are caught; a broken worker or probe child fails loudly."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
from sandbox_support import project_copy, tier, weakened_policy

from harness.canonical import canonical_bytes
from harness.sandbox import (
    Limits,
    LinuxBackend,
    ProbeReport,
    ProbeVerdict,
    _probes,
    _runner,
    load_linux_policy,
    open_backend,
    render_table,
    run_probes,
)
from harness.sandbox._policy import NO_TASK_CAP
from harness.sandbox._probes import PROBE_NAMES

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the Linux backend needs Linux")

TIERS = [t.name for t in load_linux_policy().policy.tiers]


def _assert_all_denied(report: ProbeReport) -> None:
    assert report.positive_control.verdict is ProbeVerdict.PASSED, report.positive_control
    assert [p.name for p in report.probes] == list(PROBE_NAMES)
    not_denied = {
        p.name: p.ground_truth for p in report.probes if p.verdict is not ProbeVerdict.DENIED
    }
    # Optional targets may be missing on a machine; on this one all exist. A tier without a
    # user namespace of its own holds no task cap, and says so.
    expected = {}
    if report.backend.limits is not None and report.backend.limits["tasks"] is None:
        expected = {"threads_300": f"task cap {NO_TASK_CAP}"}
    assert not_denied == expected, render_table(report)
    assert report.ok
    assert bool(report)


@pytest.mark.parametrize("name", TIERS)
def test_probes_all_denied_as_root(name: str) -> None:
    report = run_probes(open_backend(tier=name))
    assert report.backend.tier == name
    _assert_all_denied(report)


def test_probes_write_into_a_given_store_dir_is_denied(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "records.log").write_bytes(b"record\n")
    report = run_probes(open_backend(), store_dir=store)
    _assert_all_denied(report)
    assert sorted(p.name for p in store.iterdir()) == ["records.log"]
    assert next(p for p in report.probes if p.name == "write_store").target.startswith(str(store))


def _no_net_no_seccomp(policy: dict[str, Any]) -> None:
    t = tier(policy, "userns")
    t["unshare"] = ["user", "mount", "ipc", "uts"]
    t["seccomp"] = False


def _no_seccomp(policy: dict[str, Any]) -> None:
    tier(policy, "landlock")["seccomp"] = False


def _no_landlock(policy: dict[str, Any]) -> None:
    tier(policy, "landlock")["landlock"] = False


def _namespaces_only(policy: dict[str, Any]) -> None:
    t = tier(policy, "userns")
    t["landlock"] = False
    t["seccomp"] = False


@pytest.mark.parametrize(
    ("tier_name", "weaken", "must_be_allowed"),
    [
        ("userns", _no_net_no_seccomp, {"udp_loopback", "unix_socket_path", "spawn_subprocess"}),
        (
            "landlock",
            _no_seccomp,
            {
                "udp_loopback",
                "unix_socket_path",
                "victim_chmod",
                "victim_utime",
                "spawn_subprocess",
            },
        ),
        (
            "landlock",
            _no_landlock,
            {"write_cwd", "write_tmp", "write_store", "victim_modify", "victim_unlink"}
            | {"credential_file"},
        ),
        (
            "userns",
            _namespaces_only,
            # Not signal_other: no process outside its own pid namespace can be named.
            {"unix_socket_path", "credential_file", "spawn_subprocess"},
        ),
    ],
    ids=["no-netns-no-seccomp", "no-seccomp", "no-landlock", "namespaces-only"],
)
def test_probes_catch_a_weakened_policy(
    tmp_path: Path,
    tier_name: str,
    weaken: Callable[[dict[str, Any]], None],
    must_be_allowed: set[str],
) -> None:
    backend = open_backend(tier=tier_name, policy_path=weakened_policy(tmp_path, weaken))
    assert backend.describe().profile_digest != load_linux_policy().digest
    report = run_probes(backend)
    assert report.positive_control.verdict is ProbeVerdict.PASSED
    assert not report.ok
    assert must_be_allowed <= set(report.allowed()), render_table(report)


def test_probes_catch_a_leaky_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = open_backend()
    monkeypatch.setattr(_runner, "CHILD_ENV_ALLOWLIST", ("GEMINI_API_KEY",))
    report = run_probes(backend)
    assert report.allowed() == ["credential_env"]
    row = next(p for p in report.probes if p.name == "credential_env")
    assert row.ground_truth == "the child's output holds GEMINI_API_KEY"


@pytest.mark.parametrize(
    ("worker_text", "why"),
    [
        ("import sys\nsys.exit(9)\n", r"^died: the child exited with status 9$"),
        (
            'import sys\nsys.stdout.write(\'{"ok": true, "response": 1}\')\n',
            r"^the echo control answered 1, not its arguments$",
        ),
        ("print('hello')\n", r"^garbage: stdout is not one reply object"),
    ],
    ids=["exits", "wrong-answer", "garbage"],
)
def test_positive_control_fails_loudly_when_worker_is_broken(
    tmp_path: Path, worker_text: str, why: str
) -> None:
    root = project_copy(tmp_path / "p", worker_text=worker_text)
    real = open_backend()
    assert isinstance(real, LinuxBackend)
    broken = LinuxBackend(
        loaded=real.loaded,
        tier=real.tier,
        interpreter=real.interpreter,
        project_root=root,
        limits=Limits(),
        landlock_abi=real.landlock_abi,
    )
    report = run_probes(broken)
    assert report.positive_control.verdict is ProbeVerdict.FAILED
    assert msgspec.json.decode(canonical_bytes(report.positive_control))["ground_truth"]
    assert re.search(why, report.positive_control.ground_truth)
    assert {p.verdict for p in report.probes} == {ProbeVerdict.INCONCLUSIVE}
    assert not report.ok
    assert "positive_control      failed" in render_table(report)


def test_probe_child_that_does_not_finish_is_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quitter = tmp_path / "quitter.py"
    quitter.write_text("import sys\nsys.exit(0)\n")
    monkeypatch.setattr(_probes, "_PROBE_CHILD", quitter)
    report = run_probes(open_backend())
    assert report.positive_control.verdict is ProbeVerdict.PASSED
    assert {p.verdict for p in report.probes} == {ProbeVerdict.INCONCLUSIVE}
    assert not report.ok


def test_report_table_and_json() -> None:
    report = run_probes(open_backend())
    table = render_table(report).splitlines()
    assert table[0].split() == ["probe", "verdict", "target", "ground", "truth", "child", "saw"]
    assert [line.split()[0] for line in table[2:]] == ["positive_control", *PROBE_NAMES]
    decoded = json.loads(canonical_bytes(report))
    assert decoded["backend"]["landlock_abi"] == report.backend.landlock_abi
    assert len(decoded["probes"]) == len(PROBE_NAMES)


# --- as an unprivileged user -------------------------------------------------------------

_UNPRIVILEGED_UID = 65534
_DEPENDENCIES = ("msgspec", "blake3", "structlog", "typing_extensions")
_DRIVER = """
import json, os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from harness.sandbox import load_linux_policy, open_backend, run_probes
out = {"uid": os.getuid(), "euid": os.geteuid(), "tiers": {}}
for t in load_linux_policy().policy.tiers:
    report = run_probes(open_backend(tier=t.name))
    out["tiers"][t.name] = {
        "control": report.positive_control.verdict.value,
        "verdicts": sorted({p.verdict.value for p in report.probes}),
        "not_applicable": sorted(
            p.name for p in report.probes if p.verdict.value == "not_applicable"
        ),
        "allowed": report.allowed(),
        "ok": report.ok,
    }
print(json.dumps(out))
"""


def _as_unprivileged(argv: list[str]) -> list[str]:
    return [
        "setpriv",
        f"--reuid={_UNPRIVILEGED_UID}",
        f"--regid={_UNPRIVILEGED_UID}",
        "--clear-groups",
        "--inh-caps=-all",
        # setpriv's own exec may still pass permission checks as root; env's exec is the
        # unprivileged user's, so an interpreter it cannot reach fails here instead of
        # silently loading another libpython.
        "/usr/bin/env",
        "--",
        *argv,
    ]


def _unprivileged_interpreter() -> str | None:
    """An interpreter of this Python version that the unprivileged user can run, if any."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (str(Path(sys.executable).resolve()), f"/usr/bin/python{version}"):
        probe = [candidate, "-I", "-S", "-c", f"import sys; assert sys.version[:4] == {version!r}"]
        try:
            done = subprocess.run(_as_unprivileged(probe), capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def world_readable_copy() -> Iterator[Path]:
    """The project and its parent-side dependencies, copied where any user can read them."""
    base = Path(tempfile.mkdtemp(prefix="harness-sandbox-unprivileged-"))
    try:
        base.chmod(0o755)
        project_copy(base / "project")
        deps = base / "deps"
        deps.mkdir()
        for name in _DEPENDENCIES:
            module_file = Path(str(importlib.import_module(name).__file__))
            if module_file.name == "__init__.py":
                shutil.copytree(module_file.parent, deps / name)
            else:
                shutil.copy2(module_file, deps / module_file.name)
        for path in (base, *base.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to an unprivileged user needs root")
def test_probes_all_denied_as_unprivileged_user(world_readable_copy: Path) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed, so no unprivileged user can be run")
    interpreter = _unprivileged_interpreter()
    if interpreter is None:
        pytest.skip(
            f"no Python {sys.version_info.major}.{sys.version_info.minor} interpreter here is "
            f"runnable by uid {_UNPRIVILEGED_UID} (this one lives under a private directory)"
        )
    argv = [
        interpreter,
        "-I",
        "-S",
        "-c",
        _DRIVER,
        str(world_readable_copy / "project"),
        str(world_readable_copy / "deps"),
    ]
    done = subprocess.run(
        _as_unprivileged(argv),
        capture_output=True,
        timeout=180,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert (result["uid"], result["euid"]) == (_UNPRIVILEGED_UID, _UNPRIVILEGED_UID)
    assert set(result["tiers"]) == set(TIERS)
    for name, outcome in result["tiers"].items():
        # The landlock tier has no user namespace of its own, so no task cap (not applicable).
        tasks_capped = "user" in tier(_policy_dict(), name)["unshare"]
        # The zygote is not dumpable, so this user cannot read its /proc files from outside
        # either: its state is judged in the root run (test_probes_all_denied).
        assert outcome == {
            "control": "passed",
            "verdicts": ["denied", "not_applicable"],
            "not_applicable": ["zygote_state"] if tasks_capped else ["threads_300", "zygote_state"],
            "allowed": [],
            "ok": True,
        }, name


def _no_signal_scope(policy: dict[str, Any]) -> None:
    policy["landlock"]["scopes"] = ["abstract_unix_socket"]


def _no_signal_scope_no_seccomp_signal_rule(policy: dict[str, Any]) -> None:
    _no_signal_scope(policy)
    policy["seccomp"]["signal_only_self"] = []


@pytest.mark.parametrize("name", TIERS)
def test_seccomp_alone_keeps_signals_to_itself(tmp_path: Path, name: str) -> None:
    """Without Landlock's signal scope the seccomp rule (the child's own pid patched into the
    compiled filter) still stops signals to others, and without both the probe sees the kill."""
    held = open_backend(tier=name, policy_path=weakened_policy(tmp_path, _no_signal_scope))
    _assert_all_denied(run_probes(held))
    script = tmp_path / "self_signal.py"
    script.write_text(
        "import os\n"
        "os.kill(os.getpid(), 0)\n"
        "try:\n"
        "    os.kill(os.getppid(), 0)\n"
        "except PermissionError:\n"
        "    print('parent: denied')\n"
    )
    run = held.exec_file(script, timeout_s=20)
    assert (run.exit_status, run.stdout) == (0, b"parent: denied\n"), run.stderr
    (tmp_path / "weak").mkdir()
    weak = open_backend(
        tier=name,
        policy_path=weakened_policy(tmp_path / "weak", _no_signal_scope_no_seccomp_signal_rule),
    )
    # Without both, a tier with a pid namespace of its own still cannot name the decoy.
    pid_namespace = (
        "pid" in next(t for t in load_linux_policy().policy.tiers if t.name == name).unshare
    )
    # Without a pid namespace it can also name a concurrent call and the zygote (and kills it).
    assert run_probes(weak).allowed() == (
        [] if pid_namespace else ["signal_other", "signal_sibling", "signal_zygote"]
    )


def _policy_dict() -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(Path(load_linux_policy().path).read_text())
    return policy


_SYSV_AND_WATCH: Final = (
    "shmat", "shmctl", "shmdt", "msgsnd", "msgrcv", "msgctl", "semop", "semtimedop", "semctl",
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
)  # fmt: skip


def _without_sysv_and_watch(policy: dict[str, Any]) -> None:
    """The filter as it was before it denied SysV IPC by id and inotify."""
    deny = policy["seccomp"]["deny"]
    policy["seccomp"]["deny"] = [name for name in deny if name not in _SYSV_AND_WATCH]


def test_landlock_tier_without_the_ipc_and_watch_denials_is_caught(tmp_path: Path) -> None:
    """The landlock tier shares the host's IPC namespace: only seccomp keeps a child from the
    parent's SysV objects (reached by id, no *get call needed) and from watching directories.
    With those denials removed, the probes see the child read, take and remove them."""
    policy = weakened_policy(tmp_path, _without_sysv_and_watch)
    report = run_probes(open_backend(tier="landlock", policy_path=policy))
    assert report.positive_control.verdict is ProbeVerdict.PASSED
    allowed = set(report.allowed())
    assert {"sysv_shm", "sysv_msg", "sysv_sem", "inotify_watch"} <= allowed, render_table(report)
    truths = {p.name: p.ground_truth for p in report.probes}
    assert truths["sysv_shm"] == "the child's output holds the segment's nonce"
    assert truths["sysv_sem"] == "the semaphore was removed"
    # The same policy with the denials holds.
    _assert_all_denied(run_probes(open_backend(tier="landlock")))
