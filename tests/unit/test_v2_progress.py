"""The progress line: it fits the terminal, shows failed attempts, and is not drawn off a tty."""

from __future__ import annotations

import io

import pytest

from harness.studies.progress import Progress


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


def test_a_warning_ends_the_live_line_instead_of_gluing_onto_it() -> None:
    from harness.log import configure, get_logger

    stream = io.StringIO()
    progress = Progress(stream, total=10, done=0, live=True)
    progress.start("w01-lookup.clean.ect.s1")
    configure(verbose=0)
    import structlog

    captured = io.StringIO()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=captured))
    try:
        get_logger("test").warning("provider.slow")
    finally:
        configure(verbose=0)
    assert stream.getvalue().endswith("\n")  # the live line was ended first
    assert "provider.slow" in captured.getvalue()
    progress.close()
    before = stream.getvalue()
    get_logger("test").warning("after.close")
    assert stream.getvalue() == before  # the hook is gone with the line


def test_an_unpriced_run_shows_cost_unknown_never_zero() -> None:
    stream = io.StringIO()
    progress = Progress(stream, total=2, done=0, live=False, every=1, priced=False)
    progress.finish(provider_calls=2, tokens=1000, cost_usd=0.0)
    assert "cost unknown" in stream.getvalue()
    assert "$0.0000" not in stream.getvalue()


def test_a_python_warning_ends_the_live_line_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    shown: list[str] = []
    monkeypatch.setattr(
        warnings, "showwarning", lambda message, *_a, **_k: shown.append(str(message))
    )
    stream = io.StringIO()
    progress = Progress(stream, total=10, done=0, live=True)
    progress.start("w01-lookup.clean.ect.s1")
    warnings.showwarning("an SDK says something", UserWarning, "sdk.py", 1)
    assert stream.getvalue().endswith("\n")  # the live line ended before the warning
    assert shown == ["an SDK says something"]
    progress.close()
    assert warnings.showwarning != progress._warning  # restored with the line
