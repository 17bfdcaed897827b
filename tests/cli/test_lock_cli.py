"""``harness lock``: writes the lock; ``--check`` passes when current and exits 3 when stale."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.lock import DEFAULT_LOCK_PATH, build_lock, encode_lock, project_root
from harness.store import lock_digest


def _copy(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("harness", "preflight", "sandbox_profiles", "schedules"):
        shutil.copytree(project_root() / name, dest / name, ignore=ignore)
    return dest


def test_lock_cli_writes_and_checks(tmp_path: Path) -> None:
    root = _copy(tmp_path / "p")
    out = tmp_path / "lock.json"
    runner = CliRunner()
    result = runner.invoke(main, ["lock", "--root", str(root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data == encode_lock(build_lock(root))
    assert result.output.startswith(f"wrote {out} ({lock_digest(data)})\n")
    assert "  source  harness/ (" in result.output
    result = runner.invoke(main, ["lock", "--root", str(root), "--out", str(out), "--check"])
    assert result.exit_code == 0, result.output
    assert result.output == f"study lock {out} is current ({lock_digest(data)})\n"


def test_lock_cli_check_stale_exits_3_naming_the_change(tmp_path: Path) -> None:
    root = _copy(tmp_path / "p")
    runner = CliRunner()
    assert runner.invoke(main, ["lock", "--root", str(root)]).exit_code == 0
    assert (root / DEFAULT_LOCK_PATH).is_file()
    (root / "harness" / "errors.py").write_text("# edited\n")
    result = runner.invoke(main, ["lock", "--root", str(root), "--check"])
    assert result.exit_code == 3
    assert "stale: source harness/errors.py changed\n" in result.output


def test_lock_cli_missing_covered_file_is_one_line(tmp_path: Path) -> None:
    root = _copy(tmp_path / "p")
    before = (root / DEFAULT_LOCK_PATH).read_bytes()
    (root / "sandbox_profiles" / "tool-worker.sb").unlink()
    result = CliRunner().invoke(main, ["lock", "--root", str(root)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "covers sandbox_profile sandbox_profiles/tool-worker.sb, which does not exist" in (
        result.output
    )
    assert (root / DEFAULT_LOCK_PATH).read_bytes() == before
