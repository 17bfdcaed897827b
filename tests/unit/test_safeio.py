"""``harness.safeio``: bounded, no-follow reads refuse links, FIFOs, devices and huge files before
reading, and ``harness verify`` reads its inputs through them (a FIFO never blocks it); the one
atomic write of a file and the one atomic publish of a directory leave no temporary behind and
follow no planted link."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import UnsafeFileError
from harness.safeio import (
    open_dir,
    publish_dir,
    read_input,
    read_input_head,
    read_regular,
    write_atomic,
)


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


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_write_atomic_follows_no_link_planted_at_a_temporary_name(tmp_path: Path) -> None:
    # The old fixed temporary name (".report.md.tmp") and a likely one are links to a file
    # outside; the write must neither follow them nor leave a temporary of its own.
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".report.md.tmp").symlink_to(outside)
    (work / f".report.md.{os.getpid()}.tmp").symlink_to(outside)
    target = work / "report.md"
    target.write_bytes(b"old")
    write_atomic(target, b"new")
    write_atomic(target, b"newer", durable=True)
    assert target.read_bytes() == b"newer"
    assert outside.read_bytes() == b"untouched"
    assert _names(work) == [f".report.md.{os.getpid()}.tmp", ".report.md.tmp", "report.md"]


def test_write_atomic_keeps_the_umask_mode_and_removes_its_temporary_on_failure(
    tmp_path: Path,
) -> None:
    target = tmp_path / "table.csv"
    old = os.umask(0o022)
    try:
        write_atomic(target, b"a")
    finally:
        os.umask(old)
    assert target.stat().st_mode & 0o777 == 0o644  # an ordinary file, not mkstemp's 0600
    blocker = tmp_path / "taken"
    blocker.mkdir()
    (blocker / "inside").write_bytes(b"x")  # the rename onto a non-empty directory fails
    with pytest.raises(OSError):
        write_atomic(blocker, b"b")
    assert _names(tmp_path) == ["table.csv", "taken"]


def test_publish_dir_writes_the_tree_in_one_rename_as_ordinary_output(tmp_path: Path) -> None:
    out = tmp_path / "parent" / "bundle"
    count = publish_dir(out, [("a.json", b"1"), ("report/b.md", b"2"), ("blobs/c", b"3")])
    assert count == 3
    assert (out / "report" / "b.md").read_bytes() == b"2"
    assert out.stat().st_mode & 0o777 == 0o755  # not mkdtemp's private 0700
    assert _names(out.parent) == ["bundle"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert publish_dir(empty, iter([("x", b"")])) == 1  # an empty directory is replaced
    assert _names(empty) == ["x"]


@pytest.mark.parametrize("bad", ["../escape", "/abs", "a/../../b", ""])
def test_publish_dir_refuses_a_path_outside_and_leaves_nothing(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="is not a path inside the directory"):
        publish_dir(tmp_path / "out", [("ok", b"1"), (bad, b"2")])
    assert _names(tmp_path) == []


def test_publish_dir_over_a_non_empty_directory_fails_and_leaves_it_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept").write_bytes(b"k")

    def files() -> Iterator[tuple[str, bytes]]:
        yield "new", b"n"

    with pytest.raises(OSError):
        publish_dir(out, files())
    assert _names(tmp_path) == ["out"]
    assert _names(out) == ["kept"]
