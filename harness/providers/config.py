"""The frozen generation config: every knob that shapes a provider's output, in one typed value.

The config is data: model id, API version, temperature, per-role output and thinking budgets,
timeouts, the price table used for cost estimates, and the simulated provider's behaviour
parameters. A study freezes one config (its canonical digest goes into the lock and into every
attempt record); decoding refuses unknown fields and supplies no defaults, so a config file that
omits a value is an error rather than a silent default.

This module does not choose a provider, read a credential or talk to the network. The seed is
not here: it belongs to each request (the cell's seed, or ``FULL_TRACE_CRITIC_SEED``).
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from harness.canonical import Domain, decode_strict, digest
from harness.errors import GenerationConfigError

__all__ = [
    "FULL_TRACE_CRITIC_SEED",
    "GIVEN_PRICE",
    "UNPRICED",
    "CriticBehaviour",
    "GeminiSettings",
    "GenerationConfig",
    "PlannerBehaviour",
    "PriceTable",
    "RoleLimits",
    "SimulatedSettings",
    "check_seed",
    "config_digest",
    "decode_generation_config",
    "default_generation_config",
]

FULL_TRACE_CRITIC_SEED: Final = 2705
"""Sampling seed of the full-trace LLM critic (fixed by the study; others use the cell seed)."""

_SEED_MAX: Final = 2**31 - 1  # Gemini's seed is an int32


class _Frozen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base for config structs: immutable, keyword-only, unknown fields refused."""


UNPRICED: Final = "no price table for this endpoint: cost unknown"
"""The ``source`` of a price table that has no prices: an endpoint other than the frozen one
with no ``--price-input``/``--price-output`` given. Its attempts' cost is None, never 0."""

GIVEN_PRICE: Final = "given with --price-input and --price-output (USD per million tokens)"
"""The ``source`` of a price table the user gave for the run."""


class PriceTable(_Frozen, frozen=True, kw_only=True):
    """Per-token prices a cost estimate is computed from; copied into every attempt record.

    Thought tokens are billed at the output rate (Gemini 2.5 bills thinking as output).
    """

    model: str
    currency: Literal["USD"]
    input_per_million: float
    output_per_million: float
    source: str

    def __post_init__(self) -> None:
        if self.input_per_million < 0 or self.output_per_million < 0:
            raise ValueError("prices must be >= 0")

    @property
    def priced(self) -> bool:
        """False for the table of an endpoint with no known prices (``UNPRICED``)."""
        return self.source != UNPRICED

    @classmethod
    def unpriced(cls, model: str) -> PriceTable:
        """The table of ``model`` at an endpoint with no known prices."""
        return cls(
            model=model,
            currency="USD",
            input_per_million=0.0,
            output_per_million=0.0,
            source=UNPRICED,
        )

    @classmethod
    def given(cls, model: str, input_per_million: float, output_per_million: float) -> PriceTable:
        """The table the user gave for ``model`` (USD per million tokens)."""
        return cls(
            model=model,
            currency="USD",
            input_per_million=input_per_million,
            output_per_million=output_per_million,
            source=GIVEN_PRICE,
        )


class RoleLimits(_Frozen, frozen=True, kw_only=True):
    """Output budget of one role. Thought tokens count against ``max_output_tokens``."""

    max_output_tokens: int
    thinking_budget: int

    def __post_init__(self) -> None:
        if self.max_output_tokens < 1:
            raise ValueError("max_output_tokens must be >= 1")
        if not 0 <= self.thinking_budget < self.max_output_tokens:
            raise ValueError("thinking_budget must be >= 0 and below max_output_tokens")


class GeminiSettings(_Frozen, frozen=True, kw_only=True):
    """How the Gemini provider calls the model.

    ``timeout_ms`` is the SDK's per-request HTTP timeout; ``deadline_s`` is the outer
    ``trio.fail_after`` guard around the whole SDK call, after which the call is abandoned and
    audited as outcome unknown.
    """

    model: str
    api_version: str
    temperature: float
    planner: RoleLimits
    critic: RoleLimits
    timeout_ms: int
    deadline_s: float
    price: PriceTable

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError("temperature must be within [0, 2]")
        if self.timeout_ms < 1:
            raise ValueError("timeout_ms must be >= 1")
        if self.deadline_s <= 0:
            raise ValueError("deadline_s must be > 0")


class CriticBehaviour(_Frozen, frozen=True, kw_only=True):
    """The simulated critic: a permissive reviewer.

    Given an answer, it asks to continue with probability ``continue_rate`` and approves
    otherwise. When the last ``stuck_after_failures`` tool calls all failed, it declares the
    agent stuck with probability ``stuck_rate``. With no answer at all it always asks to
    continue.
    """

    continue_rate: float
    stuck_rate: float
    stuck_after_failures: int

    def __post_init__(self) -> None:
        for name in ("continue_rate", "stuck_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.stuck_after_failures < 1:
            raise ValueError("stuck_after_failures must be >= 1")


class PlannerBehaviour(_Frozen, frozen=True, kw_only=True):
    """The simulated planner: a fallible agent (``sim_planner``). Every field is a probability.

    Attributes:
        premature_rate: with required evidence missing and no feedback yet, propose completion
            anyway (from its draft, or from whatever receipts it has).
        heed_codes_rate: after feedback carrying verifier reason codes, address the problem
            (fetch the missing evidence, fix the certificate) instead of proposing again as is.
        heed_text_rate: the same after free-text feedback only (a critic's reason).
        stuck_rate: declare stuck when the latest tool call failed.
        repeat_failed_rate: repeat the latest failing call unchanged instead of fixing it.
        wrong_citation_rate: cite a wrong receipt for one slot of a completion.
        miscompute_rate: miscompute one claimed value of a completion.
        stale_digest_rate: after a tool call, copy the ledger digest shown before it.
        done_token_rate: end a completion message with the DONE token.
    """

    premature_rate: float
    heed_codes_rate: float
    heed_text_rate: float
    stuck_rate: float
    repeat_failed_rate: float
    wrong_citation_rate: float
    miscompute_rate: float
    stale_digest_rate: float
    done_token_rate: float

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")


class SimulatedSettings(_Frozen, frozen=True, kw_only=True):
    """The simulated provider: its model label, token accounting and per-role behaviours.

    A role's behaviour parameters live here, one field per role (a new role behaviour adds its
    own typed field).
    """

    model: str
    chars_per_token: int
    price: PriceTable
    critic: CriticBehaviour
    planner: PlannerBehaviour

    def __post_init__(self) -> None:
        if self.chars_per_token < 1:
            raise ValueError("chars_per_token must be >= 1")


class GenerationConfig(_Frozen, frozen=True, kw_only=True):
    """The whole frozen generation config."""

    schema_version: Literal[1]
    gemini: GeminiSettings
    simulated: SimulatedSettings


def default_generation_config() -> GenerationConfig:
    """The study's generation config (Gemini 2.5 Flash at temperature 0.2; simulated critic)."""
    return GenerationConfig(
        schema_version=1,
        gemini=GeminiSettings(
            model="gemini-2.5-flash",
            api_version="v1beta",
            temperature=0.2,
            planner=RoleLimits(max_output_tokens=8192, thinking_budget=2048),
            critic=RoleLimits(max_output_tokens=2048, thinking_budget=512),
            timeout_ms=60_000,
            deadline_s=90.0,
            price=PriceTable(
                model="gemini-2.5-flash",
                currency="USD",
                input_per_million=0.30,
                output_per_million=2.50,
                source=(
                    "Gemini API list price for gemini-2.5-flash, paid tier, text input; "
                    "output includes thinking tokens; check the provider's current price list "
                    "before a paid run"
                ),
            ),
        ),
        simulated=SimulatedSettings(
            model="simulated",
            chars_per_token=4,
            price=PriceTable(
                model="simulated",
                currency="USD",
                input_per_million=0.0,
                output_per_million=0.0,
                source="simulated provider: runs locally, no charge",
            ),
            critic=CriticBehaviour(continue_rate=0.1, stuck_rate=0.5, stuck_after_failures=2),
            planner=PlannerBehaviour(
                premature_rate=0.6,
                heed_codes_rate=0.85,
                heed_text_rate=0.5,
                stuck_rate=0.15,
                repeat_failed_rate=0.3,
                wrong_citation_rate=0.1,
                miscompute_rate=0.1,
                stale_digest_rate=0.3,
                done_token_rate=0.9,
            ),
        ),
    )


def config_digest(config: GenerationConfig) -> str:
    """``blake3:<hex>`` of the config's canonical bytes (domain ``study.config.v1``)."""
    return digest(Domain.CONFIG, config)


def decode_generation_config(data: bytes, *, origin: str) -> GenerationConfig:
    """Decode a generation config from JSON bytes.

    Args:
        data: the JSON document.
        origin: where the bytes came from (a path), for the error message.

    Raises:
        GenerationConfigError: when the document is not a complete, valid config.
    """
    return decode_strict(
        data, GenerationConfig, GenerationConfigError, f"generation config {origin}"
    )


def check_seed(seed: int) -> None:
    """Raise ValueError unless ``seed`` fits Gemini's int32 seed field and is not negative."""
    if not 0 <= seed <= _SEED_MAX:
        raise ValueError(f"seed must be within [0, {_SEED_MAX}], got {seed}")
