"""``scripts/test`` refuses a worker count that is not a whole number, before doing anything."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.lock import project_root


@pytest.mark.parametrize("value", ["two", "-1", "2.5", " "])
def test_a_worker_count_that_is_not_a_whole_number_is_one_line_exit_2(value: str) -> None:
    done = subprocess.run(
        ["bash", str(project_root() / "scripts" / "test"), "tests/unit"],
        env={**os.environ, "TEST_WORKERS": value, "VENV": "/nonexistent/never-built"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: TEST_WORKERS must be a whole number, not '{value}'"
    ]
    assert done.stdout == ""
