"""The denial probes' child: tries every escape it is told to, then reports what it saw.

Run by the parent under exactly the confinement of a tool call (``exec_file``), with a job on
stdin naming the targets the parent set up: its own loopback TCP/UDP listeners, Unix sockets,
paths to create, victim files to alter, processes whose environment to read or to signal, a
credential file, and the interpreter to spawn. Every attempt is made honestly and its result
recorded, and everything read is echoed back, so the parent can look for secrets in it.

The report is only the child's view. The parent judges each probe by ground truth (a
connection queued on its listener, a file that appeared, a victim that changed, a process
left in the child's session, a secret in the child's output), never by this report.
Standard library only: it runs under ``python -I -S``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

_CONNECT_TIMEOUT_S = 2.0


def _attempt(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - every failure is an answer, reported as type and text
        return f"{type(e).__name__}: {e}"
    return "succeeded"


def _tcp(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(_CONNECT_TIMEOUT_S)
        s.connect(("127.0.0.1", port))


def _udp(port: int, payload: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(payload, ("127.0.0.1", port))


def _unix(address: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(_CONNECT_TIMEOUT_S)
        s.connect(address)


def _create(path: str) -> None:
    with open(path, "xb") as f:
        f.write(b"written by the sandbox probe\n")


def _modify(path: str) -> None:
    with open(path, "r+b") as f:
        f.write(b"MODIFIED")


def _read_into(seen: dict[str, str], key: str, path: str) -> None:
    with open(path, "rb") as f:
        seen[key] = f.read(1 << 20).decode("latin-1")


def _spawn_process(interpreter: str) -> None:
    import subprocess

    # Inherits the child's own descriptors: the attempt must not hinge on opening anything.
    subprocess.Popen([interpreter, "-I", "-S", "-c", "import time; time.sleep(30)"])


def _fork() -> None:
    if os.fork() == 0:  # the copy only lingers, so the parent can find it
        time.sleep(30)
        os._exit(0)


def main() -> None:
    """Read the job from stdin, attempt every probe, write the report to stdout."""
    job = json.loads(sys.stdin.buffer.read())
    attempts: dict[str, str] = {}
    seen: dict[str, str] = {}
    attempts["tcp_loopback"] = _attempt(lambda: _tcp(job["tcp_port"]))
    attempts["udp_loopback"] = _attempt(lambda: _udp(job["udp_port"], job["nonce"].encode("ascii")))
    attempts["unix_socket_path"] = _attempt(lambda: _unix(job["unix_path"]))
    attempts["unix_socket_abstract"] = _attempt(lambda: _unix("\0" + job["unix_abstract"]))
    for name, path in job["create"].items():
        attempts[name] = _attempt(functools.partial(_create, path))
    victims = job["victims"]
    attempts["victim_modify"] = _attempt(lambda: _modify(victims["victim_modify"]))
    attempts["victim_truncate"] = _attempt(lambda: os.truncate(victims["victim_truncate"], 0))
    attempts["victim_chmod"] = _attempt(lambda: os.chmod(victims["victim_chmod"], 0o600))
    attempts["victim_utime"] = _attempt(lambda: os.utime(victims["victim_utime"], None))
    attempts["victim_xattr"] = _attempt(
        lambda: os.setxattr(victims["victim_xattr"], "user.sandbox_probe", b"1")
    )
    attempts["victim_unlink"] = _attempt(lambda: os.unlink(victims["victim_unlink"]))
    seen["env"] = json.dumps(dict(os.environ), sort_keys=True)
    attempts["credential_env"] = _attempt(
        functools.partial(_read_into, seen, "self_environ", "/proc/self/environ")
    )
    attempts["parent_environ"] = "; ".join(
        _attempt(functools.partial(_read_into, seen, f"environ_{pid}", f"/proc/{pid}/environ"))
        for pid in job["environ_pids"]
    )
    attempts["credential_file"] = _attempt(
        functools.partial(_read_into, seen, "credential_file", job["credential_file"])
    )
    attempts["signal_other"] = _attempt(lambda: os.kill(job["signal_pid"], 15))
    attempts["spawn_subprocess"] = "; ".join(
        (_attempt(lambda: _spawn_process(job["interpreter"])), _attempt(_fork))
    )
    sys.stdout.write(json.dumps({"done": True, "attempts": attempts, "seen": seen}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
