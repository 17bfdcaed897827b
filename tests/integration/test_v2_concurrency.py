"""Ordered-commit concurrency, pilot stores and the loopback Gemini endpoint.

Real sandbox, real store, real subprocesses; the real google-genai client against the loopback
endpoint (``harness.providers.loopback`` with the simulated responder) on a port the test opens.

- The chain of a run at ``--max-cells`` N is byte for byte the chain of a sequential run (the
  records, the journal, HEAD): records in canonical order for every N.
- kill -9 at seeded random points of an N = 8 run, then resume with N = 1 and with N = 8: the
  same cell results as an uninterrupted run (slow).
- Through the CLI and the real Gemini client: N = 1 and N = 4 give the same outcome rows.
- Pilots: labelled in genesis and status, resumed only into their own rows, never finalized as
  the study; ``--limit 0``, a negative N and a pattern matching nothing are one-line errors.
- Staged attempts of a dead session are bound as orphaned on resume.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from v2_support import config, reduced, run_into

from harness.canonical import canonical_bytes
from harness.cli import main
from harness.lock import project_root, write_lock
from harness.providers.attempts import AttemptIntent
from harness.providers.kinds import ProviderName, Role
from harness.providers.loopback import Answer, FakeGemini, RecordedRequest, error
from harness.providers.loopback_sim import SimulatedResponder
from harness.sandbox import open_backend
from harness.store import RunStore, VerifyStatus, read_store, verify_store
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.schedule import plain_rows
from harness.studies.v2.study import summary_rows

DRIVER = Path(__file__).resolve().parent / "v2_support.py"
TIMEOUT_S = 180.0
KEY_ENV = "HARNESS_TEST_LOOPBACK_KEY"


@pytest.fixture(scope="module")
def opaque_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "lock.json"
    path.write_bytes(b'{"lock": "opaque test lock"}')
    return path


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("studylock") / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture(scope="module")
def tools() -> SandboxTools:
    return SandboxTools(open_backend(), timeout_s=20.0)


@pytest.fixture
def loopback() -> Iterator[FakeGemini]:
    responder = SimulatedResponder(config().generation_config)
    with FakeGemini(responder=responder, record=False) as server:
        yield server


def _stored(store: Path) -> list[bytes]:
    view = read_store(store)
    assert [c.row_index for c in view.cells] == list(range(len(view.cells)))
    return [canonical_bytes(msgspec.convert(c.result, CellResult)) for c in view.cells]


def _chain(store: Path) -> dict[str, bytes]:
    return {name: (store / name).read_bytes() for name in ("records.log", "journal.log", "HEAD")}


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _one_line_error(result: Any) -> str:
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    line: str = lines[0]
    return line


# --- the chain is a sequential run's ---------------------------------------------------------


def test_records_and_journal_are_a_sequential_runs_for_every_n(
    tmp_path: Path, opaque_lock: Path, tools: Any
) -> None:
    rows = reduced(24)
    chains = {}
    for n in (1, 3, 8):
        store = tmp_path / f"n{n}"
        report = run_into(
            store, rows, opaque_lock.read_bytes(), resume=False, tools=tools, max_cells=n
        )
        assert report.complete
        assert report.committed == 24
        view = read_store(store)
        assert [c.row["cell_id"] for c in view.cells] == [r.cell_id for r in rows]
        assert [c.row_index for c in view.cells] == list(range(24))
        assert not (store / "staging.log").exists()  # every staged attempt is in the journal
        chains[n] = _chain(store)
    assert chains[3] == chains[1]
    assert chains[8] == chains[1]


def test_max_cells_below_one_is_refused(tmp_path: Path, opaque_lock: Path, tools: Any) -> None:
    with pytest.raises(Exception, match="--max-cells must be at least 1, not 0"):
        run_into(
            tmp_path / "s",
            reduced(4),
            opaque_lock.read_bytes(),
            resume=False,
            tools=tools,
            max_cells=0,
        )


# --- staged attempts of a dead session --------------------------------------------------------


def _intent(cell: str) -> AttemptIntent:
    return AttemptIntent(
        provider=ProviderName.SIMULATED,
        simulated=True,
        model="sim",
        role=Role.PLANNER,
        cell_id=cell,
        prompt_id="planner.v1",
        attempt_index=0,
        retry_reason=None,
        request_hash="blake3:" + "0" * 64,
        config_digest="blake3:" + "1" * 64,
    )


def test_staged_attempts_of_a_dead_session_bind_as_orphaned(tmp_path: Path) -> None:
    rows = plain_rows(reduced(2))
    store = tmp_path / "store"
    writer = RunStore.create(store, b"lock", rows)
    writer.stage_begin(_intent(rows[1]["cell_id"]), row=1)  # a cell that never committed
    writer.close()  # the session dies with the attempt staged
    assert (store / "staging.log").exists()
    resumed = RunStore.open_for_resume(store, b"lock", rows)
    assert len(resumed.orphaned_attempts) == 1
    assert not (store / "staging.log").exists()
    resumed.writer.commit_cell(0, {"cell": 0}, [])
    resumed.writer.close()
    view = read_store(store)
    assert view.report.status is not VerifyStatus.TAMPER
    bound = view.cells[0].attempts
    assert [a.orphaned for a in bound] == [True]


# --- through the CLI and the real Gemini client ------------------------------------------------


def _loopback_run(store: Path, lock: Path, fake: FakeGemini, *extra: str) -> Any:
    os.environ[KEY_ENV] = "loopback-key-0123456789"
    try:
        return _invoke(
            "-q", "v2", "run", "--store", str(store), "--lock", str(lock),
            "--provider", "gemini", "--provider-base-url", fake.base_url,
            "--credential-env", KEY_ENV, *extra,
        )  # fmt: skip
    finally:
        os.environ.pop(KEY_ENV, None)


def test_gemini_loopback_outcome_rows_equal_at_n1_and_n4(
    tmp_path: Path, lock: Path, loopback: FakeGemini
) -> None:
    results = {}
    for n in (1, 4):
        store = tmp_path / f"n{n}"
        result = _loopback_run(store, lock, loopback, "--limit", "12", "--max-cells", str(n))
        assert result.exit_code == 0, result.output
        assert "PILOT: 12 of 576 cells (--limit 12)" in result.stdout
        assert "estimate:" not in result.stderr  # -q: no estimate, and no question
        assert verify_store(store).status is VerifyStatus.OK
        stored = [msgspec.convert(c.result, CellResult) for c in read_store(store).cells]
        assert all(r.provider == "gemini" for r in stored)
        # Latency is a measurement of this run, not an outcome: the rest must be equal.
        outcome_rows = [msgspec.structs.replace(r, provider_latency_ms=0.0) for r in stored]
        results[n] = summary_rows(stored), [canonical_bytes(r) for r in outcome_rows]
        log = [json.loads(line) for line in (store / "run.log").read_text().splitlines()]
        assert [entry["max_cells"] for entry in log] == [n]
    assert results[4] == results[1]


class _Outage:
    """The loopback responder until ``after`` requests, then a 429 quota error while down."""

    def __init__(self, after: int) -> None:
        self._inner = SimulatedResponder(config().generation_config)
        self._after = after
        self._count = 0
        self._lock = threading.Lock()
        self.down = True

    def __call__(self, request: RecordedRequest) -> Answer:
        with self._lock:
            self._count += 1
            failing = self.down and self._count > self._after
        if failing:
            return error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted.")
        return self._inner(request)


def test_breaker_with_n4_loses_only_uncommitted_cells_and_resume_matches(
    tmp_path: Path, lock: Path, loopback: FakeGemini
) -> None:
    reference = tmp_path / "reference"
    assert _loopback_run(reference, lock, loopback, "--limit", "24").exit_code == 0
    outage = _Outage(after=20)
    store = tmp_path / "store"
    with FakeGemini(responder=outage, record=False) as fake:
        result = _loopback_run(store, lock, fake, "--limit", "24", "--max-cells", "4")
        assert result.exit_code == 75, result.output
        line = _one_line_error(result)
        assert line.startswith("error: provider outage: ")
        assert "RESOURCE_EXHAUSTED" in line
        stopped = verify_store(store)
        assert stopped.status is not VerifyStatus.TAMPER
        assert not stopped.finalized
        assert 0 < stopped.cells < 24
        assert (store / "staging.log").exists()  # the dropped cells' attempts, for resume
        outage.down = False
        os.environ[KEY_ENV] = "loopback-key-0123456789"
        try:
            again = _invoke(
                "-q", "v2", "resume", str(store), "--lock", str(lock),
                "--credential-env", KEY_ENV, "--max-cells", "2",
            )  # fmt: skip
        finally:
            os.environ.pop(KEY_ENV, None)
        assert again.exit_code == 0, again.output
    view = read_store(store)
    assert view.report.finalized
    orphaned = [a for c in view.cells for a in c.attempts if a.orphaned]
    assert orphaned  # the attempts of the dropped cells are bound, not hidden

    def rows(root: Path) -> list[bytes]:
        results = [msgspec.convert(c.result, CellResult) for c in read_store(root).cells]
        return [
            canonical_bytes(msgspec.structs.replace(r, provider_latency_ms=0.0)) for r in results
        ]

    resumed = rows(store)
    expected = rows(reference)
    # Every cell none of whose attempts met the 429 is the uninterrupted run's cell; a cell
    # that met it but still had an answer is committed with that failure in its denominator
    # (at most the N = 4 cells in flight when the quota ran out).
    assert len(resumed) == len(expected) == 24
    hit = [
        any(entry.get("failure_kind") == "rate_limited" for entry in c.audit) for c in view.cells
    ]
    assert sum(hit) <= 4
    assert [r for r, h in zip(resumed, hit, strict=True) if not h] == [
        e for e, h in zip(expected, hit, strict=True) if not h
    ]


def test_loopback_answers_depend_on_the_request_bytes_alone() -> None:
    responder = SimulatedResponder(config().generation_config, fail_rate=0.5, seed=3)
    junk = RecordedRequest(method="POST", path="/x", headers={}, body=b"{}")
    first, second = responder(junk), responder(junk)
    assert first == second
    assert first.kind in ("reply", "reset", "disconnect")


# --- pilots -----------------------------------------------------------------------------------


def test_pilot_store_is_labelled_resumes_its_own_rows_and_is_never_the_study(
    tmp_path: Path, lock: Path
) -> None:
    store = tmp_path / "pilot"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "-q", "v2", "run", "--store", str(store),
         "--lock", str(lock), "--cells", "w10-*.s1", "--limit", "30", "--max-cells", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT_S
    while _records(store) < 4:
        assert process.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.kill()
    process.wait(TIMEOUT_S)
    genesis = read_store(store).genesis
    assert genesis is not None
    assert genesis.identity["pilot"] == {"limit": 30, "cells": ["w10-*.s1"], "rows": 30, "of": 576}
    assert read_store(store).pilot == genesis.identity["pilot"]
    result = _invoke("v2", "resume", str(store), "--lock", str(lock), "--max-cells", "2")
    assert result.exit_code == 0, result.output
    view = read_store(store)
    assert view.report.cells == view.report.schedule_rows == 30
    assert all(c.row["cell_id"].startswith("w10-") for c in view.cells)
    assert view.report.finalized  # sealed as a pilot
    status = _invoke("v2", "status", str(store))
    assert "PILOT: 30 of 576 cells (--limit 30 --cells w10-*.s1); not the study" in status.output
    sealed = _invoke("store", "finalize", str(store), "--expected-cells", "576")
    assert sealed.exit_code == 2
    assert "is a pilot" in _one_line_error(sealed)
    refused = _invoke("v2", "resume", str(store), "--lock", str(lock))
    assert refused.exit_code == 0  # finalized: nothing added
    assert "complete: 30 cells" in refused.output


def _records(store: Path) -> int:
    try:
        return (store / "records.log").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "0"], "error: --limit must be at least 1, not 0"),
        (["--max-cells", "-2"], "error: --max-cells must be at least 1, not -2"),
        (["--cells", "nothing-*"], "error: --cells 'nothing-*' matches no cell id"),
    ],
    ids=["limit-0", "negative-n", "no-match"],
)
def test_bad_pilot_and_concurrency_options_are_one_line_errors(
    tmp_path: Path, lock: Path, args: list[str], message: str
) -> None:
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *args)
    assert result.exit_code == 2
    assert _one_line_error(result).startswith(message)
    assert not store.exists()


# --- kill -9 at random points with N = 8 ------------------------------------------------------


def _start(mode: str, store: Path, lock: Path, rows: int, n: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    with (store.parent / f"driver-{mode}.log").open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(DRIVER), mode, str(store), str(lock), str(rows), str(n)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


@pytest.mark.slow
@pytest.mark.parametrize("resume_n", [1, 8])
def test_kill_9_at_random_points_with_n8_then_resume_gives_the_uninterrupted_rows(
    tmp_path: Path, opaque_lock: Path, tools: Any, resume_n: int
) -> None:
    rows = 96
    reference = tmp_path / "reference"
    run_into(reference, reduced(rows), opaque_lock.read_bytes(), resume=False, tools=tools)
    store = tmp_path / "store"
    chance = random.Random(1400 + resume_n)
    mode = "create"
    for _ in range(3):
        process = _start(mode, store, opaque_lock, rows, 8)
        target = _records(store) + chance.randint(2, 20)
        deadline = time.monotonic() + TIMEOUT_S
        while _records(store) < target and process.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(chance.uniform(0.0, 0.01))
        process.kill()
        process.wait(TIMEOUT_S)
        assert verify_store(store).status is not VerifyStatus.TAMPER
        mode = "resume"
    report = run_into(
        store, reduced(rows), opaque_lock.read_bytes(), resume=True, tools=tools, max_cells=resume_n
    )
    assert report.complete
    assert _stored(store) == _stored(reference)
    assert verify_store(store).status is not VerifyStatus.TAMPER
