"""The cost estimate before a run, the price flags, and quota pacing.

- no price table (an endpoint other than Google's, no --price-input/--price-output): the
  estimate says "cost unknown", never a price; with one, a range and an upper bound that bills
  every call's whole output budget (thinking included);
- the price flags go together, are >= 0, apply only to network providers, land in the
  selection and the genesis identity, and a resume that contradicts them is refused;
- an attempt priced by an unpriced table has cost None (unknown), never 0;
- pacing: --max-rpm N starts at most N requests in any 60 s (trio's mock clock, no waiting),
  --max-tpm N waits until the last minute's tokens fall under N; the estimate's wall time is
  at least what the pace allows.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest
import trio
import trio.testing

from harness.errors import ProviderSelectionError
from harness.providers.attempts import Audit, Usage, estimate_cost, memory_audit
from harness.providers.config import PriceTable, default_generation_config
from harness.providers.kinds import ProviderName, Role
from harness.providers.pacing import PacedProvider, Pacing
from harness.providers.protocol import Message, ProviderRequest, ProviderResult
from harness.providers.selection import (
    ProviderFlags,
    provider_identity,
    run_price,
    select_provider,
    selection_for_resume,
)
from harness.studies._cost import NO_PRICE, CallPlan, estimate

_PLAN = CallPlan(
    calls=(1, 2.0, 4), prompt_tokens=(1000, 2000.0, 8000), output_tokens=(100, 200.0, 400),
    output_budget=8192,
)  # fmt: skip


def test_an_unpriced_endpoint_gets_cost_unknown_never_a_price() -> None:
    guess = estimate([_PLAN] * 3, None, unit="cell", max_cells=1)
    lines = guess.lines()
    assert NO_PRICE in lines[1]
    assert "USD" not in lines[1].replace("--price-input USD --price-output USD", "")
    assert guess.cost is None
    assert guess.upper_cost is None


def test_the_upper_bound_bills_every_calls_whole_output_budget() -> None:
    price = PriceTable.given("m", 1.0, 10.0)
    guess = estimate([_PLAN] * 3, price, unit="cell", max_cells=1)
    assert guess.cost == pytest.approx((3 * 0.002, 3 * 0.004, 3 * 0.012))
    assert guess.upper_cost == pytest.approx(3 * (8000 * 1.0 + 4 * 8192 * 10.0) / 1e6)
    assert "at most 1.01 USD if every call used its whole output budget" in guess.lines()[1]


def test_pacing_sets_a_floor_under_the_estimated_wall_time() -> None:
    free = estimate([_PLAN] * 30, None, unit="cell", max_cells=8)
    paced = estimate([_PLAN] * 30, None, unit="cell", max_cells=8, max_rpm=6, max_tpm=10_000)
    assert paced.wall_seconds[0] >= 30 * 60.0 / 6  # 30 calls at 6 per minute
    assert paced.wall_seconds[1] >= 30 * 8400 * 60.0 / 10_000
    assert paced.wall_seconds > free.wall_seconds
    assert "paced by --max-rpm 6 and --max-tpm 10000" in paced.lines()[2]


def test_an_unpriced_table_records_cost_unknown() -> None:
    usage = Usage(prompt_tokens=10, output_tokens=5, thought_tokens=0)
    assert estimate_cost(PriceTable.unpriced("m"), usage) is None
    assert estimate_cost(PriceTable.given("m", 1.0, 1.0), usage) == pytest.approx(15 / 1e6)


def _flags(**given: object) -> ProviderFlags:
    base: dict[str, object] = {
        "provider": None, "credential_file": None, "credential_env": "K", "base_url": None,
    }  # fmt: skip
    return ProviderFlags(**{**base, **given})  # type: ignore[arg-type]


def test_price_flags_land_in_the_selection_and_the_identity() -> None:
    pytest.importorskip("google.genai")
    config = default_generation_config()
    default = select_provider("gemini", credential_file=None, credential_env="K", base_url=None)
    assert run_price(default, config) == config.gemini.price  # Google's endpoint: its table
    local = select_provider(
        "gemini", credential_file=None, credential_env="K", base_url="http://127.0.0.1:9"
    )
    assert run_price(local, config) is None  # a proxy or a rehearsal: unknown
    given = select_provider(
        "gemini", credential_file=None, credential_env="K", base_url="http://127.0.0.1:9",
        price_input=0.5, price_output=4.0,
    )  # fmt: skip
    assert run_price(given, config) == PriceTable.given(config.gemini.model, 0.5, 4.0)
    identity = provider_identity(given, config)
    assert identity.price == given.price
    same = selection_for_resume(_flags(price_input=0.5, price_output=4.0), identity, config, "s")
    assert same.price == given.price
    kept = selection_for_resume(_flags(), identity, config, "s")
    assert kept.price == given.price  # the genesis supplies them
    with pytest.raises(ProviderSelectionError, match="contradicts it"):
        selection_for_resume(_flags(price_input=0.6, price_output=4.0), identity, config, "s")


@pytest.mark.parametrize(
    ("provider", "prices", "message"),
    [
        ("gemini", (1.0, None), "go together"),
        ("gemini", (-1.0, 2.0), "must be a price >= 0"),
        ("gemini", (float("nan"), 2.0), "must be a price >= 0"),
        ("simulated", (1.0, 2.0), "apply only to --provider gemini or openai"),
    ],
)
def test_bad_price_flags_are_one_line_errors(
    provider: str, prices: tuple[float | None, float | None], message: str
) -> None:
    pytest.importorskip("google.genai")
    key = "K" if provider == "gemini" else None
    with pytest.raises(ProviderSelectionError, match=message):
        select_provider(
            provider, credential_file=None, credential_env=key, base_url=None,
            price_input=prices[0], price_output=prices[1],
        )  # fmt: skip


class _Counting:
    """A provider stand-in noting the (mock) time each request starts; each reply reports
    ``tokens`` tokens. Pacing reads only the attempts' usage, so nothing else is built."""

    def __init__(self, tokens: int = 0) -> None:
        self._tokens = tokens
        self.starts: list[float] = []

    @property
    def name(self) -> ProviderName:
        return ProviderName.SIMULATED

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        self.starts.append(trio.current_time())
        await trio.sleep(1.0)
        usage = SimpleNamespace(prompt_tokens=self._tokens, output_tokens=0, thought_tokens=0)
        return cast(ProviderResult, SimpleNamespace(attempts=(SimpleNamespace(usage=usage),)))


def _request(prompt_chars: int) -> ProviderRequest:
    config = default_generation_config()
    return ProviderRequest(
        role=Role.CRITIC,
        cell_id="c",
        prompt_id="critic.v1",
        messages=(Message(role="user", text="x" * prompt_chars),),
        view={},
        response_schema={"type": "object"},
        seed=1,
        config=config,
    )


def _run_paced(inner: _Counting, pacing: Pacing, requests: int) -> list[float]:
    paced = PacedProvider(inner, pacing)
    per_token = default_generation_config().simulated.chars_per_token
    request = _request(round(600 * per_token))  # 600 prompt tokens

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(requests):
                nursery.start_soon(paced.generate, request, memory_audit()[0])

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return inner.starts


def test_max_rpm_starts_at_most_n_requests_in_any_minute() -> None:
    starts = _run_paced(_Counting(), Pacing(max_rpm=3), 7)
    assert len(starts) == 7
    for index in range(len(starts) - 3):
        assert starts[index + 3] - starts[index] >= 60.0  # any 4 starts span a minute
    assert starts[-1] - starts[0] == pytest.approx(120.0)


def test_max_tpm_waits_until_the_last_minutes_tokens_fall_under_n() -> None:
    starts = _run_paced(_Counting(tokens=600), Pacing(max_tpm=1000), 4)
    # Two requests of 600 prompt tokens exceed 1000: the third waits until they leave the
    # minute; counted from their start, so they cannot all start at once.
    assert starts[0] == starts[1] == pytest.approx(0.0)
    assert starts[2] == pytest.approx(60.0)
    assert starts[3] >= 60.0


def test_pacing_of_nothing_is_no_pacing() -> None:
    assert not Pacing().active
    with pytest.raises(ValueError, match="at least 1"):
        Pacing(max_rpm=0)


def test_the_question_is_asked_only_on_a_terminal_and_ctrl_c_there_is_an_interrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    import click

    from harness.cli.run_options import confirm

    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert confirm(assume_yes=False) is None  # a pipe or CI: no question
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    assert confirm(assume_yes=True) is None  # --yes
    ask = confirm(assume_yes=False)
    assert ask is not None
    monkeypatch.setattr(click, "confirm", lambda *_a, **_k: False)
    assert ask(["planned: ..."]) is False

    def interrupted(*_a: object, **_k: object) -> bool:
        raise click.Abort

    monkeypatch.setattr(click, "confirm", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ask(["planned: ..."])


def test_a_no_is_said_plainly_with_exit_0() -> None:
    from click.testing import CliRunner

    from harness.cli import main
    from harness.errors import RunDeclinedError

    @main.command("declined-for-test", hidden=True)
    def declined() -> None:
        raise RunDeclinedError("declined at the cost estimate; nothing was written")

    try:
        result = CliRunner().invoke(main, ["declined-for-test"])
    finally:
        main.commands.pop("declined-for-test")
    assert result.exit_code == 0
    assert result.stderr == "declined at the cost estimate; nothing was written\n"
