"""A command that needs a missing optional extra says, in one line, which one to install.

The extra is made missing with an import blocker in a fresh interpreter (the packages are
installed in the test venv); the wheel test installs without extras for real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_BLOCKED = (
    "import sys\n"
    "class Blocker:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in BLOCK or name in BLOCK:\n"
    "            raise ModuleNotFoundError(name)\n"
    "        return None\n"
    "BLOCK = set(sys.argv.pop(1).split(','))\n"
    "sys.meta_path.insert(0, Blocker())\n"
    "from harness.cli import main\n"
    "main()\n"
)


def _run(block: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED, block, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "GEMINI_KEY_FOR_TEST": "k" * 39},
    )


def test_gemini_without_the_extra_names_it(tmp_path: Path) -> None:
    done = _run(
        "google",
        "v2",
        "run",
        "--provider",
        "gemini",
        "--credential-env",
        "GEMINI_KEY_FOR_TEST",
        "--store",
        str(tmp_path / "s"),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        "error: --provider gemini needs the [gemini] extra: pip install 'ect-harness[gemini]'"
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s").exists()


def test_verify_needs_no_extra(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "harness" / "examples" / "regional-sum"
    args = [
        f"--{n}={example / (n + '.json')}"
        for n in ("descriptor", "requirements", "ledger", "certificate")
    ]
    done = _run("google,matplotlib", "verify", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
