"""The progress line: it fits the terminal, shows failed attempts, and is not drawn off a tty."""

from __future__ import annotations

import io

import pytest

from harness.studies.v2.progress import Progress


def test_progress_live_line_fits_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    stream = io.StringIO()
    progress = Progress(stream, total=576, done=0, live=True)
    progress.start("w10-missing_data_abstention.incomplete.full_trace.s1")
    progress.failures(3, 3)
    progress.finish(provider_calls=4, tokens=1234, cost_usd=0.01)
    progress.close()
    drawn = [part for part in stream.getvalue().replace("\n", "\r").split("\r") if part]
    assert drawn
    for line in drawn:
        assert len(line.removeprefix("\x1b[2K")) <= 59


def test_progress_line_shows_failed_attempts_and_the_streak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    stream = io.StringIO()
    progress = Progress(stream, total=10, done=0, live=True)
    progress.start("cell")
    progress.failures(7, 4)
    assert "| failed 7 (streak 4) |" in stream.getvalue().rsplit("\r", 1)[-1]
    progress.failures(8, 0)
    assert "| failed 8 |" in stream.getvalue().rsplit("\r", 1)[-1]


def test_progress_off_a_terminal_writes_a_summary_line_per_n_cells() -> None:
    stream = io.StringIO()
    progress = Progress(stream, total=10, done=0, live=False, every=4)
    for _ in range(10):
        progress.start("cell")
        progress.failures(0, 0)
        progress.finish(provider_calls=1, tokens=1, cost_usd=0.0)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert [line.split("] ", 1)[1].split(" cells")[0] for line in lines] == [
        "4/10",
        "8/10",
        "10/10",
    ]
    assert "\r" not in stream.getvalue()
