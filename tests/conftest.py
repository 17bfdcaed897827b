"""Suite-wide hygiene: a command run in-process (click's CliRunner) configures logging for the
process (its verbosity and its captured stderr); each test gets the configuration it started
with back, so no test depends on which command an earlier one ran."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
