"""The macOS backend for real: sandbox-exec with the pinned profile. Runs only on macOS.

Linux cannot run sandbox-exec, so there this file is skipped; the profile's shape is checked
statically everywhere (tests/unit/test_sandbox_sbpl.py).
"""

from __future__ import annotations

import sys

import pytest

from harness.sandbox import Outcome, SeatbeltBackend, open_backend, render_table, run_probes

pytestmark = [
    pytest.mark.macos,
    pytest.mark.skipif(sys.platform != "darwin", reason="sandbox-exec exists only on macOS"),
]


def test_seatbelt_backend_opens_and_echoes() -> None:
    backend = open_backend()
    assert isinstance(backend, SeatbeltBackend)
    # No zygote on macOS: one fresh sandbox-exec child per call, as the paper pins.
    assert backend.describe().mode == "spawn"
    assert backend.zygote_pid() is None
    result = backend.call({"tool_id": "echo", "args": {"a": [1]}, "world": {}}, timeout_s=30)
    assert result.outcome is Outcome.OK, result.error
    assert result.response == {"a": [1]}


def test_seatbelt_probes_all_denied() -> None:
    report = run_probes(open_backend())
    assert report.ok, render_table(report)
