"""The real-model lane through ``harness v2 run|resume``, against the fake Gemini server.

Every test drives the command line with the real google-genai client, the real sandbox, the
real store and preflight, pointed at ``providers_fake_gemini.FakeGemini`` on 127.0.0.1 (nothing
leaves the machine). The fake is not a model: past its script it answers every generateContent
request with an off-schema 200 (an unusable reply: a study outcome, which never trips the
breaker) and every metadata request with the model's metadata (the preflight request).

Covered: the provider identity bound in genesis (resume without provider flags, contradicting
flags refused with nothing written), preflight's no-token request (403, connection refused),
the circuit breaker (403 on every call, a quota exhausted mid-run with the frozen K=5, a cell
made only of outages never committed), the commands that end in the right place, and a quiet
console.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from providers_fake_gemini import FakeGemini, error, model_metadata, output, slow

from harness.cli import main
from harness.lock import project_root, write_lock
from harness.providers import ProviderName
from harness.providers.attempts import AttemptRecord
from harness.store import RunStore, read_store, verify_store
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.schedule import canonical_schedule

KEY = "fake-key-gemini-cli-0123456789"
DENIED = "Method doesn't allow unregistered callers (callers without established identity)."
QUOTA = "Resource has been exhausted (e.g. check quota)."


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "gemini.key"
    path.write_text(KEY + "\n")
    return path


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _error(result: Any) -> str:
    lines: list[str] = result.stderr.splitlines()
    assert lines, result.output
    assert "Traceback" not in result.stderr
    return lines[-1]


def _gemini(fake: FakeGemini, key: Path) -> list[str]:
    return [
        "--provider",
        "gemini",
        "--credential-file",
        str(key),
        "--provider-base-url",
        fake.base_url,
    ]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# --- preflight's request ---------------------------------------------------------------------


def test_v2_gemini_preflight_403_blocks_the_run_with_the_providers_reason(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    fake.metadata_always(error(403, "PERMISSION_DENIED", DENIED))
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert result.exit_code == 3
    line = _error(result)
    assert line.startswith("error: preflight failed (1 check), the run is blocked: provider: ")
    assert line.endswith(f"HTTP 403 PERMISSION_DENIED: {DENIED}")
    assert not store.exists()
    sent = fake.requests
    assert [(r.method, r.path) for r in sent] == [("GET", "/v1beta/models/gemini-2.5-flash")]
    assert sent[0].headers["x-goog-api-key"] == KEY  # the request is authenticated
    assert not fake.generate_requests  # no token was spent


def test_v2_gemini_preflight_connection_refused_blocks_the_run(
    tmp_path: Path, lock: Path, key: Path
) -> None:
    store = tmp_path / "store"
    url = f"http://127.0.0.1:{_closed_port()}/"
    result = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(lock),
        "--provider", "gemini", "--credential-file", str(key), "--provider-base-url", url,
    )  # fmt: skip
    assert result.exit_code == 3
    line = _error(result)
    assert line.startswith("error: preflight failed (1 check), the run is blocked: provider: ")
    assert "ConnectError" in line
    assert "Connection refused" in line
    assert not store.exists()


# --- the circuit breaker ---------------------------------------------------------------------


def test_v2_gemini_403_on_every_call_stops_unfinalized_and_commits_nothing(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    fake.always(error(403, "PERMISSION_DENIED", DENIED))
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert result.exit_code == 75
    line = _error(result)
    assert line.startswith(
        "error: provider outage: every provider attempt of cell w10-lookup.clean.critic.s1 "
        f"failed for infrastructure reasons (last: authentication: HTTP 403 PERMISSION_DENIED: "
        f"{DENIED})"
    )
    assert line.endswith(
        f"the store is not finalized; continue with `harness v2 resume {store} --lock {lock} "
        f"--credential-file {key}`"
    )
    assert "failed 4 (streak 4)" in result.stderr  # the progress line showed the streak
    report = verify_store(store)
    assert (report.cells, report.finalized) == (0, False)
    assert len(fake.generate_requests) == 4  # the cell's four decisions; nothing after it
    audit = _invoke("audit", str(store))
    assert audit.exit_code == 0, audit.output
    assert audit.stdout.splitlines()[0] == (
        f"provider: gemini; model gemini-2.5-flash; endpoint 127.0.0.1:{fake.port}, not Google's: "
        "a rehearsal or a proxy; planner none; credential key"
    )
    assert "failures by kind: authentication_failed 4" in audit.stdout
    assert f"  authentication_failed: 4 x HTTP 403 PERMISSION_DENIED: {DENIED}" in audit.stdout
    # Resume takes the provider from the genesis; without a credential it says what it needs.
    before = _snapshot(store)
    again = _invoke("v2", "resume", str(store), "--lock", str(lock))
    assert again.exit_code == 2
    assert _error(again) == (
        f"error: store {store} was run with gemini, model gemini-2.5-flash at {fake.base_url}; "
        "resume it with exactly one of --credential-file PATH or --credential-env NAME (the key "
        "is never stored)"
    )
    contradicting = [
        (
            ["--provider", "simulated"],
            f"error: store {store} was run with provider gemini; --provider simulated "
            "contradicts it (resume takes the provider from the store)",
        ),
        (
            ["--credential-file", str(key), "--provider-base-url", "http://127.0.0.1:9/"],
            f"error: store {store} was run against endpoint {fake.base_url}; "
            "--provider-base-url http://127.0.0.1:9/ contradicts it",
        ),
    ]
    for flags, expected in contradicting:
        refused = _invoke("v2", "resume", str(store), "--lock", str(lock), *flags)
        assert refused.exit_code == 2
        assert _error(refused) == expected
    assert _snapshot(store) == before  # nothing written by any refusal
    assert len(fake.requests) == 5  # and no request: refused before preflight


def test_v2_gemini_quota_mid_run_trips_the_breaker_after_five_in_a_row(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    # Cell 0 answered four times; cell 1 three times, then the quota runs out: cell 1 is
    # committed (one answered attempt suffices, its failure in the denominator) and the fifth
    # consecutive 429 (the fourth of cell 2) trips the breaker; cell 2 is dropped.
    fake.script(*[output({"unscripted": True})] * 7)
    fake.always(error(429, "RESOURCE_EXHAUSTED", QUOTA))
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert result.exit_code == 75
    line = _error(result)
    assert line.startswith(
        "error: provider outage: 5 consecutive provider attempts failed for infrastructure "
        f"reasons (last: quota: HTTP 429 RESOURCE_EXHAUSTED: {QUOTA}); the run stopped after "
        "2/576 committed cells"
    )
    view = read_store(store)
    assert not view.report.finalized
    results = [msgspec.convert(c.result, CellResult) for c in view.cells]
    assert [r.provider_failures for r in results] == [4, 4]  # unusable replies count too
    assert [[a["failure_kind"] for a in c.audit] for c in view.cells][1] == [
        "schema_mismatch", "schema_mismatch", "schema_mismatch", "rate_limited",
    ]  # fmt: skip
    assert len(fake.generate_requests) == 12
    status = _invoke("v2", "status", str(store))
    assert status.stdout.splitlines()[1] == (
        f"provider: gemini; model gemini-2.5-flash; endpoint 127.0.0.1:{fake.port}, not Google's: "
        "a rehearsal or a proxy; planner none; credential key"
    )
    report = _invoke("v2", "report", str(store))
    assert report.exit_code == 0, report.output
    lines = report.stdout.splitlines()
    endpoint = f"endpoint 127.0.0.1:{fake.port}, not Google's: a rehearsal or a proxy"
    assert lines[2] == (
        f"Run: provider gemini; model gemini-2.5-flash; {endpoint}; planner none; credential "
        "key; PARTIAL: 2 of 576 cells, not finalized."
    )
    assert lines[4] == f"**NOT THE PAPER'S FROZEN STUDY: {endpoint}.**"
    assert lines[6].startswith("**PARTIAL: the store is not finalized; only 2 of 576 cells")
    analysis = msgspec.json.decode((store / "report" / "analysis.json").read_bytes())
    assert analysis["partial"] is True
    # Every report file names the endpoint and the partial state, and none gives a verdict.
    files = _report_files(store / "report")
    assert len(files) == 10
    host = f"127.0.0.1:{fake.port}".encode()
    for name, data in files.items():
        assert host in data, name
        assert b"PARTIAL" in data, name
        assert b"PASS" not in data, name
    for name in ("report.md", "report.html", "hypotheses.csv", "analysis.json"):
        assert b"not evaluated: 2 of 576 cells" in files[name], name
    manifest = msgspec.json.decode(files["report-manifest.json"])
    assert manifest["store"]["not_frozen_study"] == f"NOT THE PAPER'S FROZEN STUDY: {endpoint}."
    # Two cells: the pipelines' denominators differ, so each count carries its own.
    table = lines.index("## Table 4") + 2
    assert lines[table : table + 4] == [
        "| Pipeline | U/0 | S | FC | R/0 | Turns | Calls | Transport | Rate limit | Auth | Server "
        "| Unusable |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        "| Current critic | 0 | 0/1 | 0/1 | 0 | 4.00 | 0.00 | 0 | 0 | 0 | 0 | 4 |",
        "| Controller | 0 | 0/1 | 0/1 | 0 | 4.00 | 0.00 | 0 | 1 | 0 | 0 | 3 |",
    ]
    # The controller cell's 429 entered the denominator: said next to Table 4.
    assert lines[table + 9] == (
        "Provider calls: 8 calls (8 attempts) included 0 retries (0 successful) and 8 final "
        "provider failures (1 rate limit, 7 unusable reply); under the frozen rule each final "
        "failure maps to continue and stays in the denominator."
    )
    assert lines[table + 11] == (
        "**INFRASTRUCTURE FAILURES IN THE RESULTS: 1 final provider failure is one where no "
        "model answered (quota 1); it maps to continue and stays in the denominator, and "
        "`harness v2 resume` cannot run it again (its cell is committed).**"
    )
    assert manifest["store"]["run"]["endpoint"] == f"127.0.0.1:{fake.port}"


def test_v2_gemini_unusable_replies_never_trip_the_breaker(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    # 20 off-schema replies in a row are study outcomes; then a 403 streak stops the run.
    fake.script(*[output({"unscripted": True})] * 20)
    fake.always(error(403, "PERMISSION_DENIED", DENIED))
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert result.exit_code == 75
    assert verify_store(store).cells == 5  # 20 unusable replies: five committed cells


# --- identity ----------------------------------------------------------------------------------


def test_v2_simulated_store_refuses_a_gemini_resume_with_nothing_written(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    store = tmp_path / "store"
    identity = {
        "provider": ProviderName.SIMULATED.value,
        "model": None,
        "endpoint": None,
        "api_version": None,
        "generation_config_digest": "blake3:" + "0" * 64,
    }
    RunStore.create(
        store,
        lock.read_bytes(),
        canonical_schedule(),
        result_type=CellResult,
        attempt_type=AttemptRecord,
        identity={"provider": identity},
    ).close()
    before = _snapshot(store)
    result = _invoke("v2", "resume", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert result.exit_code == 2
    assert _error(result) == (
        f"error: store {store} was run with provider simulated; --provider gemini contradicts it "
        "(resume takes the provider from the store)"
    )
    assert _snapshot(store) == before
    assert not fake.requests


def test_v2_run_binds_the_provider_identity_in_genesis(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    fake.always(error(403, "PERMISSION_DENIED", DENIED))
    store = tmp_path / "store"
    _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    genesis = read_store(store).genesis
    assert genesis is not None
    bound = genesis.identity["provider"]
    assert bound["provider"] == "gemini"
    assert bound["model"] == "gemini-2.5-flash"
    assert bound["endpoint"] == fake.base_url
    assert bound["generation_config_digest"].startswith("blake3:")
    assert str(key) not in repr(genesis.identity)  # the credential source is never bound


# --- an outage, a resume with a good key, and the finished store -----------------------------


def _report_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_v2_gemini_quota_outage_then_resume_gives_the_uninterrupted_report(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    # The quota runs out exactly after cell 1 (eight answers): cell 2 has only outages, so it is
    # dropped, never committed. A partial report is written, then superseded by the resume.
    fake.script(*[output({"unscripted": True})] * 8)
    fake.always(error(429, "RESOURCE_EXHAUSTED", QUOTA))
    store = tmp_path / "store"
    stopped = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert stopped.exit_code == 75
    assert verify_store(store).cells == 2
    partial = _invoke("v2", "report", str(store))
    assert partial.exit_code == 0, partial.output
    assert "PARTIAL: the store is not finalized; only 2 of 576 cells" in partial.stdout
    assert "H2, H3, H4: not evaluated: 2 of 576 cells." in partial.stdout
    manifest = msgspec.json.decode((store / "report" / "report-manifest.json").read_bytes())
    assert manifest["partial"] is True
    kept = tmp_path / "kept-report"
    assert _invoke("v2", "report", str(store), "--out", str(kept)).exit_code == 0
    # The quota is back; a new key file, no provider flags: the store names its provider.
    fake.always(None)
    good = tmp_path / "good.key"
    good.write_text(KEY + "-good\n")
    resumed = _invoke(
        "v2", "resume", str(store), "--lock", str(lock), "--credential-file", str(good)
    )
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.splitlines()[1] == (
        f"provider: gemini; model gemini-2.5-flash; endpoint 127.0.0.1:{fake.port}, not Google's: "
        "a rehearsal or a proxy; planner none; credential key"
    )
    assert "cells: 576/576 committed, 574 this session" in resumed.stdout
    assert not (store / "report").exists()  # the partial report is superseded
    manifest_line = next(x for x in resumed.stdout.splitlines() if x.startswith("manifest: "))
    digest = manifest_line.split()[1]
    # The cell dropped during the outage ran again: every cell answered, nothing only failed.
    audit = _invoke("audit", str(store))
    assert audit.exit_code == 0, audit.output
    assert "failures by kind: rate_limited 4, schema_mismatch 2304" in audit.stdout
    assert "orphaned (bound after a writer died)" in audit.stdout
    # Replay names the provider and says a report made on the partial store is stale.
    replay = _invoke("replay", str(store), "--report", str(kept))
    assert replay.stdout.splitlines()[0].startswith("provider: gemini; model gemini-2.5-flash")
    assert "tables: report is stale (made at 2 cells)" in replay.stdout
    assert "cells: 576/576 replayed identically" in replay.stdout
    assert replay.exit_code == 3
    # An uninterrupted run against the same fake gives the same report, byte for byte.
    reference = tmp_path / "reference"
    fresh = _invoke(
        "v2", "run", "--store", str(reference), "--lock", str(lock), *_gemini(fake, key)
    )
    assert fresh.exit_code == 0, fresh.output
    assert _invoke("v2", "report", str(store)).exit_code == 0
    assert _invoke("v2", "report", str(reference)).exit_code == 0
    ours, theirs = _report_files(store / "report"), _report_files(reference / "report")
    # Every table and figure is the same. The text differs only in what is measured, not
    # decided: the provider latency row, and the store's head and manifest (records carry
    # measured latencies; the resumed store also binds the outage's orphaned attempts).
    for name in ("table4.csv", "table4.tex", "hypotheses.csv", "figure.png"):
        assert ours[name] == theirs[name], name

    def decided(data: bytes) -> list[bytes]:
        return [x for x in data.splitlines() if b", head blake3:" not in x and b"latency" not in x]

    assert decided(ours["report.md"]) == decided(theirs["report.md"])
    # Resuming the finished store: complete, nothing written; same for one killed right after
    # it finalized (the manifest is the last thing written).
    before = _snapshot(store)
    done = _invoke("v2", "resume", str(store), "--lock", str(lock), "--credential-file", str(good))
    assert done.exit_code == 0, done.output
    assert done.stdout == f"complete: 576 cells, manifest {digest}\n"
    assert _snapshot(store) == before
    rerun = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert rerun.exit_code == 2
    assert _error(rerun) == (
        f"error: {store} already holds a finalized run store (576 cells, manifest {digest}); "
        f"see its results with `harness v2 report {store}`"
    )


# --- commands that end in the right place ----------------------------------------------------


def _finalized_store(root: Path, lock: Path) -> str:
    """A one-row store, committed and sealed (a stand-in for a finished study)."""
    from harness.store import finalize_store

    rows = canonical_schedule()[:1]
    with RunStore.create(root, lock.read_bytes(), rows) as writer:
        writer.commit_cell(0, {"cell_id": rows[0]["cell_id"]}, [])
    return finalize_store(root, 1)


def test_v2_resume_of_a_finalized_store_is_complete_and_writes_nothing(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    store = tmp_path / "store"
    digest = _finalized_store(store, lock)
    before = _snapshot(store)
    result = _invoke("v2", "resume", str(store), "--lock", str(lock))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"complete: 1 cells, manifest {digest}\n"
    assert _snapshot(store) == before
    rerun = _invoke("v2", "run", "--store", str(store), "--lock", str(lock), *_gemini(fake, key))
    assert rerun.exit_code == 2
    assert _error(rerun) == (
        f"error: {store} already holds a finalized run store (1 cells, manifest {digest}); "
        f"see its results with `harness v2 report {store}`"
    )
    assert not fake.requests


def test_v2_resume_of_a_missing_store_fails_before_preflight(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    missing = tmp_path / "nonexistent"
    result = _invoke("v2", "resume", str(missing), "--lock", str(lock), *_gemini(fake, key)[2:4])
    assert result.exit_code == 2
    assert _error(result) == f"error: no store at {missing}"
    assert not fake.requests  # preflight never ran: no metadata request
    assert not missing.exists()


def test_v2_run_into_a_directory_holding_other_files_says_so(tmp_path: Path, lock: Path) -> None:
    directory = tmp_path / "results"
    directory.mkdir()
    (directory / "notes.txt").write_text("mine\n")
    result = _invoke("v2", "run", "--store", str(directory), "--lock", str(lock))
    assert result.exit_code == 2
    assert _error(result) == (
        f"error: {directory} is not empty and holds no run store; a run starts in a new or empty "
        "directory (choose another --store)"
    )
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt"]


# --- a quiet console -------------------------------------------------------------------------


def test_v2_console_is_quiet_by_default_and_verbose_on_request(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    fake.always(error(403, "PERMISSION_DENIED", DENIED))
    quiet = _invoke(
        "v2", "run", "--store", str(tmp_path / "a"), "--lock", str(lock), *_gemini(fake, key)
    )
    assert quiet.exit_code == 75
    assert "provider.attempt" not in quiet.stderr
    assert "v2.preflight" not in quiet.stderr
    assert "cells | " in quiet.stderr  # the progress summary line
    verbose = CliRunner().invoke(
        main,
        [
            "-vv",
            "v2",
            "run",
            "--store",
            str(tmp_path / "b"),
            "--lock",
            str(lock),
            *_gemini(fake, key),
        ],
    )
    assert verbose.exit_code == 75
    assert verbose.stderr.count("provider.attempt") == 4
    assert "v2.preflight" in verbose.stderr
    log_lines = [x for x in verbose.stderr.splitlines() if not x.startswith(("error:", "["))]
    log_lines += [
        x for x in verbose.stderr.splitlines() if x.startswith("[") and "cells |" not in x
    ]
    assert log_lines
    assert not [x for x in log_lines if str(key) in x]  # never the key file's absolute path
    silent = CliRunner().invoke(
        main,
        [
            "-q",
            "v2",
            "run",
            "--store",
            str(tmp_path / "c"),
            "--lock",
            str(lock),
            *_gemini(fake, key),
        ],
    )
    assert silent.exit_code == 75
    assert silent.stderr.splitlines() == [_error(silent)]  # the error line alone


# --- processes: the credential variable, Ctrl-C while starting, scripts/run ------------------

HARNESS = Path(sys.executable).parent / "harness"


def _wait_for(predicate: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_credential_env_is_gone_from_proc_environ_before_any_provider_call(
    tmp_path: Path, lock: Path, fake: FakeGemini
) -> None:
    # The metadata request is held for a while: the process is then inside its first provider
    # call, and its environment block must no longer hold the key.
    fake.metadata(slow(30.0, model_metadata()))
    env = {**os.environ, "ECT_TEST_KEY": KEY}
    process = subprocess.Popen(
        [
            str(HARNESS), "v2", "run", "--store", str(tmp_path / "store"), "--lock", str(lock),
            "--provider", "gemini", "--credential-env", "ECT_TEST_KEY",
            "--provider-base-url", fake.base_url,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for(lambda: fake.requests)
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert fake.requests[0].headers["x-goog-api-key"] == KEY  # the key did arrive
        assert KEY.encode() not in environ
        assert b"ECT_TEST_KEY=" not in environ
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert b"Traceback" not in err


# From 0.3 s: a signal that lands while the interpreter is still importing `site` (the first
# tens of milliseconds, more on a loaded machine) is CPython's own fatal error, before any code
# of the project runs; from the entry point on, Ctrl-C is one line and exit 130.
@pytest.mark.parametrize("delay_s", [0.3, 0.6, 0.9], ids=["300ms", "600ms", "900ms"])
def test_ctrl_c_in_the_first_second_prints_no_traceback(
    tmp_path: Path, lock: Path, delay_s: float
) -> None:
    process = subprocess.Popen(
        [str(HARNESS), "v2", "run", "--store", str(tmp_path / "store"), "--lock", str(lock)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(delay_s)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert b"Traceback" not in err, err.decode()
    assert process.returncode == 130, err.decode()
    assert err.decode().strip().splitlines()[-1].startswith("error: ")


def _venv_outside_the_checkout(base: Path) -> Path:
    """A venv under ``base`` that ``scripts/_venv.sh`` takes as current, so ``scripts/run``
    neither builds nor rebuilds one inside the checkout. It holds no copies: a ``.pth`` line
    adds this interpreter's site-packages (the project and its locked dependencies) as a site
    directory, a ``harness`` script runs the CLI, and ``.stamp`` holds the digest
    ``_venv.sh`` computes for this interpreter and the two dependency files."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "deps-from-test-venv.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n"
    )
    harness = venv / "bin" / "harness"
    harness.write_text(f"#!{python}\nfrom harness.cli import main\n\nmain()\n")
    harness.chmod(0o755)
    root = project_root()
    stamp = subprocess.run(
        [
            str(python), "-c",
            "import hashlib,sys; print(hashlib.blake2b(sys.version.encode() + "
            "sys.executable.encode() + b''.join(open(p,'rb').read() for p in sys.argv[1:]))"
            ".hexdigest())",
            str(root / "pyproject.toml"), str(root / "requirements.lock"),
        ],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (venv / ".stamp").write_text(stamp)
    return venv


@pytest.mark.slow
def test_scripts_run_with_store_reports_that_store(tmp_path: Path) -> None:
    store = tmp_path / "given"
    script = project_root() / "scripts" / "run"
    venv = _venv_outside_the_checkout(tmp_path)
    done = subprocess.run(
        ["bash", str(script), "--store", str(store)],
        env={**os.environ, "VENV": str(venv), "PYTHON": str(venv / "bin" / "python")},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "setting up" not in done.stderr  # the stamped venv was used as it is
    assert verify_store(store).finalized
    assert (store / "report" / "report.md").is_file()
    assert "Table 4" in done.stdout


def test_standalone_preflight_makes_the_same_no_token_request(
    tmp_path: Path, lock: Path, key: Path, fake: FakeGemini
) -> None:
    schedule = project_root() / "schedules" / "v2-schedule.json"
    args = [
        "preflight", "--lock", str(lock), "--schedule", str(schedule),
        "--store", str(tmp_path / "store"), *_gemini(fake, key),
    ]  # fmt: skip
    passed = _invoke(*args)
    assert passed.exit_code == 0, passed.output
    assert (
        f"ok   provider: gemini-2.5-flash at {fake.base_url}: model metadata read with the key "
        "(no tokens spent)"
    ) in passed.stdout.splitlines()
    fake.metadata_always(error(404, "NOT_FOUND", "models/gemini-2.5-flash is not found"))
    failed = _invoke(*args)
    assert failed.exit_code == 3
    assert (
        f"FAIL provider: gemini-2.5-flash at {fake.base_url}: HTTP 404 NOT_FOUND: "
        "models/gemini-2.5-flash is not found"
    ) in failed.stdout.splitlines()
    assert [r.method for r in fake.requests] == ["GET", "GET"]
    assert not (tmp_path / "store").exists()
