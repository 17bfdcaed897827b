"""structlog, configured once: a human console renderer by default, JSON lines on request.

Events are dotted names with data as keywords: ``log.info("store.commit", seq=12)``. Logs go to
stderr so a command's stdout stays machine-readable. Every event carries the name of the logger
that emitted it (``logger``, e.g. ``harness.studies.v2``) and the UTC time it was emitted
(``timestamp``: ISO 8601 to the microsecond in JSON lines, to the second on the console), so a
multi-hour run's log can be searched and lined up with its store. Log output is never part of
anything hashed, stored or compared; the clock is read here only.

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
from typing import Any, Final, TextIO

import structlog
from structlog.typing import FilteringBoundLogger

from harness.terminal import LoggingHandler, escape, show_warning

__all__ = ["before_log_line", "configure", "get_logger", "level_for", "verbosity"]

_CONSOLE_TIME: Final = "%Y-%m-%dT%H:%M:%SZ"
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


class _NamedPrinter(structlog.PrintLogger):
    """structlog's printer, knowing the name ``get_logger`` was given (``_add_name`` reads it)."""

    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name

    @staticmethod
    def factory(file: TextIO) -> Callable[..., _NamedPrinter]:
        """The logger factory: ``get_logger(name)``'s ``name`` arrives as the first argument."""
        return lambda *args: _NamedPrinter(file, str(args[0]) if args else "")


def _add_name(
    logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    name = getattr(logger, "name", "")
    if name:
        event.setdefault("logger", name)
    return event


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
    stamp = structlog.processors.TimeStamper(fmt="iso" if json_lines else _CONSOLE_TIME, utc=True)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            _add_name,
            stamp,
            structlog.processors.format_exc_info,
            _end_live_line,
            renderer,
            _inert,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_NamedPrinter.factory(sys.stderr),
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


def get_logger(name: str) -> FilteringBoundLogger:
    """A logger for ``name`` whose every event carries ``logger=name``; configures defaults on
    first use.

    The logger is a lazy proxy: it renders with whatever ``configure`` set last, so a module
    may take its logger at import, before the command line chose the format and verbosity.
    """
    if not _configured:
        configure()
    logger: FilteringBoundLogger = structlog.get_logger(name)
    return logger
