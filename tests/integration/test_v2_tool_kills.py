"""Tool children killed from outside: an infrastructure failure, never a study outcome.

A killer thread in the test SIGKILLs sandboxed tool children (``harness/tools/worker.py``
processes descending from the process under test), as a host's OOM killer or an operator
would. One kill is retried in a fresh child and changes nothing in the results; two in a row
stop ``harness v2 run`` with exit 75 and one line, the cell in flight uncommitted, the store
unfinalized, and ``harness v2 resume`` continues it to the same results an undisturbed run has.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from v2_support import CountingTools, reduced, run_into

from harness.canonical import canonical_bytes
from harness.lock import project_root, write_lock
from harness.sandbox import open_backend
from harness.store import VerifyStatus, read_store, verify_store
from harness.studies.v2.outcomes import CellResult

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find children")

ROWS = 12
TIMEOUT_S = 300.0


def _descendants_running_worker(root: int) -> list[int]:
    """Pids of live processes under ``root`` whose command line runs the tool worker."""
    parents: dict[int, int] = {}
    workers: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        parents[int(entry)] = int(fields[1])
        if b"harness/tools/worker.py" in cmdline:
            workers.append(int(entry))
    found = []
    for pid in workers:
        node = pid
        while node > 1 and node != root:
            node = parents.get(node, 0)
        if node == root:
            found.append(pid)
    return found


class _Killer:
    """Kills tool children under ``root`` from a thread: at most ``limit`` calls' worth."""

    def __init__(
        self, root: int, *, limit: int | None, ready: Callable[[], bool] = lambda: True
    ) -> None:
        self.root = root
        self.limit = limit
        self.ready = ready
        self.killed: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            if (self.limit is None or len(self.killed) < self.limit) and self.ready():
                # One kill per child: with a pid namespace the call is two processes (the
                # waiting copy and pid 1); either one's death ends the call.
                for pid in _descendants_running_worker(self.root)[:1]:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed.append(pid)
            time.sleep(0.002)


def _stored(store: Path) -> list[bytes]:
    return [canonical_bytes(msgspec.convert(c.result, CellResult)) for c in read_store(store).cells]


@pytest.fixture(scope="module")
def opaque_lock() -> bytes:
    return b'{"lock": "opaque test lock"}'


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, opaque_lock: bytes) -> list[bytes]:
    """The first ROWS cells of the study, run undisturbed in the real sandbox."""
    store = tmp_path_factory.mktemp("reference") / "store"
    tools = CountingTools(open_backend())
    report = run_into(store, reduced(ROWS), opaque_lock, resume=False, tools=tools)
    assert report.complete
    assert tools.calls > 0  # the rows do call tools, or nothing here would be tested
    return _stored(store)


def test_one_kill_is_retried_and_changes_no_result(
    tmp_path: Path, opaque_lock: bytes, reference: list[bytes]
) -> None:
    store = tmp_path / "store"
    tools = CountingTools(open_backend())
    with _Killer(os.getpid(), limit=1) as killer:
        report = run_into(store, reduced(ROWS), opaque_lock, resume=False, tools=tools)
    assert len(killer.killed) == 1
    assert report.complete
    assert _stored(store) == reference
    # No tool failure was recorded for the killed child: the retry answered in its place.
    assert b"SANDBOX_KILLED" not in (store / "records.log").read_bytes()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}


@pytest.fixture
def cli_store(tmp_path: Path) -> tuple[Path, Path]:
    lock = tmp_path / "study-lock.json"
    write_lock(lock, project_root())
    return tmp_path / "store", lock


def test_two_kills_stop_the_cli_run_unfinalized_and_resume_continues(
    cli_store: tuple[Path, Path], reference: list[bytes]
) -> None:
    store, lock = cli_store
    process = subprocess.Popen(
        _cli("v2", "run", "--store", str(store), "--lock", str(lock)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=project_root(),
    )
    # Only once the store exists: preflight's own sandbox children must not be touched.
    with _Killer(process.pid, limit=None, ready=(store / "records.log").exists) as killer:
        _out, err = process.communicate(timeout=TIMEOUT_S)
    stderr = err.decode()
    assert process.returncode == 75, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: the sandboxed child of tool call "), last
    assert "killed twice by a signal the harness did not send" in last
    assert last.endswith(f"; continue with `harness v2 resume {store} --lock {lock}`")
    assert len(killer.killed) >= 2
    # Committed cells stay, the cell in flight is not among them, the store is not finalized.
    stopped = verify_store(store)
    assert stopped.status is VerifyStatus.OK
    assert not (store / "MANIFEST").exists()
    committed = _stored(store)
    assert committed == reference[: len(committed)]
    assert len(committed) < ROWS
    assert b"SANDBOX_KILLED" not in (store / "records.log").read_bytes()
    # Resume without the killer: it continues where the run stopped (stopped with SIGTERM
    # once it passed the reference's rows, so the test need not run all 576 cells).
    resumed = subprocess.Popen(
        _cli("v2", "resume", str(store), "--lock", str(lock)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=project_root(),
    )
    deadline = time.monotonic() + TIMEOUT_S
    while len(read_store(store).cells) < ROWS:
        assert resumed.poll() is None, resumed.stderr.read().decode() if resumed.stderr else ""
        assert time.monotonic() < deadline, "the resumed run made no progress"
        time.sleep(0.05)
    resumed.send_signal(signal.SIGTERM)
    _, resume_err = resumed.communicate(timeout=TIMEOUT_S)
    assert resumed.returncode == 130, resume_err.decode()
    assert _stored(store)[:ROWS] == reference
    assert not (store / "MANIFEST").exists()
