"""``harness v2 run|resume`` with ``--provider openai`` and ``--planner``, end to end.

The real ``openai`` client, sandbox, store and preflight run against
``providers_fake_openai.FakeOpenAI`` on 127.0.0.1. Covered: the identity in genesis (model,
endpoint, endpoint host, whether a key was sent, the plug-in and its digest), preflight's
no-token ``GET /models/{model}``, the circuit breaker on a rejected key, resume taking
everything from the store and refusing contradicting flags or a changed plug-in, the key moved
out of the environment before the first request, and reports that never present these runs
as the paper's frozen study.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from providers_fake_gemini import slow
from providers_fake_openai import FakeOpenAI, _model_object, chat_error

from harness.cli import main
from harness.lock import project_root, write_lock
from harness.store import read_store, verify_store

KEY = "sk-fake-openai-cli-0123456789abcdef"
MODEL = "fake-model-1"
HARNESS = Path(sys.executable).with_name("harness")


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _error(result: Any) -> str:
    lines: list[str] = result.stderr.splitlines()
    assert lines, result.output
    assert "Traceback" not in result.stderr
    return lines[-1]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _openai(fake: FakeOpenAI, *credential: str) -> list[str]:
    return [
        "--provider", "openai", "--model", MODEL, "--provider-base-url", fake.base_url,
        *(credential or ("--no-credential",)),
    ]  # fmt: skip


def test_v2_openai_rejected_key_trips_the_breaker_and_binds_the_identity(
    tmp_path: Path, lock: Path, fake: FakeOpenAI
) -> None:
    key = tmp_path / "openai.key"
    key.write_text(KEY + "\n")
    fake.script(*[chat_error(401, "Incorrect API key provided")] * 8)
    store = tmp_path / "store"
    result = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(lock),
        *_openai(fake, "--credential-file", str(key)),
    )  # fmt: skip
    assert result.exit_code == 75
    line = _error(result)
    assert "authentication: HTTP 401: Incorrect API key provided" in line
    assert line.endswith(
        f"continue with `harness v2 resume {store} --lock {lock} --credential-file {key}`"
    )
    sent = fake.requests
    assert (sent[0].method, sent[0].path) == ("GET", f"/v1/models/{MODEL}")  # preflight
    assert sent[0].headers["authorization"] == f"Bearer {KEY}"
    assert verify_store(store).cells == 0
    genesis = read_store(store).genesis
    assert genesis is not None
    bound = genesis.identity["provider"]
    assert bound["provider"] == "openai"
    assert bound["model"] == MODEL
    assert bound["endpoint"] == fake.base_url
    assert bound["endpoint_host"] == fake.base_url.split("/")[2]
    assert bound["credential"] == "key"
    assert "planner" not in bound
    for path in store.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    status = _invoke("v2", "status", str(store))
    assert status.stdout.splitlines()[1] == (
        f"provider: openai; model {MODEL}; endpoint {fake.base_url.split('/')[2]}; planner none; "
        "credential key"
    )
    before = _snapshot(store)
    refusals = [
        (
            ["--no-credential"],
            f"was run with openai, model {MODEL} at {fake.base_url}; resume it with exactly one "
            "of --credential-file PATH or --credential-env NAME (the key is never stored)",
        ),
        (
            ["--credential-file", str(key), "--model", "other-model"],
            f"was run with model {MODEL}; --model other-model contradicts it",
        ),
        (
            ["--credential-file", str(key), "--planner", "python:x.py:P"],
            "was run with no planner plug-in; --planner python:x.py:P contradicts it",
        ),
    ]
    count = len(fake.requests)
    for flags, expected in refusals:
        refused = _invoke("v2", "resume", str(store), "--lock", str(lock), *flags)
        assert refused.exit_code == 2
        assert _error(refused) == f"error: store {store} {expected}"
    assert _snapshot(store) == before
    assert len(fake.requests) == count


def _stopping_plugin(path: Path, after: int) -> None:
    """A plug-in wrapping the simulated planner that sends SIGINT to its process after
    ``after`` decisions (a way to stop a CLI run early; plug-ins are trusted code)."""
    path.write_text(
        "import os, signal\n"
        "from harness.examples.planners.simulated import PLANNER as INNER\n"
        "class Stop:\n"
        "    calls = 0\n"
        "    def respond(self, request):\n"
        "        Stop.calls += 1\n"
        f"        if Stop.calls == {after}:\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        return INNER.respond(request)\n"
        "PLANNER = Stop()\n"
    )


def test_v2_plugin_run_binds_its_digest_and_resume_refuses_a_changed_plugin(
    tmp_path: Path, lock: Path, fake: FakeOpenAI
) -> None:
    plugin = tmp_path / "my_planner.py"
    _stopping_plugin(plugin, after=6)
    spec = f"python:{plugin}:PLANNER"
    store = tmp_path / "store"
    result = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(lock), "--planner", spec,
        *_openai(fake),
    )  # fmt: skip
    assert result.exit_code == 130, result.output
    line = _error(result)
    assert line.endswith(f"continue with `harness v2 resume {store} --lock {lock} --no-credential`")
    view = read_store(store)
    assert view.cells
    bound = view.genesis.identity["provider"] if view.genesis else {}
    assert bound["planner"]["spec"] == spec
    assert bound["planner"]["digest"].startswith("blake3:")
    assert bound["credential"] == "none"
    audit = [a for cell in view.cells for a in cell.audit]
    assert {a["provider"] for a in audit if a["role"] == "planner"} == {"plugin"}
    assert {a["provider"] for a in audit if a["role"] == "critic"} <= {"openai"}
    assert all("authorization" not in r.headers for r in fake.requests)  # --no-credential
    status = _invoke("v2", "status", str(store))
    assert status.stdout.splitlines()[1] == (
        f"provider: openai; model {MODEL}; endpoint {fake.base_url.split('/')[2]}; planner {spec} "
        f"({bound['planner']['digest']}); credential none"
    )
    listed = _invoke("stores", str(tmp_path), "--json")
    assert listed.exit_code == 0, listed.output
    assert f"openai at {fake.base_url.split('/')[2]} + planner {spec}" in listed.stdout
    report = _invoke("v2", "report", str(store))
    assert report.exit_code == 0, report.output
    text = (store / "report" / "report.md").read_text()
    assert "**NOT THE PAPER'S FROZEN STUDY: the run used provider openai; model fake-model-1" in (
        text
    )
    assert spec in (store / "report" / "table4.tex").read_text().replace("\\_", "_")
    # The plug-in changes: resume refuses it before preflight, with nothing written.
    plugin.write_text(plugin.read_text() + "# edited\n")
    before = _snapshot(store)
    count = len(fake.requests)
    refused = _invoke("v2", "resume", str(store), "--lock", str(lock), "--no-credential")
    assert refused.exit_code == 2
    assert _error(refused).startswith(
        f"error: store {store} was run with planner plug-in {spec} at {bound['planner']['digest']}"
        "; its source is now blake3:"
    )
    assert _snapshot(store) == before
    assert len(fake.requests) == count


def test_v2_gemini_shaped_options_are_refused_for_openai_in_one_line(
    tmp_path: Path, lock: Path
) -> None:
    store = tmp_path / "store"
    result = _invoke("v2", "run", "--store", str(store), "--provider", "openai", "--no-credential")
    assert result.exit_code == 2
    assert _error(result) == (
        "error: --provider openai needs --model NAME (the model the endpoint serves)"
    )
    result = _invoke("v2", "run", "--store", str(store), "--model", "x")
    assert result.exit_code == 2
    assert _error(result).startswith("error: --model applies only to --provider gemini or openai")
    result = _invoke(
        "v2", "run", "--store", str(store), "--planner", "python:/nowhere/p.py:PLANNER"
    )
    assert result.exit_code == 2
    assert _error(result) == "error: --planner: no plug-in file /nowhere/p.py"
    assert not store.exists()
    static = _invoke(
        "static", "run", "--out", str(store), "--planner",
        "python:harness.examples.planners.minimal:PLANNER",
    )  # fmt: skip
    assert static.exit_code == 2
    assert _error(static) == "error: --planner applies only to harness v2 run"
    assert not store.exists()


def _wait_for(predicate: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_openai_credential_env_is_gone_from_proc_environ_before_any_provider_call(
    tmp_path: Path, lock: Path, fake: FakeOpenAI
) -> None:
    fake.metadata(slow(30.0, _model_object(MODEL)))
    env = {**os.environ, "ECT_TEST_KEY": KEY}
    process = subprocess.Popen(
        [
            str(HARNESS), "v2", "run", "--store", str(tmp_path / "store"), "--lock", str(lock),
            "--provider", "openai", "--model", MODEL, "--credential-env", "ECT_TEST_KEY",
            "--provider-base-url", fake.base_url,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for(lambda: fake.requests)
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
        assert KEY.encode() not in environ
        assert b"ECT_TEST_KEY=" not in environ
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert b"Traceback" not in err
