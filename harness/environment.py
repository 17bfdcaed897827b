"""The environment that produced a run: provenance, never part of what the study lock binds.

An environment is the interpreter (implementation and version), the platform (OS and machine
architecture) and the installed version of every runtime dependency the ``ect-harness``
distribution declares (core and the ``gemini``/``openai``/``plots`` extras; ``absent`` when not
installed; dev tools are left out, they produce no result).

Where it is kept:

- the study lock records the environment it was written in, as the *reference* that
  ``--require-environment`` holds a run to (``harness lock --check`` names each difference and
  still exits 0: a different environment never makes the lock stale);
- a run store records the environment of every writer session: the genesis record the first
  session's, each resume's session journal entry its own (docs/store.md);
- ``v2 status``, ``audit``, ``replay``, ``v2 compare`` and every report file name it
  (``describe_store``).

This module reads installed-distribution metadata and the interpreter; it writes nothing.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from harness.errors import EnvironmentMismatchError, StudyLockError
from harness.store import GenesisRecord, JournalEntry, SessionEntry, StoreView

__all__ = [
    "DISTRIBUTION",
    "Environment",
    "SessionEnvironment",
    "current_environment",
    "describe_store",
    "differences",
    "environment_header",
    "require_same",
    "session_environments",
]

DISTRIBUTION: Final = "ect-harness"
_RUNTIME_EXTRAS: Final = frozenset({"gemini", "openai", "plots"})
_REQUIREMENT_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA_MARKER: Final = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


class Environment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Interpreter, platform and runtime dependency versions (name -> version or ``absent``)."""

    implementation: str
    python: str
    system: str
    machine: str
    dependencies: dict[str, str]

    def interpreter(self) -> str:
        """``CPython 3.11.7``."""
        return f"{self.implementation} {self.python}"

    def short(self) -> str:
        """``CPython 3.11.7 on Linux x86_64``."""
        return f"{self.interpreter()} on {self.system} {self.machine}"

    def describe(self) -> str:
        """``CPython 3.11.7 on Linux x86_64; blake3 1.0.11, click 8.5.1, ...``."""
        deps = ", ".join(f"{name} {version}" for name, version in sorted(self.dependencies.items()))
        return f"{self.short()}; {deps}"


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def current_environment() -> Environment:
    """This interpreter, this platform and the installed version of every runtime dependency.

    Raises:
        StudyLockError: the ``ect-harness`` distribution is not installed (its metadata lists the
            dependencies; ``scripts/_venv.sh`` and ``pip install`` both install it).
    """
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError as e:
        raise StudyLockError(
            f"the {DISTRIBUTION} distribution is not installed, so its dependencies are unknown; "
            "install the project (pip install, or scripts/_venv.sh) and run it from there"
        ) from e
    dependencies: dict[str, str] = {}
    for requirement in requirements:
        requirement_name, _, marker = requirement.partition(";")
        extra = _EXTRA_MARKER.search(marker)
        if extra is not None and extra.group(1) not in _RUNTIME_EXTRAS:
            continue  # dev tools do not produce results
        found = _REQUIREMENT_NAME.match(requirement_name.strip())
        if found is None or _normalise(found.group(0)) == DISTRIBUTION:
            continue
        name = _normalise(found.group(0))
        try:
            dependencies[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            dependencies[name] = "absent"
    return Environment(
        implementation=platform.python_implementation(),
        python=platform.python_version(),
        system=platform.system(),
        machine=platform.machine(),
        dependencies=dict(sorted(dependencies.items())),
    )


def differences(
    reference: Environment, here: Environment, there: str, here_word: str = "here"
) -> list[str]:
    """One line per difference between ``here`` and ``reference`` (``there`` names it).

    Example: ``interpreter 3.11.2 here, 3.11.7 when locked``; ``google-genai absent here,
    3.6.1 when locked``. Empty when they are equal.
    """
    lines = []
    if reference.implementation != here.implementation:
        lines.append(
            f"interpreter {here.interpreter()} {here_word}, {reference.interpreter()} {there}"
        )
    elif reference.python != here.python:
        lines.append(f"interpreter {here.python} {here_word}, {reference.python} {there}")
    if (reference.system, reference.machine) != (here.system, here.machine):
        lines.append(
            f"platform {here.system} {here.machine} {here_word}, "
            f"{reference.system} {reference.machine} {there}"
        )
    for name in sorted(reference.dependencies.keys() | here.dependencies.keys()):
        mine = here.dependencies.get(name, "not declared")
        theirs = reference.dependencies.get(name, "not declared")
        if mine != theirs:
            lines.append(f"{name} {mine} {here_word}, {theirs} {there}")
    return lines


def require_same(references: Sequence[tuple[Environment, str]], here: Environment) -> None:
    """Refuse (``--require-environment``) when ``here`` differs from any reference; each
    reference comes with the words that name it (``when locked``, ``at record 12``).

    Raises:
        EnvironmentMismatchError: a first line, then one line per difference.
    """
    lines = [
        line for reference, there in references for line in differences(reference, here, there)
    ]
    if lines:
        listed = "".join(f"\n  {line}" for line in lines)
        raise EnvironmentMismatchError(
            f"--require-environment: this environment differs in {len(lines)} "
            f"{'way' if len(lines) == 1 else 'ways'}; nothing was written:{listed}"
        )


class SessionEnvironment(msgspec.Struct, frozen=True, kw_only=True):
    """The environment one writer session of a store recorded (``records``: the record count
    it found; 1 for the first session, whose environment is in genesis)."""

    records: int
    environment: Environment


def _decode(value: Any) -> Environment | None:
    if not isinstance(value, Mapping):
        return None
    try:
        return msgspec.convert(value, Environment, strict=True)
    except msgspec.ValidationError:
        return None


def session_environments(
    genesis: GenesisRecord | None, journal: Sequence[JournalEntry]
) -> list[SessionEnvironment]:
    """The environments a store's writer sessions recorded, in order: genesis's (the first
    session's), then each resume's session entry's. A store written before they were recorded
    has none; a recorded object that is not an environment is left out.
    """
    found = []
    if genesis is not None:
        first = _decode(genesis.environment)
        if first is not None:
            found.append(SessionEnvironment(records=1, environment=first))
    for entry in journal:
        if not isinstance(entry, SessionEntry):
            continue
        env = _decode(entry.environment)
        if env is not None:
            found.append(SessionEnvironment(records=entry.records, environment=env))
    return [
        SessionEnvironment(records=s.records, environment=_sanitised(s.environment)) for s in found
    ]


_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._+-]")


def _safe(text: str) -> str:
    # A store may come from anyone: what it recorded reaches terminals, Markdown, LaTeX and
    # HTML, so only name and version characters pass (anything else shows as "?").
    return _UNSAFE.sub("?", text[:64])


def _sanitised(env: Environment) -> Environment:
    return Environment(
        implementation=_safe(env.implementation),
        python=_safe(env.python),
        system=_safe(env.system),
        machine=_safe(env.machine),
        dependencies={_safe(k): _safe(v) for k, v in sorted(env.dependencies.items())[:64]},
    )


def environment_header(sessions: Sequence[SessionEnvironment]) -> str:
    """One line naming what produced a store, for status, audit, replay and report headers.

    ``Environment: CPython 3.11.7 on Linux x86_64 (blake3 1.0.11, ...)``; each resume in
    another environment is named after it with what differed; ``not recorded`` for an older
    store.
    """
    if not sessions:
        return "Environment: not recorded (a store written before environments were recorded)"
    first = sessions[0].environment
    deps = ", ".join(f"{name} {v}" for name, v in first.dependencies.items())
    line = f"Environment: {first.short()} ({deps})"
    for later in sessions[1:]:
        # A resume in the same environment is not named: its reports equal an uninterrupted
        # run's, byte for byte.
        changed = differences(first, later.environment, "at first", here_word="then")
        if changed:
            line += f"; resumed at record {later.records}: {', '.join(changed)}"
    return line


def describe_store(view: StoreView) -> str:
    """``environment_header`` of the sessions a store read back verified recorded."""
    return environment_header(session_environments(view.genesis, view.journal))
