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

Credentials: no test sees an ambient provider credential or endpoint (``GOOGLE_*``, ``GEMINI_*``,
``OPENAI_*``); they are cleared once for the whole session, before any module fixture runs, so a
module's shared run is as hermetic as a test's own. A test that needs one sets it with
``monkeypatch``, which puts the cleared state back afterwards.

The full study: ``full_study`` runs the simulated V2 study (all 576 cells) once per session, for
the few ``slow`` tests that prove what only the whole study can; they read it and never write.

Preflight's sandbox probes: preflight proves the sandbox before every run by running each
denial probe against real confined children (about 2.5 s). Within one test process, a sandbox
whose probes all held once is not probed again by preflight: ``_preflight_probes_once`` keeps
that real report and gives it to a later preflight whose probes would run with the same inputs:
the backend's description (backend, tier, policy digest, caps), the store directory probed,
the child's environment allowlist and the probe child's source. A report that did not hold is
never kept. A test that weakens the sandbox in any other way in process takes
``real_preflight_probes``, which turns the memo off. ``harness sandbox probe``, ``run_probes``
itself and the tests of the probes are never memoized.

Strategies shared by the property tests live here too (``json_values``); a test file imports
them with ``from conftest import json_values``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from hypothesis import settings
from hypothesis import strategies as st

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


_AMBIENT_PREFIXES = ("GOOGLE_", "GEMINI_", "OPENAI_")


@pytest.fixture(scope="session", autouse=True)
def _no_ambient_credentials() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.upper().startswith(_AMBIENT_PREFIXES):
                patch.delenv(name)
        yield


@pytest.fixture(scope="session", autouse=True)
def _preflight_probes_once() -> Iterator[None]:
    import msgspec  # here: no harness import at collection

    from harness.sandbox import ChildBackend, ProbeReport, _probes, _runner, run_probes
    from preflight import _checks

    held: dict[bytes, ProbeReport] = {}

    def probes_once(backend: ChildBackend, *, store_dir: Path | None = None) -> ProbeReport:
        inputs = (
            backend.describe(),
            None if store_dir is None else str(store_dir),
            _runner.CHILD_ENV_ALLOWLIST,
            _probes._PROBE_CHILD.read_text(encoding="utf-8"),
        )
        key = msgspec.json.encode(inputs)
        if key in held:
            return held[key]
        report = run_probes(backend, store_dir=store_dir)
        if report.ok:
            held[key] = report
        return report

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_checks, "run_probes", probes_once)
        yield


@pytest.fixture
def real_preflight_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Preflight runs every sandbox probe itself in this test (no memo)."""
    from harness.sandbox import run_probes
    from preflight import _checks

    monkeypatch.setattr(_checks, "run_probes", run_probes)


@dataclass(frozen=True)
class FullStudy:
    """One finished ``python -m harness v2 run`` of the whole frozen schedule."""

    cwd: Path  # the directory the run started from
    store: Path
    lock: Path  # the lock of this tree, written right before the run
    done: subprocess.CompletedProcess[str]

    @property
    def manifest_line(self) -> str:
        return next(line for line in self.done.stdout.splitlines() if line.startswith("manifest: "))


@pytest.fixture(scope="session")
def full_study(tmp_path_factory: pytest.TempPathFactory) -> FullStudy:
    from harness.lock import project_root, write_lock  # here: no harness import at collection

    work = tmp_path_factory.mktemp("full-study")
    lock = work / "study-lock.json"
    write_lock(lock, project_root())
    cwd = work / "a"
    cwd.mkdir()
    store = cwd / "run-one"
    argv = [sys.executable, "-m", "harness", "v2", "run", "--store", str(store)]
    argv += ["--lock", str(lock)]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return FullStudy(cwd=cwd, store=store, lock=lock, done=done)


def json_scalars(
    *, integers: tuple[int, int] = (-(2**63), 2**63 - 1), nan: bool = False, text: int = 12
) -> st.SearchStrategy[object]:
    """JSON scalars: null, booleans, integers in the closed range ``integers``, floats (finite
    unless ``nan``, which also admits the infinities), strings of up to ``text`` characters."""
    return (
        st.none()
        | st.booleans()
        | st.integers(min_value=integers[0], max_value=integers[1])
        | (st.floats() if nan else st.floats(allow_nan=False, allow_infinity=False))
        | st.text(max_size=text)
    )


def json_values(
    scalars: st.SearchStrategy[object] | None = None,
    *,
    width: int = 4,
    keys: int = 8,
    leaves: int = 12,
) -> st.SearchStrategy[object]:
    """JSON-shaped values: ``scalars`` (default ``json_scalars()``) nested in lists and objects of
    up to ``width`` members with keys of up to ``keys`` characters, at most ``leaves`` scalars."""
    return st.recursive(
        json_scalars() if scalars is None else scalars,
        lambda inner: (
            st.lists(inner, max_size=width)
            | st.dictionaries(st.text(max_size=keys), inner, max_size=width)
        ),
        max_leaves=leaves,
    )
