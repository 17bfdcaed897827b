"""``harness.log``: every event names its logger and carries a UTC time, in JSON lines and on the
console; a logger taken at import renders with the configuration chosen later."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator

import pytest

from harness.log import configure, get_logger

_EARLY = get_logger("harness.test.early")  # taken at import, as every module takes its logger


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    yield
    configure()  # the process default again, for the tests after this one


def test_json_lines_carry_the_logger_name_and_a_utc_timestamp(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(json_lines=True)
    before = dt.datetime.now(tz=dt.UTC)
    get_logger("harness.test.json").warning("test.event", cells=3)
    after = dt.datetime.now(tz=dt.UTC)
    line = json.loads(capsys.readouterr().err)
    assert {k: line[k] for k in ("event", "level", "logger", "cells")} == {
        "event": "test.event",
        "level": "warning",
        "logger": "harness.test.json",
        "cells": 3,
    }
    assert line["timestamp"].endswith("Z")  # UTC, said so
    stamp = dt.datetime.fromisoformat(line["timestamp"])
    assert stamp.utcoffset() == dt.timedelta(0)
    assert before - dt.timedelta(seconds=1) <= stamp <= after + dt.timedelta(seconds=1)


def test_console_lines_carry_the_logger_name_and_a_utc_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(json_lines=False)
    get_logger("harness.test.console").warning("test.event", cells=3)
    line = capsys.readouterr().err.rstrip("\n")
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[warning\s*\] test\.event\s+"
        r"\[harness\.test\.console\] cells=3",
        line,
    ), line


def test_a_logger_taken_before_configure_renders_with_the_last_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(json_lines=True, verbose=0)
    _EARLY.info("test.hidden")  # below the default level: not written
    _EARLY.warning("test.shown")
    lines = capsys.readouterr().err.splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["test.shown"]
    assert json.loads(lines[0])["logger"] == "harness.test.early"
