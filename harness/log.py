"""structlog, configured once: a human console renderer by default, JSON lines on request.

Events are dotted names with data as keywords: ``log.info("store.commit", seq=12)``. Logs go to
stderr so a command's stdout stays machine-readable.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

__all__ = ["configure", "get_logger"]

_configured = False


def configure(*, json_lines: bool = False, level: int = logging.INFO) -> None:
    """Configure structlog for the process (idempotent; the last call wins)."""
    global _configured
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _configured = True


def get_logger(name: str) -> Any:
    """A bound logger for ``name``; configures defaults on first use."""
    if not _configured:
        configure()
    return structlog.get_logger(name)
