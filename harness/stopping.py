"""A run stopped by a signal winds down once: a further SIGINT or SIGTERM is noted, not fatal.

A study run stops cleanly on its first SIGINT/SIGTERM (its trio signal receiver cancels the work
in flight, keeps every committed record and names the resume command). While it winds down a
second signal must not cut that short: GNU ``timeout`` and many process managers send the signal
twice (to the process, then to its group), and an impatient Ctrl-C does too.
``install_signal_handlers`` (called once by the console entry point) sets handlers that, once
``request_stop`` was called, write one line and ignore the signal; before that, SIGINT raises
``KeyboardInterrupt`` as Python's default does and SIGTERM ends the process as the default action
would. ``hold_at_exit`` keeps a repeat from ending the process by the signal during the
interpreter's own shutdown.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

__all__ = ["hold_at_exit", "install_signal_handlers", "request_stop", "stop_requested"]

_STOPPING = threading.Event()
_NOTE = b"harness: already stopping; the run ends at its next safe point\n"


def request_stop() -> None:
    """Mark this process as stopping (the first stop signal was taken)."""
    _STOPPING.set()


def stop_requested() -> bool:
    """Whether a run of this process is already stopping."""
    return _STOPPING.is_set()


def _handle(signum: int, _frame: FrameType | None) -> None:
    if _STOPPING.is_set():
        os.write(2, _NOTE)  # async-signal-safe; logging could deadlock on its lock here
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_signal_handlers() -> None:
    """Set the SIGINT and SIGTERM handlers of this process (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _handle)


def hold_at_exit() -> None:
    """Block SIGINT and SIGTERM for the rest of a stopping process's life.

    Called as the process exits after a stop: the interpreter's shutdown resets Python signal
    handlers to the default action, so a late repeat would otherwise end the process by the
    signal instead of with the stop's exit code. A blocked signal still pending at exit is
    discarded.
    """
    if _STOPPING.is_set() and threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
