"""A hostile store directory: planted links, FIFOs, devices and huge sparse files.

Each attack is planted in a real store on disk. Readers (``verify_store``, ``harness store
verify``) must refuse it as tamper by type or size before reading a byte of it, in bounded time;
the writer (``RunStore.open_for_resume``) must refuse it before writing anything, and nothing
outside the store may be created or changed. A directory ``outside`` next to the store stands
for what an attacker wants written: it must stay exactly as it was.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import StoreError, TamperError
from harness.lock import project_root, write_lock
from harness.store import (
    RunStore,
    VerifyCode,
    VerifyStatus,
    finalize_store,
    read_blob,
    verify_store,
)
from harness.studies.v2.schedule import canonical_schedule

LOCK = b"study lock for hostile-store tests\n"
ROWS = [{"cell": i} for i in range(4)]


def build(root: Path, cells: int = 2) -> str:
    """A store with ``cells`` committed cells (one blob each); returns the last blob digest."""
    blob = ""
    with RunStore.create(root, LOCK, ROWS) as writer:
        for i in range(cells):
            key = writer.journal_begin({"cell": i})
            blob = writer.put_blob(f"raw response {i}".encode())
            writer.journal_end(key, {"status": "ok"}, blobs=[blob])
            writer.commit_cell(i, {"row": i}, [{"raw": blob}])
    return blob


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every name under ``directory`` (links not followed) with its bytes or link target."""
    found: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(directory))] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[str(path.relative_to(directory))] = path.read_bytes()
        else:
            found[str(path.relative_to(directory))] = "dir"
    return found


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    build(root)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside"
    target.mkdir()
    (target / "precious").write_bytes(b"must not change\n")
    return target


def assert_refused(root: Path) -> None:
    report = verify_store(root)
    assert report.status is VerifyStatus.TAMPER, report
    assert report.code is VerifyCode.UNSAFE_FILE, report


def assert_resume_refused(root: Path, outside: Path) -> None:
    before = snapshot(outside)
    with pytest.raises(TamperError):
        RunStore.open_for_resume(root, LOCK, ROWS)
    assert snapshot(outside) == before


# --- planted links ----------------------------------------------------------------------------


def test_store_symlinked_writer_lock_is_refused_and_its_target_untouched(
    store: Path, outside: Path
) -> None:
    (store / "writer.lock").unlink()
    (store / "writer.lock").symlink_to(outside / "precious")
    assert_refused(store)
    assert_resume_refused(store, outside)
    with pytest.raises(TamperError, match="symbolic link"):
        finalize_store(store)
    assert (outside / "precious").read_bytes() == b"must not change\n"


def test_store_dangling_head_tmp_link_is_refused_and_creates_nothing(
    store: Path, outside: Path
) -> None:
    (store / "HEAD.tmp").unlink(missing_ok=True)
    (store / "HEAD.tmp").symlink_to(outside / "created-by-attack")
    assert_refused(store)
    assert_resume_refused(store, outside)
    assert not (outside / "created-by-attack").exists()


def test_store_symlinked_evidence_folder_is_refused_before_a_torn_tail_is_cut(
    store: Path, outside: Path
) -> None:
    with (store / "records.log").open("ab") as f:
        f.write(b"0" * 64 + b' {"torn')  # a torn tail resume would move to evidence/
    (store / "evidence").symlink_to(outside, target_is_directory=True)
    assert_refused(store)
    assert_resume_refused(store, outside)
    assert snapshot(outside) == {"precious": b"must not change\n"}


@pytest.mark.parametrize("name", ["records.log", "journal.log", "HEAD", "study.lock"])
def test_store_symlinked_store_file_is_refused(store: Path, tmp_path: Path, name: str) -> None:
    real = tmp_path / f"real-{name}"
    (store / name).rename(real)
    (store / name).symlink_to(real)  # same bytes, reached through a link: still refused
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.UNSAFE_FILE)
    assert name in report.reason


def test_store_symlinked_blob_folder_and_blob_are_refused(store: Path, tmp_path: Path) -> None:
    blob = next((store / "blobs").iterdir())
    moved = tmp_path / "blob"
    blob.rename(moved)
    blob.symlink_to(moved)
    assert_refused(store)
    with pytest.raises(TamperError):
        read_blob(store, "blake3:" + blob.name)
    blob.unlink()
    moved.rename(blob)
    assert verify_store(store).status is VerifyStatus.OK
    (store / "blobs").rename(tmp_path / "blobs")
    (store / "blobs").symlink_to(tmp_path / "blobs", target_is_directory=True)
    assert_refused(store)


# --- special and huge files -------------------------------------------------------------------


def _cli_verify(root: Path) -> subprocess.CompletedProcess[str]:
    """``harness store verify`` in a child with a deadline: a hang would fail, not block."""
    return subprocess.run(
        [sys.executable, "-m", "harness", "store", "verify", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", ["records.log", "journal.log", "HEAD", "MANIFEST"])
def test_store_fifo_is_refused_without_blocking(store: Path, name: str) -> None:
    (store / name).unlink(missing_ok=True)
    os.mkfifo(store / name)
    done = _cli_verify(store)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "status: tamper (UNSAFE_FILE)" in done.stdout
    assert "Traceback" not in done.stderr


def test_store_fifo_blob_is_refused_without_blocking(store: Path) -> None:
    os.mkfifo(store / "blobs" / ("ab" * 32))
    done = _cli_verify(store)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "UNSAFE_FILE" in done.stdout


def test_store_dev_zero_link_is_refused(store: Path) -> None:
    (store / "records.log").unlink()
    (store / "records.log").symlink_to("/dev/zero")
    done = _cli_verify(store)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "UNSAFE_FILE" in done.stdout


def test_store_device_node_is_refused_by_type(store: Path) -> None:
    # Creating a device node needs CAP_MKNOD (root, outside a user namespace); elsewhere the
    # link above is the only way to plant /dev/zero, and this case cannot be built.
    (store / "journal.log").unlink()
    try:
        os.mknod(store / "journal.log", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    except PermissionError:
        pytest.skip("no CAP_MKNOD here: a device node cannot be planted")
    done = _cli_verify(store)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "journal.log is a device" in done.stdout


@pytest.mark.parametrize("name", ["records.log", "journal.log"])
def test_store_sparse_huge_file_is_refused_by_size_before_reading(store: Path, name: str) -> None:
    with (store / name).open("r+b") as f:
        f.truncate(3 << 30)  # 3 GiB, sparse: costs no disk, would cost 3 GiB of memory
    started = time.perf_counter()
    report = verify_store(store)
    elapsed = time.perf_counter() - started
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.UNSAFE_FILE)
    assert "over the" in report.reason
    assert elapsed < 5.0  # refused by fstat; reading 3 GiB would take far longer


def test_store_sparse_huge_blob_is_refused_by_size(store: Path) -> None:
    blob = next((store / "blobs").iterdir())
    with blob.open("r+b") as f:
        f.truncate(2 << 30)
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.UNSAFE_FILE)
    with pytest.raises(TamperError, match="over the"):
        read_blob(store, "blake3:" + blob.name)


def test_store_directory_where_a_file_belongs_is_refused(store: Path) -> None:
    (store / "MANIFEST").mkdir()
    assert_refused(store)


def test_store_unknown_regular_files_are_left_alone(store: Path) -> None:
    (store / "notes.txt").write_text("a user's note\n")
    (store / "report").mkdir()
    assert verify_store(store).status is VerifyStatus.OK


def test_store_file_of_another_owner_is_refused(store: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    os.chown(store / "HEAD", 12345, -1)
    report = verify_store(store)
    assert (report.status, report.code) == (VerifyStatus.TAMPER, VerifyCode.UNSAFE_FILE)
    assert "owned by uid 12345" in report.reason


def test_v2_resume_of_a_store_with_planted_links_writes_nothing_outside(
    tmp_path: Path, outside: Path
) -> None:
    """Through the command line: ``harness v2 resume`` on a V2 store whose writer.lock, HEAD.tmp
    and evidence/ are links to outside refuses in one line and creates or changes nothing there."""
    lock = tmp_path / "study-lock.json"
    write_lock(lock, project_root())
    store = tmp_path / "v2"
    RunStore.create(store, lock.read_bytes(), canonical_schedule()).close()
    (store / "writer.lock").unlink()
    (store / "writer.lock").symlink_to(outside / "precious")
    (store / "HEAD.tmp").unlink(missing_ok=True)
    (store / "HEAD.tmp").symlink_to(outside / "created-by-attack")
    (store / "evidence").symlink_to(outside, target_is_directory=True)
    with (store / "records.log").open("ab") as f:
        f.write(b"0" * 64 + b' {"torn')
    before = snapshot(outside)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "v2", "resume", str(store), "--lock", str(lock)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "UNSAFE_FILE" in done.stderr.splitlines()[-1]
    assert snapshot(outside) == before


# --- hard links: a write through one would change the file outside --------------------------


@pytest.mark.parametrize("name", ["writer.lock", "records.log", "journal.log"])
def test_store_hardlinked_file_is_refused_before_it_is_written(
    store: Path, outside: Path, name: str
) -> None:
    """A store file with a second name outside the store (its bytes intact, so verification
    passes): the writer refuses it (the link count, not a name, gives it away) before writing
    a byte, and the outside name is unchanged."""
    if not (store / name).exists():
        (store / name).write_bytes(b"")
    os.link(store / name, outside / "alias")
    assert verify_store(store).status is VerifyStatus.OK
    before = snapshot(outside)
    with pytest.raises(TamperError, match="2 hard links"):
        RunStore.open_for_resume(store, LOCK, ROWS)
    assert snapshot(outside) == before


def test_store_hardlinked_writer_lock_refuses_finalize(store: Path, outside: Path) -> None:
    (store / "writer.lock").unlink()
    os.link(outside / "precious", store / "writer.lock")
    with pytest.raises(TamperError, match="2 hard links"):
        finalize_store(store)
    assert (outside / "precious").read_bytes() == b"must not change\n"


def test_run_log_note_is_refused_when_hardlinked_or_linked(tmp_path: Path, outside: Path) -> None:
    """``run.log`` is appended through the store's descriptor with no link followed: a hard
    link or a symbolic link planted while the writer works is refused, the target unchanged."""
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as writer:
        writer.append_note("run.log", b'{"session": "run"}\n')
        assert (root / "run.log").read_bytes() == b'{"session": "run"}\n'
        (root / "run.log").unlink()
        os.link(outside / "precious", root / "run.log")
        with pytest.raises(TamperError, match=r"run\.log has 2 hard links"):
            writer.append_note("run.log", b"more\n")
        (root / "run.log").unlink()
        (root / "run.log").symlink_to(outside / "precious")
        with pytest.raises(TamperError, match=r"run\.log is a symbolic link"):
            writer.append_note("run.log", b"more\n")
        with pytest.raises(StoreError, match="not a note file name"):
            writer.append_note("records.log", b"more\n")
    assert (outside / "precious").read_bytes() == b"must not change\n"


def test_run_log_goes_to_the_store_opened_even_when_its_path_is_swapped(
    tmp_path: Path, outside: Path
) -> None:
    """The store directory renamed away and its path made a link to another directory while
    the writer works: the note still lands in the store the writer opened."""
    root = tmp_path / "run"
    moved = tmp_path / "moved"
    with RunStore.create(root, LOCK, ROWS) as writer:
        root.rename(moved)
        root.symlink_to(outside)
        writer.append_note("run.log", b'{"session": "run"}\n')
    assert (moved / "run.log").read_bytes() == b'{"session": "run"}\n'
    assert not (outside / "run.log").exists()
