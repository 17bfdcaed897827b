"""Each denial probe's judge, on hand-made observations: denied, allowed, not applicable,
inconclusive, and a probe child whose report is missing or malformed.

The judges are pure (``harness.sandbox._probes``: an ``Observed`` in, a ``ProbeFinding`` out, and
``judge`` turns it into the verdict), so each is tested alone here; a broken judge fails the
test named after its probe. The real probe run against real confined children is
``tests/integration/test_sandbox_probes.py``.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest

from harness.sandbox._policy import NO_TASK_CAP
from harness.sandbox._probes import (
    PROBE_NAMES,
    PROBES,
    Observed,
    Probe,
    ProbeFinding,
    ProbeReport,
    ProbeResult,
    ProbeVerdict,
    child_report,
    finished,
    judge,
)
from harness.sandbox._result import BackendInfo, RunResult

_VICTIMS: Final = tuple(name for name in PROBE_NAMES if name.startswith("victim_"))
_SIBLING_RAN: Final = RunResult(
    exit_status=0,
    stdout=b"sibling finished",
    stderr=b"",
    timed_out=False,
    stdout_overflow=False,
    elapsed_s=1.5,
)

# Every target held and the child finished: each probe is denied.
HELD: Final = Observed(
    exit_status=0,
    output='{"done": true}\n',
    attempts={name: f"{name}: PermissionError" for name in PROBE_NAMES},
    seen_by={},
    complete=True,
    tcp_port=40001,
    tcp_arrived=0,
    udp_port=40002,
    udp_arrived=0,
    unix_path="/t/probe.sock",
    unix_arrived=0,
    abstract_name="harness-sandbox-probe-n0",
    abstract_arrived=0,
    creates={
        "write_cwd": "/t/cwd/probe-n0",
        "write_store": "/t/store/.sandbox-probe-n0",
        "write_tmp": "/tmp/harness-sandbox-probe-n0",
        "write_var_tmp": "/var/tmp/harness-sandbox-probe-n0",
        "write_dev_shm": "/dev/shm/harness-sandbox-probe-n0",
    },
    created=(),
    victims={name: f"/t/victims/{name}" for name in _VICTIMS},
    victim_changes=dict.fromkeys(_VICTIMS, ""),
    xattr_supported=True,
    secrets={
        "HARNESS_PROBE_CREDENTIAL": "harness_probe_credential-s1",
        "GEMINI_API_KEY": "gemini_api_key-s2",
        "GOOGLE_API_KEY": "google_api_key-s3",
    },
    parent_pid=100,
    parent_entries=("HOME=/root/parent-home", "SECRET_TOKEN=parent-secret"),
    decoy_pid=101,
    decoy_secret="decoy-credential-d1",
    decoy_status=None,
    environ_readable=True,
    credential_file="/t/credential.txt",
    file_secret="file-credential-f1",
    left_behind=(),
    spawned=(),
    changed_limits=(),
    limits_victim_pid=102,
    victim_limits_before="Max open files 1024 1024 files\n",
    victim_limits_after="Max open files 1024 1024 files\n",
    parent_priority=0,
    parent_priority_after=0,
    victim_priority=0,
    victim_priority_after=0,
    sigurg=0,
    main_thread=True,
    sigio_victim_pid=103,
    sigio_status=None,
    sysv_ready=True,
    shm_id=11,
    msg_id=12,
    sem_id=13,
    shm_breach=None,
    msg_breach=None,
    sem_breach=None,
    shm_secret="shm-n0-x1",
    msg_secret="msg-n0-y2",
    watched_dir="/t/watched",
    watch_names=("watched-a1", "watched-b2"),
    watch_control=True,
    max_shmem_growth=0,
    max_rss_bytes=900 << 20,
    max_threads=32,
    task_cap=32,
    plant_nonce="harness-planted-p1",
    planted=True,
    plant_exit_status=0,
    sibling_pid=104,
    sibling=_SIBLING_RAN,
    sibling_traced=None,
    zygote_pid=105,
    zygote_alive=True,
    zygote_traced=None,
    outlived=(),
    zygote_readable=True,
    zygote_breach=None,
)
_ROWS: Final = {probe.name: probe for probe in PROBES}
_CREATES: Final = HELD.creates
_LEAKED = "the child's output holds {}"

# name -> (target, ground truth when denied): the exact text the probe report prints.
DENIED: Final[dict[str, tuple[str, str]]] = {
    "tcp_loopback": ("127.0.0.1:40001/tcp", "nothing arrived at the parent's listener"),
    "udp_loopback": ("127.0.0.1:40002/udp", "nothing arrived at the parent's listener"),
    "unix_socket_path": ("/t/probe.sock", "nothing arrived at the parent's listener"),
    "unix_socket_abstract": (
        "@harness-sandbox-probe-n0",
        "nothing arrived at the parent's listener",
    ),
    **{name: (str(_CREATES[name]), "no file appeared") for name in _CREATES},
    **{
        name: (f"/t/victims/{name}", "the victim is unchanged (content, mode, mtime, xattrs)")
        for name in _VICTIMS
    },
    "credential_env": (
        "HARNESS_PROBE_CREDENTIAL, GEMINI_API_KEY, GOOGLE_API_KEY",
        "no secret in the child's stdout or stderr",
    ),
    "parent_environ": (
        "/proc/100/environ, /proc/101/environ",
        "no secret in the child's stdout or stderr",
    ),
    "credential_file": ("/t/credential.txt", "no secret in the child's stdout or stderr"),
    "signal_other": ("pid 101 (same user)", "the process is still alive"),
    "spawn_subprocess": (
        "exec and fork",
        "no other process in the child's session while it ran or after",
    ),
    "prlimit_parent": ("pid 100 (the parent) RLIMIT_RTTIME", "the parent's limits are unchanged"),
    "prlimit_victim": (
        "pid 102 (a victim) RLIMIT_NOFILE",
        "the victim's /proc limits are unchanged",
    ),
    "setpriority_parent": ("pid 100 (the parent)", "the parent's nice value is unchanged"),
    "setpriority_victim": ("pid 102 (a victim)", "the victim's nice value is unchanged"),
    "sigio_parent": (
        "pid 100 (the parent), SIGURG by F_SETOWN/FIOSETOWN",
        "no SIGURG reached the parent",
    ),
    "sigio_victim": (
        "pid 103 (a victim), SIGKILL by F_SETOWN/FIOSETOWN",
        "the victim is still alive",
    ),
    "sysv_shm": (
        "SysV segment 11 (the parent's, 0600): read, overwrite, remove",
        "the segment is there, unchanged, and its nonce is not in the child's output",
    ),
    "sysv_msg": (
        "SysV queue 12 (the parent's, 0600): receive, remove",
        "the message is still queued and its nonce is not in the child's output",
    ),
    "sysv_sem": (
        "SysV semaphore 13 (the parent's, 0600): set, remove",
        "the semaphore is there with its value 7",
    ),
    "inotify_watch": (
        "/t/watched (inotify), 2 secret names created while it ran",
        "no name created in the directory is in the child's output",
    ),
    "fanotify_watch": (
        "/t/watched (fanotify), 2 secret names created while it ran",
        "no name created in the directory is in the child's output",
    ),
    "memfd_huge": ("2 GiB written into memfds", "shared memory grew by at most 0 MiB"),
    "memory_2gib": ("2 GiB of memory filled", "its peak resident memory was 900 MiB"),
    "threads_300": ("300 threads (cap 32)", "it had at most 32 threads at once"),
    "earlier_call_state": (
        "an earlier call's environment, module state, memory and open pipe",
        "nothing of the earlier call in the child's environment, memory or descriptors",
    ),
    "signal_sibling": (
        "pid 104 (a concurrent call), SIGKILL and ptrace",
        "the sibling call finished normally and was never traced",
    ),
    "signal_zygote": (
        "pid 105 (the zygote), SIGKILL and ptrace",
        "the zygote is alive and was never traced",
    ),
    "outlive_reply": (
        "clone(CLONE_PARENT) and fork, then reply",
        "no process of the call's session (a clone(CLONE_PARENT) sibling stays in it) was left "
        "after its reply",
    ),
    "zygote_state": (
        "/proc/105/environ and /proc/105/fd",
        "the zygote's environment is the allowlist and its descriptors are /dev/null, sockets "
        "and pidfds only",
    ),
}


def _with(**changes: Any) -> Observed:
    return msgspec.structs.replace(HELD, **changes)


def _output(*secrets: str) -> str:
    return HELD.output + " ".join(secrets)


# name -> (what the parent observed, the ground truth of the breach)
ALLOWED: Final[dict[str, tuple[dict[str, Any], str]]] = {
    "tcp_loopback": (
        {"tcp_arrived": 2},
        "2 connection(s) arrived at the parent's listener",
    ),
    "udp_loopback": ({"udp_arrived": 1}, "1 datagram(s) arrived at the parent's listener"),
    "unix_socket_path": (
        {"unix_arrived": 1},
        "1 connection(s) arrived at the parent's listener",
    ),
    "unix_socket_abstract": (
        {"abstract_arrived": 3},
        "3 connection(s) arrived at the parent's listener",
    ),
    **{
        name: ({"created": (name,)}, f"{_CREATES[name]} was created")
        for name in _CREATES  # every write target exists on this machine in HELD
    },
    **{
        name: (
            {"victim_changes": dict(HELD.victim_changes) | {name: "content, mtime"}},
            "the victim changed: content, mtime",
        )
        for name in _VICTIMS
    },
    "credential_env": (
        {"output": _output("gemini_api_key-s2", "google_api_key-s3")},
        _LEAKED.format("GEMINI_API_KEY, GOOGLE_API_KEY"),
    ),
    "parent_environ": (
        {"output": _output("SECRET_TOKEN=parent-secret", "decoy-credential-d1")},
        _LEAKED.format("SECRET_TOKEN, pid 101's HARNESS_PROBE_DECOY_CREDENTIAL"),
    ),
    "credential_file": (
        {"output": _output("file-credential-f1")},
        _LEAKED.format("the file's secret"),
    ),
    "signal_other": ({"decoy_status": -15}, "it died with status -15"),
    "spawn_subprocess": (
        {"left_behind": ("7:sh",), "spawned": ("8:python3", "7:sh")},
        "in its session: 7:sh, 8:python3",
    ),
    "prlimit_parent": (
        {"changed_limits": ("RLIMIT_NOFILE", "RLIMIT_RTTIME")},
        "the parent's limits changed: RLIMIT_NOFILE, RLIMIT_RTTIME",
    ),
    "prlimit_victim": (
        {"victim_limits_after": "Max open files 3 3 files\n"},
        "the victim's /proc limits changed",
    ),
    "setpriority_parent": (
        {"parent_priority_after": 7},
        "the parent's nice value went from 0 to 7",
    ),
    "setpriority_victim": (
        {"victim_priority_after": 7},
        "the victim's nice value went from 0 to 7",
    ),
    "sigio_parent": ({"sigurg": 2}, "2 SIGURG reached the parent"),
    "sigio_victim": ({"sigio_status": -9}, "it died with status -9"),
    "sysv_shm": (
        {"output": _output("shm-n0-x1")},
        _LEAKED.format("the segment's nonce"),
    ),
    "sysv_msg": (
        {"output": _output("msg-n0-y2")},
        _LEAKED.format("the queued message's nonce"),
    ),
    "sysv_sem": ({"sem_breach": "the semaphore was removed"}, "the semaphore was removed"),
    "inotify_watch": (
        {"output": _output("watched-a1"), "seen_by": {"inotify_watch": "watched-a1"}},
        _LEAKED.format("1 of the secret names"),
    ),
    "fanotify_watch": (
        {
            "output": _output("watched-a1", "watched-b2"),
            "seen_by": {"fanotify_watch": "watched-a1 watched-b2"},
        },
        _LEAKED.format("2 of the secret names"),
    ),
    "memfd_huge": (
        {"max_shmem_growth": 2 << 30},
        "shared memory grew by 2048 MiB while it ran",
    ),
    "memory_2gib": ({"max_rss_bytes": 2 << 30}, "its peak resident memory was 2048 MiB"),
    "threads_300": ({"max_threads": 300}, "it had 300 threads at once"),
    "earlier_call_state": (
        {"output": _output("harness-planted-p1")},
        _LEAKED.format("the earlier call's nonce"),
    ),
    "signal_sibling": (
        {"sibling": msgspec.structs.replace(_SIBLING_RAN, exit_status=-9, stdout=b"")},
        "the sibling was killed (exit status -9, stdout b'')",
    ),
    "signal_zygote": ({"zygote_alive": False}, "the zygote is gone"),
    "outlive_reply": ({"outlived": ("9:python3",)}, "alive after the reply: 9:python3"),
    "zygote_state": (
        {"zygote_breach": "descriptors a child could use: 5 -> /etc/passwd"},
        "descriptors a child could use: 5 -> /etc/passwd",
    ),
}

# name -> (what the parent's own control found, why the probe is not applicable)
NOT_APPLICABLE: Final[dict[str, tuple[dict[str, Any], str]]] = {
    "write_var_tmp": (
        {"creates": dict(_CREATES) | {"write_var_tmp": None}},
        "this machine has no such target",
    ),
    "write_dev_shm": (
        {"creates": dict(_CREATES) | {"write_dev_shm": None}},
        "this machine has no such target",
    ),
    "victim_xattr": ({"xattr_supported": False}, "this machine has no such target"),
    "parent_environ": ({"environ_readable": False}, "this machine has no such target"),
    "sigio_parent": ({"main_thread": False}, "only the main thread can catch the signal"),
    "sysv_shm": ({"sysv_ready": False}, "this machine offers no SysV IPC to the parent"),
    "sysv_msg": ({"sysv_ready": False}, "this machine offers no SysV IPC to the parent"),
    "sysv_sem": ({"sysv_ready": False}, "this machine offers no SysV IPC to the parent"),
    "inotify_watch": (
        {"watch_control": False},
        "inotify does not report to the parent itself here",
    ),
    "fanotify_watch": (
        {"watch_control": False},
        "inotify does not report to the parent itself here",
    ),
    "threads_300": ({"task_cap": None}, f"task cap {NO_TASK_CAP}"),
    "signal_zygote": ({"zygote_pid": None}, "no zygote: this backend spawns every child"),
    "zygote_state": (
        {"zygote_readable": False},
        "no zygote, or its /proc files are not readable by this user",
    ),
}


def _verdict(name: str, observed: Observed) -> ProbeResult:
    return judge(_ROWS[name], observed)


def test_every_probe_has_a_row_and_every_row_its_cases() -> None:
    assert tuple(_ROWS) == PROBE_NAMES
    assert len(_ROWS) == len(PROBES)
    assert set(DENIED) == set(ALLOWED) == set(PROBE_NAMES)
    assert all(probe.attempt for probe in PROBES)
    # Only optional probes may be not applicable; each has a case that makes it so.
    assert set(NOT_APPLICABLE) == {probe.name for probe in PROBES if probe.optional}


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_denied_when_every_target_held(name: str) -> None:
    result = _verdict(name, HELD)
    assert result.verdict is ProbeVerdict.DENIED
    assert (result.target, result.ground_truth) == DENIED[name]
    assert result.child_saw == f"{name}: PermissionError"


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_allowed_when_the_parent_saw_it_get_through(name: str) -> None:
    changes, truth = ALLOWED[name]
    result = _verdict(name, _with(**changes))
    assert (result.verdict, result.ground_truth) == (ProbeVerdict.ALLOWED, truth)
    assert result.target == DENIED[name][0]


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_a_breach_is_allowed_even_when_the_child_did_not_finish(name: str) -> None:
    changes, truth = ALLOWED[name]
    result = _verdict(name, _with(**changes, complete=False, attempts={}))
    assert (result.verdict, result.ground_truth) == (ProbeVerdict.ALLOWED, truth)


@pytest.mark.parametrize("name", sorted(NOT_APPLICABLE))
def test_not_applicable_when_the_machine_has_no_such_target(name: str) -> None:
    changes, why = NOT_APPLICABLE[name]
    result = _verdict(name, _with(**changes))
    assert (result.verdict, result.ground_truth) == (ProbeVerdict.NOT_APPLICABLE, why)


def test_not_applicable_targets_name_what_is_missing() -> None:
    for name, directory in (("write_var_tmp", "/var/tmp"), ("write_dev_shm", "/dev/shm")):
        assert _verdict(name, _with(**NOT_APPLICABLE[name][0])).target == directory
    threads = _verdict("threads_300", _with(task_cap=None))
    assert threads.target == "300 threads (cap None)"
    assert _verdict("signal_zygote", _with(zygote_pid=None)).target == (
        "pid None (the zygote), SIGKILL and ptrace"
    )


@pytest.mark.parametrize("name", PROBE_NAMES)
def test_inconclusive_when_the_child_report_is_missing(name: str) -> None:
    # Nothing got through, but the child did not finish (killed, or its report was garbage):
    # a probe it never reached proves nothing.
    result = _verdict(name, _with(complete=False, attempts={}, exit_status=-9))
    assert result.verdict is ProbeVerdict.INCONCLUSIVE
    assert result.ground_truth == "the probe child did not finish (exit status -9)"
    assert result.child_saw == "no report"


@pytest.mark.parametrize(
    ("name", "changes", "why"),
    [
        ("inotify_watch", {"watch_names": ()}, "no name was created while the child ran"),
        ("fanotify_watch", {"watch_names": ()}, "no name was created while the child ran"),
        (
            "earlier_call_state",
            {"planted": False, "plant_exit_status": 1},
            "the planting call did not plant (1)",
        ),
        (
            "signal_sibling",
            {"sibling": None},
            "the sibling call did not run as planned (it did not run)",
        ),
        (
            "signal_sibling",
            {"sibling": msgspec.structs.replace(_SIBLING_RAN, exit_status=1, stdout=b"oops")},
            "the sibling call did not run as planned (exit status 1, stdout b'oops')",
        ),
    ],
    ids=["inotify", "fanotify", "not-planted", "no-sibling", "sibling-failed"],
)
def test_inconclusive_when_the_setup_did_not_hold(
    name: str, changes: dict[str, Any], why: str
) -> None:
    result = _verdict(name, _with(**changes))
    assert (result.verdict, result.ground_truth) == (ProbeVerdict.INCONCLUSIVE, why)


def test_a_breach_beats_a_setup_that_did_not_hold() -> None:
    planted_elsewhere = _with(planted=False, output=_output("harness-planted-p1"))
    assert _verdict("earlier_call_state", planted_elsewhere).verdict is ProbeVerdict.ALLOWED
    killed = _with(sibling=msgspec.structs.replace(_SIBLING_RAN, exit_status=-9))
    assert _verdict("signal_sibling", killed).verdict is ProbeVerdict.ALLOWED


@pytest.mark.parametrize(
    ("name", "changes", "truth"),
    [
        ("sysv_shm", {"shm_breach": "the segment was removed"}, "the segment was removed"),
        (
            "sysv_shm",
            {"shm_breach": "its contents changed", "output": _output("shm-n0-x1")},
            "the child's output holds the segment's nonce",
        ),
        ("sysv_msg", {"msg_breach": "the queue was removed"}, "the queue was removed"),
        ("signal_sibling", {"sibling_traced": "4242"}, "the sibling was traced by pid 4242"),
        ("signal_zygote", {"zygote_traced": "4242"}, "the zygote was traced by pid 4242"),
        (
            "signal_zygote",
            {"zygote_alive": False, "zygote_traced": "4242"},
            "the zygote is gone",
        ),
        (
            "parent_environ",
            {"output": _output("decoy-credential-d1")},
            "the child's output holds pid 101's HARNESS_PROBE_DECOY_CREDENTIAL",
        ),
        (
            "credential_env",
            {"output": _output("harness_probe_credential-s1")},
            "the child's output holds HARNESS_PROBE_CREDENTIAL",
        ),
    ],
)
def test_each_way_a_probe_gets_through(name: str, changes: dict[str, Any], truth: str) -> None:
    result = _verdict(name, _with(**changes))
    assert (result.verdict, result.ground_truth) == (ProbeVerdict.ALLOWED, truth)


def test_a_secret_name_counts_for_the_watch_that_reported_it() -> None:
    # inotify's report holds the name: it is inotify's breach, not fanotify's.
    inotify_saw = _with(output=_output("watched-a1"), seen_by={"inotify_watch": "watched-a1"})
    assert _verdict("inotify_watch", inotify_saw).verdict is ProbeVerdict.ALLOWED
    assert _verdict("fanotify_watch", inotify_saw).verdict is ProbeVerdict.DENIED
    # A name in the output that neither watch reported counts against both.
    unattributed = _with(output=_output("watched-b2"))
    assert _verdict("inotify_watch", unattributed).verdict is ProbeVerdict.ALLOWED
    assert _verdict("fanotify_watch", unattributed).verdict is ProbeVerdict.ALLOWED
    # A name that was never created is no breach.
    assert _verdict("inotify_watch", _with(output=_output("watched-zz"))).verdict is (
        ProbeVerdict.DENIED
    )


def test_thresholds_are_inclusive() -> None:
    under = _with(max_shmem_growth=(1 << 30) - 1, max_rss_bytes=(2 << 30) - 1, max_threads=299)
    assert {_verdict(n, under).verdict for n in ("memfd_huge", "memory_2gib", "threads_300")} == {
        ProbeVerdict.DENIED
    }
    at = _with(max_shmem_growth=1 << 30, max_rss_bytes=2 << 30, max_threads=300)
    assert {_verdict(n, at).verdict for n in ("memfd_huge", "memory_2gib", "threads_300")} == {
        ProbeVerdict.ALLOWED
    }
    assert _verdict("memfd_huge", _with(max_shmem_growth=-4096)).ground_truth == (
        "shared memory grew by at most 0 MiB"
    )


def _row(finding: ProbeFinding) -> Probe:
    return Probe("tcp_loopback", "a made-up row", lambda _: finding)


@pytest.mark.parametrize(
    ("finding", "complete", "expected"),
    [
        (
            ProbeFinding("t", "got in", "held", applicable=False, why_not="n/a"),
            True,
            "not_applicable",
        ),
        (ProbeFinding("t", "got in", "held", inconclusive="unsure"), False, "allowed"),
        (ProbeFinding("t", None, "held", inconclusive="unsure"), True, "inconclusive"),
        (ProbeFinding("t", "", "held"), True, "denied"),
        (ProbeFinding("t", None, "held"), False, "inconclusive"),
        (ProbeFinding("t", None, "held"), True, "denied"),
    ],
    ids=["n/a-first", "breach-first", "own-inconclusive", "empty-breach", "unfinished", "held"],
)
def test_the_verdict_rule_in_order(finding: ProbeFinding, complete: bool, expected: str) -> None:
    assert judge(_row(finding), _with(complete=complete)).verdict.value == expected


@pytest.mark.parametrize(
    ("stdout", "attempts", "seen"),
    [
        (b'{"done": true, "attempts": {"a": "x"}, "seen": {"k": 1}}', {"a": "x"}, {"k": "1"}),
        (b'{"attempts": {"a": "x"}, "seen": {"k": "v"}}', {}, {"k": "v"}),
        (b'{"done": false, "attempts": {"a": "x"}}', {}, {}),
        (b'{"done": 1, "attempts": {"a": "x"}}', {}, {}),
        (b'{"done": true}', {}, {}),
        (b'{"done": true, "attempts": {}, "seen": 3}', {}, {}),
        (b"[1, 2]", {}, {}),
        (b"null", {}, {}),
        (b"", {}, {}),
        (b'{"done": true, "attempts": {"a"', {}, {}),
        (b"\xff\xfe not json", {}, {}),
    ],
    ids=[
        "done",
        "not-done",
        "done-false",
        "done-not-true",
        "no-attempts",
        "seen-not-object",
        "a-list",
        "null",
        "empty",
        "torn",
        "binary",
    ],
)
def test_child_report_of_malformed_output(
    stdout: bytes, attempts: dict[str, str], seen: dict[str, str]
) -> None:
    assert child_report(stdout) == (attempts, seen)


def test_finished_needs_every_probe_but_the_skipped_writes() -> None:
    every = dict.fromkeys(PROBE_NAMES, "tried")
    assert finished(every, frozenset())
    without_tmp = {k: v for k, v in every.items() if k != "write_var_tmp"}
    assert not finished(without_tmp, frozenset())
    assert finished(without_tmp, frozenset({"write_var_tmp"}))
    assert not finished({}, frozenset())


def _report(probes: tuple[ProbeResult, ...]) -> ProbeReport:
    control = ProbeResult(
        name="positive_control",
        target="echo tool call",
        verdict=ProbeVerdict.PASSED,
        ground_truth="the reply equals the arguments",
        child_saw="",
    )
    info = BackendInfo(
        backend="linux",
        tier="userns",
        landlock_abi=7,
        profile_path="/p",
        profile_digest="blake3:" + "0" * 64,
        interpreter="/usr/bin/python3",
        tool_code="/h",
    )
    return ProbeReport(backend=info, positive_control=control, probes=probes, child_exit_status=0)


def test_report_passes_only_optional_probes_as_not_applicable() -> None:
    held = tuple(judge(probe, HELD) for probe in PROBES)
    assert _report(held).ok
    optional = _with(task_cap=None, zygote_readable=False)
    assert _report(tuple(judge(probe, optional) for probe in PROBES)).ok
    # write_tmp is not optional: a machine where /tmp cannot be written is not confined-proven.
    no_tmp = _with(creates=dict(_CREATES) | {"write_tmp": None})
    report = _report(tuple(judge(probe, no_tmp) for probe in PROBES))
    assert not report.ok
    assert report.allowed() == []
    leaked = _with(tcp_arrived=1)
    assert _report(tuple(judge(probe, leaked) for probe in PROBES)).allowed() == ["tcp_loopback"]
