"""Disk full during ``harness v2 run``: one line, exit 75, a resumable store.

End to end on a real file system that fills up: a 2 MiB tmpfs mounted in a private mount
namespace (``unshare``; as root, or as a user through a user namespace). The simulated study
writes about 6 MB, so the writer meets ENOSPC or a short write part way. The run must print one
line (no traceback, no exception group), exit 75 (an infrastructure failure: committed cells
kept, not finalized), and leave a store that verifies as torn or intact, never tamper; after the
tmpfs is enlarged, ``harness v2 resume`` finishes it and the store verifies as finalized.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.lock import project_root, write_lock

MiB = 1 << 20


def _namespace() -> list[str] | None:
    """The unshare prefix that gives a private mount namespace here, or None."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return None
    prefix = [unshare, "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
    return prefix if probe.returncode == 0 else None


@pytest.mark.slow
def test_store_disk_full_during_v2_run_is_one_line_exit_75_and_resumable(tmp_path: Path) -> None:
    prefix = _namespace()
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare unavailable or not permitted)")
    lock = tmp_path / "study-lock.json"
    write_lock(lock, project_root())
    disk = tmp_path / "disk"
    disk.mkdir()
    store = disk / "store"
    harness = shlex.join([sys.executable, "-m", "harness"])
    q = shlex.quote
    # Inside the namespace: mount, run until the disk is full, grow the disk, resume, verify.
    script = "; ".join(
        [
            f"mount -t tmpfs -o size={2 * MiB} tmpfs {q(str(disk))} || exit 99",
            f"{harness} v2 run --store {q(str(store))} --lock {q(str(lock))} "
            f">{q(str(tmp_path / 'run.out'))} 2>{q(str(tmp_path / 'run.err'))}",
            f"echo run=$? >{q(str(tmp_path / 'codes'))}",
            f"{harness} store verify {q(str(store))} >{q(str(tmp_path / 'verify1.out'))}",
            f"echo verify1=$? >>{q(str(tmp_path / 'codes'))}",
            f"mount -o remount,size={64 * MiB} {q(str(disk))}",
            f"{harness} v2 resume {q(str(store))} --lock {q(str(lock))} "
            f">{q(str(tmp_path / 'resume.out'))} 2>{q(str(tmp_path / 'resume.err'))}",
            f"echo resume=$? >>{q(str(tmp_path / 'codes'))}",
            f"{harness} store verify {q(str(store))} >{q(str(tmp_path / 'verify2.out'))}",
            f"echo verify2=$? >>{q(str(tmp_path / 'codes'))}",
        ]
    )
    done = subprocess.run(
        [*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode == 99:
        pytest.skip(f"tmpfs cannot be mounted here: {done.stderr.strip()}")
    codes = dict(
        line.split("=") for line in (tmp_path / "codes").read_text().split() if "=" in line
    )
    run_err = (tmp_path / "run.err").read_text()
    assert codes["run"] == "75", run_err[-2000:]
    assert "Traceback" not in run_err
    assert "ExceptionGroup" not in run_err
    last = run_err.splitlines()[-1]
    assert last.startswith("error: "), last
    assert "no space left" in last or "short write" in last, last
    assert "resume" in last
    assert [line for line in run_err.splitlines() if line.startswith("error: ")] == [last]
    verify1 = (tmp_path / "verify1.out").read_text()
    assert codes["verify1"] in {"1", "4"}, verify1  # torn (resume repairs) or intact, unsealed
    assert codes["resume"] == "0", (tmp_path / "resume.err").read_text()[-2000:]
    assert "cells: 576/576 committed" in (tmp_path / "resume.out").read_text()
    assert codes["verify2"] == "0", (tmp_path / "verify2.out").read_text()
    assert (tmp_path / "verify2.out").read_text().startswith("status: ok (OK)")
