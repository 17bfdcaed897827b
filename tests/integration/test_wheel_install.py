"""The built wheel works outside the checkout: a fresh venv, an unrelated working directory.

The wheel is built from this tree and installed with ``--no-deps``; the new venv reaches the
dependencies through a ``.pth`` line naming this venv's site-packages (no network at test time,
and ``.pth`` files inside that directory, such as the editable install's, are not processed).
Then every command a new user meets first runs from a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.resources import code_root

pytestmark = pytest.mark.skipif(
    not (code_root() / "pyproject.toml").is_file(), reason="needs the source checkout to build"
)


def _run(argv: list[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``harness`` script of a fresh venv holding only the wheel built from this tree."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a clean copy of the sources: an in-tree build would reuse (and leave behind)
    # the checkout's build/ directory, whose stale modules would ride along into the wheel.
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(code_root() / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("harness", "preflight", "schedules", "sandbox_profiles"):
        shutil.copytree(code_root() / name, source / name, symlinks=True, ignore=ignore)
    wheels = base / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(wheels),
            str(source),
        ],
        base,
    )
    (wheel,) = wheels.glob("ect_harness-*.whl")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (purelib / "deps-from-test-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(
        [
            sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
            "install", "-q", "--no-deps", "--no-index", str(wheel),
        ],
        base,
    )  # fmt: skip
    return venv / "bin" / "harness"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def test_the_installed_package_is_not_the_checkout(installed: Path, work: Path) -> None:
    probe = "import harness, harness.resources as r; print(harness.__file__, r.is_checkout())"
    out = _run([str(installed.parent / "python"), "-c", probe], work).stdout.split()
    assert not out[0].startswith(str(code_root() / "harness"))
    assert out[1] == "False"


def test_examples_are_listed_and_verify(installed: Path, work: Path) -> None:
    listing = _run([str(installed), "examples"], work).stdout.splitlines()
    name, path = listing[0].split()
    assert name == "regional-sum"
    assert Path(path, "certificate.json").is_file()
    argv = listing[1].split()
    assert argv[:2] == ["harness", "verify"]
    done = _run([str(installed), *argv[1:]], work)
    assert '"decision":"complete"' in done.stdout.replace(" ", "")


def test_sandbox_probe_and_describe(installed: Path, work: Path) -> None:
    _run([str(installed), "sandbox", "probe"], work)
    described = _run([str(installed), "sandbox", "describe"], work).stdout
    assert "_data/sandbox_profiles" in described


def test_lock_check_works_and_lock_writing_names_the_checkout(installed: Path, work: Path) -> None:
    assert "is current" in _run([str(installed), "lock", "--check"], work).stdout
    done = _run([str(installed), "lock"], work, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: harness lock writes the lock of a source checkout, and this harness is an "
        "installed package: run it in a checkout, or pass --root CHECKOUT"
    ]


def test_static_study_runs_and_reports(installed: Path, work: Path) -> None:
    _run([str(installed), "static", "run", "--out", "static"], work)
    _run([str(installed), "static", "report", "static"], work)
    assert (work / "static" / "report" / "table2.md").is_file()
    _run([str(installed), "store", "verify", "static"], work)


def test_v2_study_runs_and_reports(installed: Path, work: Path) -> None:
    # A 24-cell pilot: what the wheel must prove is that the installed package runs the study,
    # its report and its verification; the full 576 cells are the slow tier's to run.
    _run([str(installed), "v2", "run", "--limit", "24", "--store", "v2"], work)
    _run([str(installed), "v2", "report", "v2"], work)
    assert (work / "v2" / "report" / "report.md").is_file()
    _run([str(installed), "store", "verify", "v2"], work)
