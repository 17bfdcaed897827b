"""Suite-wide hygiene.

Logging: a command run in-process (click's CliRunner) sets the process's log level from its
verbosity (default: warnings only). Every test starts at the library's default level, info,
whatever command an earlier test or a module fixture ran.

Hypothesis: two profiles. ``ci`` (chosen when ``CI`` is set, as on GitHub Actions) is
deterministic: examples are derived from each test's name (``derandomize``), no example
database is read or written, no deadline (a loaded 2-core runner must not turn slowness into
flakiness), and a failure prints the blob that reproduces it. ``dev`` (otherwise) explores
randomly and remembers failures in the local database. ``HYPOTHESIS_PROFILE`` overrides the
choice. A test's own ``@settings`` still wins for what it sets (e.g. ``max_examples``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


@pytest.fixture(autouse=True)
def _default_log_level() -> Iterator[None]:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
