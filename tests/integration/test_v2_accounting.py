"""What the audit counts is what the endpoint received: stops at N = 4 and 8, then resume.

The real ``harness v2 run`` in its own process, the real google-genai client, the loopback
Gemini endpoint (``harness.providers.loopback``, the one ``harness fake-endpoint`` serves) on a
port the test opens, answering as the simulated provider. The run is stopped three ways while
N cells are in flight - Ctrl-C (SIGINT), the server gone, the key revoked (403 on every request)
- then resumed to the end. The endpoint counts every request it received and every reply it
delivered in full with the tokens it reported; ``harness audit`` of the finished store must give
the same numbers: attempts (every one the endpoint read; with the server gone, the others all
failed with no response byte), succeeded attempts, token sums and cost (the prices given with
``--price-input``/``--price-output``, recorded in the genesis, applied to the endpoint's tokens),
and pass. Before the fix, a resume after a stop at N > 1 journaled the committed cells' staged
attempts a second time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from v2_support import config

from harness.audit import audit_store
from harness.lock import project_root, write_lock
from harness.providers.kinds import FailureKind
from harness.providers.loopback import FakeGemini, Served
from harness.providers.loopback_sim import SimulatedResponder
from harness.store import EndEntry, read_store

KEY_ENV = "HARNESS_TEST_ACCOUNTING_KEY"
TIMEOUT_S = 240.0
CELLS = 24


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("studylock") / "study-lock.json"
    write_lock(path, project_root())
    return path


def _endpoint(port: int = 0) -> FakeGemini:
    responder = SimulatedResponder(config().generation_config, latency_ms=20.0)
    return FakeGemini(port=port, responder=responder, record=False)


def _harness(*args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    env[KEY_ENV] = "loopback-key-0123456789"
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "-q", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _records(store: Path) -> int:
    try:
        return (store / "records.log").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _wait(what: str, ready: Callable[[], bool], process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not ready():
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _add(total: Served, more: Served) -> None:
    total.requests += more.requests
    total.model_requests += more.model_requests
    total.delivered += more.delivered
    total.prompt_tokens += more.prompt_tokens
    total.output_tokens += more.output_tokens
    total.thought_tokens += more.thought_tokens


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["ctrl-c", "server-gone", "key-revoked"])
@pytest.mark.parametrize("n", [4, 8])
def test_audit_counts_what_the_endpoint_received_after_a_stop_and_resume(
    tmp_path: Path, lock: Path, n: int, stop: str
) -> None:
    store = tmp_path / "store"
    served = Served()
    fake = _endpoint().__enter__()
    port = fake.port
    try:
        run = _harness(
            "v2", "run", "--store", str(store), "--lock", str(lock),
            "--provider", "gemini", "--provider-base-url", fake.base_url,
            "--credential-env", KEY_ENV, "--limit", str(CELLS), "--max-cells", str(n),
            "--price-input", "0.3", "--price-output", "2.5",
        )  # fmt: skip
        _wait("three cells committed", lambda: _records(store) >= 4, run)
        if stop == "key-revoked":
            fake.deny_key()
            expected = 75
        else:
            # Every reply is held until N cells wait on the endpoint: the stop meets N
            # attempts in flight, all of them received and none answered.
            fake.hold()
            _wait(f"{n} requests in flight", lambda: fake.held >= n, run)
            if stop == "ctrl-c":
                run.send_signal(signal.SIGINT)
                expected = 130
            else:
                fake.stop()  # the held replies are never sent; the port is closed
                _add(served, fake.served)
                expected = 75
        _, err = run.communicate(timeout=TIMEOUT_S)
        assert run.returncode == expected, err.decode()
        assert b"Traceback" not in err
        assert 0 < _records(store) - 1 < CELLS
        if stop == "key-revoked":
            fake.deny_key(False)
        else:
            if stop == "ctrl-c":
                _add(served, fake.served)
                fake.stop()
            fake = _endpoint(port).__enter__()  # the same address: the genesis names it
        again = _harness("v2", "resume", str(store), "--lock", str(lock),
                         "--credential-env", KEY_ENV, "--max-cells", str(n))  # fmt: skip
        _, err = again.communicate(timeout=TIMEOUT_S)
        assert again.returncode == 0, err.decode()
    finally:
        _add(served, fake.served)
        fake.__exit__(None, None, None)
    view = read_store(store)
    assert view.report.finalized
    assert view.report.cells == CELLS
    report = audit_store(store)
    assert report.ok, report.problems
    unseen = report.journaled_attempts - served.requests
    if stop == "server-gone":
        # Attempts the endpoint never read: refused connections once it was gone, and those
        # the kernel had accepted for it while it shut down (reset or closed unread). Every
        # one failed without a response byte.
        refused, unanswered = _unanswered(store)
        assert 0 < refused <= unseen <= unanswered
    else:
        assert unseen == 0
    total = report.total
    assert total.succeeded == served.delivered
    assert total.prompt_tokens == served.prompt_tokens
    assert total.output_tokens == served.output_tokens
    assert total.thought_tokens == served.thought_tokens
    (line,) = report.prices
    price = line.price
    genesis = view.genesis
    assert genesis is not None
    assert genesis.identity["provider"]["price"] == msgspec.to_builtins(price)
    assert (price.input_per_million, price.output_per_million) == (0.3, 2.5)
    cost = (
        served.prompt_tokens * price.input_per_million
        + (served.output_tokens + served.thought_tokens) * price.output_per_million
    ) / 1e6
    assert total.cost_usd == pytest.approx(cost, rel=1e-12, abs=1e-12)
    assert line.cost_usd == pytest.approx(cost, rel=1e-12, abs=1e-12)


_NO_RESPONSE = {
    FailureKind.CONNECT_ERROR.value,
    FailureKind.DISCONNECTED_BEFORE_RESPONSE.value,
    FailureKind.CONNECTION_RESET.value,
}


def _unanswered(store: Path) -> tuple[int, int]:
    """Journaled attempts refused a connection, and those with no response byte at all."""
    kinds = [
        entry.outcome.get("failure_kind")
        for entry in read_store(store).journal
        if isinstance(entry, EndEntry)
    ]
    refused = sum(kind == FailureKind.CONNECT_ERROR.value for kind in kinds)
    return refused, sum(kind in _NO_RESPONSE for kind in kinds)
