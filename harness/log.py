"""structlog, configured once: a human console renderer by default, JSON lines on request.

Events are dotted names with data as keywords: ``log.info("store.commit", seq=12)``. Logs go to
stderr so a command's stdout stays machine-readable.

Verbosity (``harness -v/-q``): by default the console shows warnings and errors only (plus a
command's own progress line and summary); ``-v`` adds info events (preflight checks, store
creation, resume), ``-vv`` debug events (one per provider attempt), ``-q`` leaves errors and
hides the progress line. Per-attempt events are debug: a failing run of thousands of attempts
must not bury the progress line.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable, MutableMapping
from typing import Any

import structlog

from harness.terminal import LoggingHandler, escape, show_warning

__all__ = ["before_log_line", "configure", "get_logger", "level_for", "verbosity"]

_configured = False
_verbosity = 0
_before_line: list[Callable[[], None]] = []


def before_log_line(hook: Callable[[], None] | None) -> None:
    """Call ``hook`` before each log line is written (None: no hook).

    A live progress line sets one to end itself first, so a warning never glues onto it.
    """
    _before_line.clear()
    if hook is not None:
        _before_line.append(hook)


def _end_live_line(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for hook in _before_line:
        hook()
    return event


def level_for(verbose: int) -> int:
    """The log level of a verbosity: -1 quiet (errors), 0 warnings, 1 info, 2+ debug."""
    if verbose < 0:
        return logging.ERROR
    return (logging.WARNING, logging.INFO)[verbose] if verbose < 2 else logging.DEBUG


def verbosity() -> int:
    """The verbosity the process was configured with (-1 quiet, 0 default, 1+ verbose)."""
    return _verbosity


def configure(
    *, json_lines: bool = False, level: int = logging.INFO, verbose: int | None = None
) -> None:
    """Configure structlog for the process (idempotent; the last call wins).

    Args:
        json_lines: JSON lines instead of console text.
        level: the lowest level logged (ignored when ``verbose`` is given).
        verbose: the command line's verbosity (see ``level_for``).
    """
    global _configured, _verbosity
    if verbose is not None:
        _verbosity = verbose
        level = level_for(verbose)
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            _end_live_line,
            renderer,
            _inert,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # What libraries log with no handler of their own, and their warnings, shown made inert.
    if not isinstance(logging.lastResort, LoggingHandler):
        logging.lastResort = LoggingHandler(logging.WARNING)
    warnings.showwarning = show_warning
    _configured = True


def _inert(_logger: Any, _name: str, rendered: Any) -> Any:
    """Escape the rendered line: an event's values may quote a model, provider or file name.

    (Typed ``Any``: structlog types every processor as taking the event mapping, while the one
    after the renderer takes the rendered string.)"""
    return escape(rendered, multiline=True) if isinstance(rendered, str) else rendered


def get_logger(name: str) -> Any:
    """A bound logger for ``name``; configures defaults on first use."""
    if not _configured:
        configure()
    return structlog.get_logger(name)
