"""The frozen generation config: complete, typed, no silent defaults, stable digest."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness.canonical import is_digest
from harness.errors import GenerationConfigError
from harness.providers import (
    FULL_TRACE_CRITIC_SEED,
    PriceTable,
    RoleLimits,
    Usage,
    config_digest,
    decode_generation_config,
    default_generation_config,
    estimate_cost,
)


def _doc() -> dict[str, Any]:
    result: dict[str, Any] = msgspec.to_builtins(default_generation_config())
    return result


def test_config_default_is_the_study_setting() -> None:
    config = default_generation_config()
    assert config.gemini.model == "gemini-2.5-flash"
    assert config.gemini.api_version == "v1beta"
    assert config.gemini.temperature == 0.2
    assert FULL_TRACE_CRITIC_SEED == 2705
    for limits in (config.gemini.planner, config.gemini.critic):
        assert limits.thinking_budget < limits.max_output_tokens


def test_config_round_trips_with_the_same_digest() -> None:
    config = default_generation_config()
    again = decode_generation_config(msgspec.json.encode(config), origin="memory")
    assert again == config
    assert config_digest(again) == config_digest(config)
    assert is_digest(config_digest(config))


def test_config_digest_changes_with_any_setting() -> None:
    config = default_generation_config()
    warmer = msgspec.structs.replace(
        config, gemini=msgspec.structs.replace(config.gemini, temperature=0.3)
    )
    assert config_digest(warmer) != config_digest(config)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["gemini"].pop("temperature"), r"missing required field `temperature`"),
        (lambda d: d["simulated"]["critic"].update(extra=1), r"unknown field `extra`"),
        (lambda d: d.update(schema_version=2), r"Invalid enum value 2"),
        (lambda d: d["gemini"].update(temperature=3.0), r"temperature must be within"),
        (
            lambda d: d["gemini"]["critic"].update(thinking_budget=5000),
            r"thinking_budget must be >= 0 and below max_output_tokens",
        ),
        (lambda d: d["simulated"]["critic"].update(continue_rate=1.5), r"continue_rate"),
        (lambda d: d["gemini"]["price"].update(currency="EUR"), r"Invalid enum value 'EUR'"),
    ],
    ids=["missing", "unknown", "version", "temperature", "budget", "rate", "currency"],
)
def test_config_invalid_document_is_refused(mutate: Any, message: str) -> None:
    doc = _doc()
    mutate(doc)
    refused = r"^generation config cfg\.json is malformed: .*" + message
    with pytest.raises(GenerationConfigError, match=refused):
        decode_generation_config(msgspec.json.encode(doc), origin="cfg.json")


def test_config_not_json_is_refused() -> None:
    with pytest.raises(GenerationConfigError, match=r"^generation config x is not strict JSON"):
        decode_generation_config(b"{", origin="x")


def test_role_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_output_tokens must be >= 1"):
        RoleLimits(max_output_tokens=0, thinking_budget=0)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (Usage(prompt_tokens=1_000_000, output_tokens=0, thought_tokens=0), 0.30),
        (Usage(prompt_tokens=0, output_tokens=1_000_000, thought_tokens=None), 2.50),
        (Usage(prompt_tokens=200, output_tokens=100, thought_tokens=300), 0.00106),
        (Usage(prompt_tokens=None, output_tokens=None, thought_tokens=None), None),
    ],
    ids=["input", "output", "thinking-billed-as-output", "unknown"],
)
def test_cost_estimate_from_the_price_table(usage: Usage, expected: float | None) -> None:
    price: PriceTable = default_generation_config().gemini.price
    cost = estimate_cost(price, usage)
    if expected is None:
        assert cost is None
    else:
        assert cost == pytest.approx(expected)
