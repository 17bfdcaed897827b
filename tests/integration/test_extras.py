"""A command that needs a missing optional extra says, in one line, which one to install.

The extra is made missing with an import blocker in a fresh interpreter (the packages are
installed in the test venv); the wheel test installs without extras for real.
"""

from __future__ import annotations

import json
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


def test_v2_report_without_plots_writes_every_file_but_the_figure(tmp_path: Path) -> None:
    from v2_report_support import synthetic_store

    store = synthetic_store(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("figure.png", "figure.svg", "figure.pdf"):
        (out / name).write_bytes(b"a figure of older results")
    done = _run("matplotlib", "v2", "report", str(store), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "install 'ect-harness[plots]' for figure.png" in done.stderr
    names = sorted(p.name for p in out.iterdir())
    tables = ["report.md", "table4.csv", "table4.tex", "hypotheses.csv", "analysis.json"]
    assert names == sorted([*tables, "report.html", "report-manifest.json"])
    manifest = json.loads((out / "report-manifest.json").read_text())
    assert not {"figure.png", "figure.svg", "figure.pdf"} & set(manifest["files"])
    assert "without the [plots] extra" in (out / "report.html").read_text()


def test_static_report_without_plots_writes_every_table(tmp_path: Path) -> None:
    run = _run("matplotlib", "static", "run", "--split", "dev", "--out", "run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (tmp_path / "run" / "report").mkdir()
    (tmp_path / "run" / "report" / "ucr.png").write_bytes(b"a figure of older results")
    done = _run("matplotlib", "static", "report", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "install 'ect-harness[plots]' for ucr.png" in done.stderr
    assert not (tmp_path / "run" / "report" / "ucr.png").exists()
    assert (tmp_path / "run" / "report" / "table2.md").is_file()
    assert "ucr.png" not in done.stderr.splitlines()[-1]


def test_openai_without_the_extra_names_it(tmp_path: Path) -> None:
    done = _run(
        "openai",
        "v2",
        "run",
        "--provider",
        "openai",
        "--model",
        "m",
        "--no-credential",
        "--store",
        str(tmp_path / "s"),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        "error: --provider openai needs the [openai] extra: pip install 'ect-harness[openai]'"
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s").exists()
