"""``harness.safeio``: bounded, no-follow reads refuse links, FIFOs, devices and huge files before
reading, and ``harness verify`` reads its inputs through them (a FIFO never blocks it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import UnsafeFileError
from harness.safeio import open_dir, read_input, read_input_head, read_regular


def test_safeio_reads_a_regular_file_within_its_bound(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"hello")
    assert read_regular(tmp_path / "f", 5) == b"hello"
    with pytest.raises(UnsafeFileError, match="5 bytes, over the 4-byte bound") as refused:
        read_regular(tmp_path / "f", 4)
    assert refused.value.kind == "size"


def test_safeio_refuses_a_link_unless_the_user_named_it(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    with pytest.raises(UnsafeFileError, match="is a symbolic link") as refused:
        read_regular(tmp_path / "link", 10)
    assert refused.value.kind == "symlink"
    assert read_input(tmp_path / "link", 10, "input") == b"x"


def test_safeio_refuses_a_fifo_without_blocking_and_a_device(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeFileError, match="is a FIFO, not a regular file"):
        read_input(tmp_path / "fifo", 10, "input")
    with pytest.raises(UnsafeFileError, match="is a device, not a regular file"):
        read_input(Path("/dev/zero"), 10, "input")
    with pytest.raises(UnsafeFileError, match="is a device"):
        read_input_head(Path("/dev/zero"), 10, "input")


def test_safeio_refuses_a_sparse_huge_file_by_size(tmp_path: Path) -> None:
    with (tmp_path / "huge").open("wb") as f:
        f.truncate(4 << 30)
    with pytest.raises(UnsafeFileError, match="over the"):
        read_regular(tmp_path / "huge", 1 << 20)
    # A consumer that judges size itself gets one byte over its bound, never the whole file.
    assert len(read_input_head(tmp_path / "huge", 1000, "input")) == 1001


def test_safeio_open_dir_refuses_a_linked_directory(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(UnsafeFileError, match="symbolic link, expected a directory"):
        open_dir(tmp_path / "linked", follow=False)
    os.close(open_dir(tmp_path / "linked", follow=True))


def test_harness_verify_refuses_a_fifo_input_in_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "descriptor.json")
    for name in ("requirements.json", "ledger.json"):
        (tmp_path / name).write_text("{}")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "verify"]
        + [f"--{n}={tmp_path / (n + '.json')}" for n in ("descriptor", "requirements", "ledger")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    named = repr(str(tmp_path / "descriptor.json"))
    assert done.stderr.strip().splitlines() == [
        f"error: descriptor file {named} is a FIFO, not a regular file"
    ]
