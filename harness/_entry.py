"""The ``harness`` console entry point: a small shell around ``harness.cli.main``.

Three things happen here, before the CLI (and everything it imports) is loaded:

- Ctrl-C while the program is still starting (importing the study, the SDK) ends with one line
  and exit 130, never a traceback;
- a second SIGINT/SIGTERM while a stopped run winds down is noted, not fatal
  (``harness.stopping``);
- ``--credential-env NAME``: the key is moved out of the environment before any provider call.
  Removing a variable with ``os.environ.pop`` does not erase it from the process's initial
  environment block, which ``/proc/<pid>/environ`` keeps showing to every process of the same
  user. So the process reads the key, writes it into a pipe, and re-executes itself without the
  variable; the new process image reads the key from the inherited pipe (named by
  ``HARNESS_CREDENTIAL_FD=<fd>:<NAME>``, which holds no secret) and closes it. The key then
  lives only in the new process's memory, never in any environment block. The new image runs
  isolated (``python -I``: no working directory or script directory on ``sys.path``, no
  ``PYTHON*`` variables, no user site-packages; the venv's own site-packages stay), so nothing
  planted in the working directory (a ``blake3.py``, say) is importable beside the key. The
  harness must therefore be installed in the interpreter's environment, as the venv installs it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Final, NoReturn

from harness._credential_pipe import CREDENTIAL_FD_VARIABLE, inherited, take_inherited
from harness.errors import StoppedError
from harness.stopping import hold_at_exit, install_signal_handlers

__all__ = ["run"]

_OPTION: Final = "--credential-env"
# A key is at most 1 KiB (``credentials``); a pipe holds 64 KiB, so the write never blocks.
_MAX_PIPED: Final = 4096


def _credential_variable(argv: Sequence[str]) -> str | None:
    """The NAME of ``--credential-env NAME`` (or ``--credential-env=NAME``) in ``argv``."""
    for index, arg in enumerate(argv):
        if arg == _OPTION and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(_OPTION + "="):
            return arg[len(_OPTION) + 1 :]
    return None


def _reexec_without(name: str) -> None:
    """Re-execute this program with the key in a pipe instead of variable ``name``."""
    key = os.environ[name].encode("utf-8", "surrogateescape")
    if len(key) > _MAX_PIPED:
        return  # not a key: ``load_credential`` refuses it with its own message
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, key)
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k != name}
    env[CREDENTIAL_FD_VARIABLE] = f"{read_end}:{name}"
    sys.stdout.flush()
    sys.stderr.flush()
    argv = [sys.executable, "-I", "-m", "harness", *sys.argv[1:]]
    os.execve(sys.executable, argv, env)  # noqa: S606


def _interrupted() -> NoReturn:
    sys.stderr.write("error: interrupted while starting; nothing was written\n")
    sys.exit(StoppedError.exit_code)


def run() -> None:
    """The console script: re-execute without a named credential variable, then the CLI."""
    try:
        take_inherited()
        name = _credential_variable(sys.argv[1:])
        if name and name in os.environ and not inherited():
            _reexec_without(name)
        from harness.cli import main
    except KeyboardInterrupt:
        _interrupted()
    install_signal_handlers()
    try:
        main()
    finally:
        hold_at_exit()
