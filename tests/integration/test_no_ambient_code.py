"""Nothing but the harness's own installed code runs in the process that holds the key.

- ``--credential-env`` re-executes ``python -I -m harness``: a ``blake3.py`` planted in the
  working directory is never imported by the process that holds the key (without the re-exec,
  ``python -m harness`` from that directory does import it: the plant is real).
- A planner plug-in runs from the bytes its digest names: an unchecked-hash ``.pyc`` planted in
  its ``__pycache__`` (which Python's own loader runs without looking at the source) does not
  run, and no bytecode cache is written next to it.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from harness.providers.plugin import load_plugin, resolve_plugin

PLANT = """\
import os
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "PLANTED-RAN"), "w") as f:
    f.write(str(os.getpid()))
raise ImportError("a planted module ran")
"""


def _harness(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_module_planted_in_the_working_directory_never_runs_beside_the_key(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "blake3.py").write_text(PLANT)
    marker = work / "PLANTED-RAN"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GOOGLE_"))}
    env["ECT_TEST_KEY"] = "AIzaFAKE-planted-module-test-0123456789"
    args = ("v2", "run", "--store", str(tmp_path / "store"), "--lock", str(tmp_path / "no-lock"))
    keyed = _harness(
        work, *args, "--provider", "gemini", "--credential-env", "ECT_TEST_KEY", env=env
    )
    assert not marker.exists(), keyed.stderr
    assert "Traceback" not in keyed.stderr
    # The harness itself ran, to its own one-line error (there is no lock).
    assert keyed.stderr.splitlines()[-1].startswith("error: cannot read the study lock")
    # The control: the same directory, no key to protect, no re-exec: the plant is imported.
    plain = _harness(work, *args, env=env)
    assert marker.exists(), plain.stderr
    assert "a planted module ran" in plain.stderr


def _plugin(tmp_path: Path) -> Path:
    path = tmp_path / "planner.py"
    path.write_text(
        "class P:\n"
        "    def respond(self, request):\n"
        "        return {'from': 'source'}\n"
        "PLANNER = P()\n"
    )
    planted = tmp_path / "planted.py"
    planted.write_text(
        "class P:\n"
        "    def respond(self, request):\n"
        "        return {'from': 'planted bytecode'}\n"
        "PLANNER = P()\n"
    )
    # An unchecked-hash .pyc of other code, where Python looks for planner.py's cache.
    cache = importlib.util.cache_from_source(str(path))
    py_compile.compile(
        str(planted),
        cfile=cache,
        dfile=str(path),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    planted.unlink()
    return path


def test_a_planted_pycache_does_not_run_in_place_of_the_plugin_source(tmp_path: Path) -> None:
    path = _plugin(tmp_path)
    cache = Path(importlib.util.cache_from_source(str(path)))
    planted = cache.read_bytes()
    # The control: Python's own file loader runs the planted bytecode, not the source.
    spec = importlib.util.spec_from_file_location("_control_planner", path)
    assert spec is not None
    assert spec.loader is not None
    control = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(control)
    assert control.PLANNER.respond({}) == {"from": "planted bytecode"}
    # The harness runs the digested source.
    plugin = resolve_plugin(f"python:{path}:PLANNER")
    assert load_plugin(plugin).respond({}) == {"from": "source"}
    assert cache.read_bytes() == planted  # no cache read, none rewritten
    assert sorted(p.name for p in cache.parent.iterdir()) == [cache.name]


def test_a_plugin_that_fails_to_load_is_one_line_and_leaves_no_module(tmp_path: Path) -> None:
    from harness.errors import ProviderSelectionError

    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('cannot start')\n")
    plugin = resolve_plugin(f"python:{path}:PLANNER")
    with pytest.raises(
        ProviderSelectionError, match=r"importing .*broken.py failed: RuntimeError: cannot start"
    ):
        load_plugin(plugin)
    assert f"_harness_planner_{plugin.digest[7:23]}" not in sys.modules
