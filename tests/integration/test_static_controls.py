"""The static study's cost estimate, question and circuit breaker: V2's, shared.

The real google-genai client against the loopback Gemini endpoint (``harness.providers.
loopback``, answering as the simulated provider) on a port the test opens. The estimate comes
after the credential is read and before anything is written; without a price table it says the
cost is unknown, with ``--price-input``/``--price-output`` it quotes them; a "no" writes nothing
(exit 0); the breaker stops the run after K consecutive infrastructure failures (here K = 1, so
its message, not the outage-snapshot rule's, ends the run).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from v2_support import config

from harness.errors import ProviderOutageError, RunDeclinedError
from harness.providers import select_provider
from harness.providers.loopback import FakeGemini, error
from harness.providers.loopback_sim import SimulatedResponder
from harness.providers.selection import ProviderSelection
from harness.store import verify_store
from harness.studies._cost import NO_PRICE
from harness.studies.static.run import RunControls, run_static

KEY = "fake-key-static-0123456789abcdef"


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini(responder=SimulatedResponder(config().generation_config)) as server:
        yield server


def _selection(tmp_path: Path, fake: FakeGemini, *prices: float) -> ProviderSelection:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    return select_provider(
        "gemini", credential_file=key_file, credential_env=None, base_url=fake.base_url,
        price_input=prices[0] if prices else None, price_output=prices[1] if prices else None,
    )  # fmt: skip


def test_a_no_at_the_question_writes_nothing_and_quotes_no_price(
    tmp_path: Path, fake: FakeGemini
) -> None:
    asked: list[Sequence[str]] = []

    def no(lines: Sequence[str]) -> bool:
        asked.append(lines)
        return False

    stream = io.StringIO()
    out = tmp_path / "run"
    with pytest.raises(RunDeclinedError, match="nothing was written") as caught:
        run_static(
            out, split="dev", selection=_selection(tmp_path, fake),
            controls=RunControls(confirm=no, stream=stream),
        )  # fmt: skip
    assert caught.value.exit_code == 0
    assert not out.exists()
    assert not fake.generate_requests  # no model was asked
    (lines,) = asked
    assert lines[0].startswith("planned: 108 snapshots, 108-216 provider calls")
    assert NO_PRICE in lines[1]
    assert "estimate: planned: 108 snapshots" in stream.getvalue()


def test_given_prices_are_quoted_with_an_upper_bound(tmp_path: Path, fake: FakeGemini) -> None:
    asked: list[Sequence[str]] = []

    def no(lines: Sequence[str]) -> bool:
        asked.append(lines)
        return False

    with pytest.raises(RunDeclinedError):
        run_static(
            tmp_path / "run", split="dev",
            selection=_selection(tmp_path, fake, 0.3, 2.5),
            controls=RunControls(confirm=no),
        )  # fmt: skip
    money = asked[0][1]
    assert "USD (about " in money
    assert "if every call used its whole output budget, thinking included" in money


def test_the_breaker_stops_a_static_run_after_k_infrastructure_failures(
    tmp_path: Path, fake: FakeGemini
) -> None:
    fake.script(*[error(429, "RESOURCE_EXHAUSTED", "quota")] * 3)
    out = tmp_path / "run"
    with pytest.raises(ProviderOutageError, match="1 consecutive provider attempts failed"):
        run_static(
            out, split="dev", selection=_selection(tmp_path, fake),
            handle_signals=False, controls=RunControls(breaker_limit=1),
        )  # fmt: skip
    report = verify_store(out)
    assert (report.cells, report.finalized) == (0, False)
    assert len(fake.generate_requests) == 1  # nothing begun after the trip
