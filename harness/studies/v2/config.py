"""The frozen V2 study config (``schedules/v2-config.json``): every prespecified choice, as data.

It fixes the worlds and families (24 tasks), the checkpoints, the four policy pipelines, the
seeds, the budgets (4 decisions, 3 additional tool calls), the canonical order, the fault
assignment (its rule and the resulting table), the two trust-boundary clusters excluded from
the confirmatory analysis, the generation config (with its digest), and the analysis parameters
the report uses (bootstrap replicates and seed, the H3 noninferiority margin, the H4 recovery
gate). Decoding refuses unknown fields and supplies no defaults: a config that omits a value is
an error, not a silent default.

This module reads and checks the config; the schedule is built from it in ``schedule``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final, Literal

import msgspec

from harness.canonical import decode_strict
from harness.errors import V2ConfigError
from harness.providers.config import GenerationConfig, config_digest
from harness.studies.v2.outcomes import CHECKPOINTS, POLICIES, CheckpointKind, PolicyArm
from harness.worlds.snapshots import FaultId

__all__ = [
    "CONFIG_SCHEMA",
    "DEFAULT_CONFIG_PATH",
    "ORDER",
    "AnalysisParams",
    "Budget",
    "CircuitBreaker",
    "Exclusion",
    "FaultAssignment",
    "H2Test",
    "H3Test",
    "RecoveryGate",
    "V2Config",
    "decode_config",
    "encode_config",
    "load_config",
]

CONFIG_SCHEMA: Final = "harness.v2-config.v1"
DEFAULT_CONFIG_PATH: Final = "schedules/v2-config.json"
ORDER: Final = ("seed", "task", "checkpoint", "policy")
"""Canonical schedule order, outermost first: seed, then task (world, then family), then
checkpoint (clean, incomplete), then policy (critic, controller, full_trace, ect)."""

Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class _Frozen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base: immutable, keyword-only, unknown fields refused."""


class Budget(_Frozen, frozen=True, kw_only=True):
    """Per-trajectory budget: planner decisions, and tool calls beyond the checkpoint's."""

    decisions: Annotated[int, msgspec.Meta(ge=1)]
    additional_tool_calls: Annotated[int, msgspec.Meta(ge=0)]


class CircuitBreaker(_Frozen, frozen=True, kw_only=True):
    """When a run stops for an outage: after this many consecutive provider attempts that
    failed for infrastructure reasons (``harness.providers.INFRASTRUCTURE_FAILURES``: a rejected
    key, an exhausted quota, a missing model, no connection). Unusable replies never count."""

    consecutive_infrastructure_failures: Annotated[int, msgspec.Meta(ge=1)]


class FaultAssignment(_Frozen, frozen=True, kw_only=True):
    """Which fault each task's incomplete checkpoint is derived from.

    ``rule`` states how ``tasks`` follows from the task order; ``schedule`` recomputes the
    table from the rule and refuses a config whose table differs.
    """

    rule: str
    faults: tuple[FaultId, ...]
    tasks_per_fault: Annotated[int, msgspec.Meta(ge=1)]
    tasks: dict[str, FaultId]


class Exclusion(_Frozen, frozen=True, kw_only=True):
    """Task clusters left out of the confirmatory analysis (reported descriptively)."""

    faults: tuple[FaultId, ...]
    tasks: tuple[str, ...]
    reason: str


class H2Test(_Frozen, frozen=True, kw_only=True):
    """H2: premature unsupported termination from incomplete checkpoints, ECT vs comparator."""

    endpoint: Literal["premature_unsupported_termination"]
    rule: str


class H3Test(_Frozen, frozen=True, kw_only=True):
    """H3: supported completion over both checkpoints, noninferiority of ECT."""

    endpoint: Literal["supported_completion"]
    noninferiority_margin_pp: Annotated[float, msgspec.Meta(lt=0.0)]
    rule: str


class RecoveryGate(_Frozen, frozen=True, kw_only=True):
    """H4: the event-level recovery gate on ECT's primary incomplete trajectories."""

    arm: Literal["ect"]
    min_recovery_fraction: Probability
    min_completed_after_recovery_fraction: Probability
    rule: str


class AnalysisParams(_Frozen, frozen=True, kw_only=True):
    """The prespecified analysis the report runs on the store's results."""

    comparator: PolicyArm
    confidence: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)]
    bootstrap_replicates: Annotated[int, msgspec.Meta(ge=1)]
    bootstrap_seed: Annotated[int, msgspec.Meta(ge=0)]
    cluster: Literal["task"]
    h2: H2Test
    h3: H3Test
    h4: RecoveryGate


class V2Config(_Frozen, frozen=True, kw_only=True):
    """The whole frozen study config (see the module docstring)."""

    schema: Literal["harness.v2-config.v1"]
    study: Literal["v2-closed-loop"]
    worlds: tuple[str, ...]
    families: tuple[str, ...]
    checkpoints: tuple[CheckpointKind, ...]
    policies: tuple[PolicyArm, ...]
    seeds: tuple[int, ...]
    order: tuple[str, ...]
    budget: Budget
    circuit_breaker: CircuitBreaker
    tool_timeout_s: Annotated[float, msgspec.Meta(gt=0.0)]
    fault_assignment: FaultAssignment
    excluded_from_confirmatory: Exclusion
    generation_config_digest: str
    generation_config: GenerationConfig
    analysis: AnalysisParams

    def __post_init__(self) -> None:
        if self.checkpoints != CHECKPOINTS:
            raise ValueError(f"checkpoints must be {list(CHECKPOINTS)}")
        if self.policies != POLICIES:
            raise ValueError(f"policies must be {list(POLICIES)}")
        if self.order != ORDER:
            raise ValueError(f"order must be {list(ORDER)}")
        for name in ("worlds", "families", "seeds"):
            values = getattr(self, name)
            if not values or len(set(values)) != len(values):
                raise ValueError(f"{name} must be non-empty and must not repeat")
        if config_digest(self.generation_config) != self.generation_config_digest:
            raise ValueError("generation_config_digest does not match generation_config")


def encode_config(config: V2Config) -> bytes:
    """The config file's bytes: canonical JSON, two-space indent, final newline."""
    return msgspec.json.format(msgspec.json.encode(config, order="sorted"), indent=2) + b"\n"


def decode_config(data: bytes, *, origin: str) -> V2Config:
    """Decode a study config.

    Raises:
        V2ConfigError: the bytes are not a complete, consistent config.
    """
    return decode_strict(data, V2Config, V2ConfigError, f"V2 study config {origin}")


def load_config(path: Path) -> tuple[V2Config, bytes]:
    """Read and decode the config at ``path``; return it and its exact bytes.

    Raises:
        V2ConfigError: the file is missing, unreadable or not a valid config.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise V2ConfigError(f"cannot read the V2 study config {path}: {e.strerror}") from e
    return decode_config(data, origin=str(path)), data
