"""The small things on a paid run's path: a sealed store refuses contradicting flags, and a key
file others can read is warned about.

Real stores (the real writer and finalize), the real command line; the credential is a real
file whose mode the test sets.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec
import pytest
import structlog
from click.testing import CliRunner
from v2_report_support import all_results

from harness.cli import main
from harness.lock import build_lock, encode_lock
from harness.providers.credentials import CredentialSource, load_credential
from harness.store import RunStore, finalize_store

SIMULATED = {
    "provider": "simulated",
    "model": None,
    "endpoint": None,
    "api_version": None,
    "generation_config_digest": "blake3:" + "1" * 64,
}


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    results = all_results()[:4]
    rows = [{"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in results]
    root = tmp_path / "sealed"
    with RunStore.create(
        root, encode_lock(build_lock()), rows, identity={"provider": SIMULATED}
    ) as writer:
        for index, result in enumerate(results):
            writer.commit_cell(index, msgspec.to_builtins(result), [])
    finalize_store(root)
    return root


def test_resume_of_a_finalized_store_refuses_a_contradicting_flag(sealed: Path) -> None:
    before = sorted(p.name for p in sealed.iterdir())
    result = CliRunner().invoke(
        main, ["v2", "resume", str(sealed), "--provider-base-url", "http://127.0.0.1:9/"]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"error: store {sealed} was run with the simulated provider, which has no endpoint"
    )
    assert sorted(p.name for p in sealed.iterdir()) == before
    again = CliRunner().invoke(main, ["v2", "resume", str(sealed)])
    assert again.exit_code == 0, again.output
    assert "complete: 4 cells" in again.stdout


@pytest.mark.parametrize(("mode", "warned"), [(0o600, False), (0o640, True), (0o604, True)])
def test_a_key_file_others_can_read_is_warned_about(
    tmp_path: Path, mode: int, warned: bool
) -> None:
    key = tmp_path / "gemini.key"
    key.write_text("AIzaSyTESTKEY0123456789abcdefghijklmnop\n")
    os.chmod(key, mode)
    with structlog.testing.capture_logs() as logs:
        credential = load_credential(CredentialSource(kind="file", name=str(key)))
    assert credential is not None
    warnings = [e for e in logs if e["event"] == "provider.credential.file_open_to_others"]
    assert bool(warnings) == warned
    if warned:
        (event,) = warnings
        assert event["log_level"] == logging.getLevelName(logging.WARNING).lower()
        assert event["mode"] == oct(mode)
        assert event["fix"] == "chmod 600 gemini.key"
        assert str(tmp_path) not in str(event)  # the file by its name only


def test_pacing_is_written_in_run_log_and_never_in_the_chain(tmp_path: Path) -> None:
    from harness.lock import project_root, write_lock

    lock = tmp_path / "study-lock.json"
    write_lock(lock, project_root())
    chains = {}
    for name, extra in (("free", []), ("paced", ["--max-rpm", "600", "--max-tpm", "1000000"])):
        store = tmp_path / name
        result = CliRunner().invoke(
            main,
            ["-q", "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "2", *extra],
        )
        assert result.exit_code == 0, result.output
        chains[name] = [(store / f).read_bytes() for f in ("records.log", "journal.log", "HEAD")]
        log = [msgspec.json.decode(line) for line in (store / "run.log").read_bytes().splitlines()]
        if extra:
            assert (log[0]["max_rpm"], log[0]["max_tpm"]) == (600, 1_000_000)
        else:
            assert "max_rpm" not in log[0]
    assert chains["paced"] == chains["free"]


def test_run_on_a_partial_store_names_the_resume_command_with_its_credential(
    tmp_path: Path,
) -> None:
    pytest.importorskip("google.genai")
    from harness.lock import project_root, write_lock
    from harness.resources import data_path
    from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config
    from harness.studies.v2.schedule import build_rows

    lock = tmp_path / "study-lock.json"
    write_lock(lock, project_root())
    config, _ = load_config(data_path(DEFAULT_CONFIG_PATH))
    rows = [msgspec.to_builtins(row) for row in build_rows(config)]
    store = tmp_path / "partial"
    RunStore.create(store, lock.read_bytes(), rows).close()
    key = tmp_path / "gemini.key"
    result = CliRunner().invoke(
        main,
        ["v2", "run", "--store", str(store), "--lock", str(lock), "--provider", "gemini",
         "--credential-file", str(key)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        f"continue it with `harness v2 resume {store} --lock {lock} --credential-file {key}`"
    )
