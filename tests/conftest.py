"""Suite-wide hygiene: a command run in-process (click's CliRunner) sets the process's log level
from its verbosity (default: warnings only). Every test starts at the library's default level,
info, whatever command an earlier test or a module fixture ran."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _default_log_level() -> Iterator[None]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
