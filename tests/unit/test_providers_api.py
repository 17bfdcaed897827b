"""The public API of ``harness.providers`` is pinned: a change to it is a deliberate edit here."""

from __future__ import annotations

import harness.providers as providers

PUBLIC = {
    "FULL_TRACE_CRITIC_SEED",
    "PRE_OUTPUT_FAILURES",
    "PUBLIC_BASE_URL",
    "AttemptIntent",
    "AttemptJournal",
    "AttemptRecord",
    "AttemptStatus",
    "Audit",
    "BlobSink",
    "Credential",
    "CredentialSource",
    "CriticBehaviour",
    "FailureKind",
    "GeminiSettings",
    "GenerationConfig",
    "MemoryBlobSink",
    "MemoryJournal",
    "Message",
    "PriceTable",
    "Provider",
    "ProviderName",
    "ProviderRequest",
    "ProviderResult",
    "ProviderSelection",
    "Role",
    "RoleBehaviour",
    "RoleLimits",
    "SimulatedProvider",
    "SimulatedSettings",
    "Usage",
    "config_digest",
    "decode_generation_config",
    "default_behaviours",
    "default_generation_config",
    "estimate_cost",
    "load_credential",
    "memory_audit",
    "open_provider",
    "prompt_bytes",
    "prompt_ids",
    "render_prompt",
    "scrub_ambient",
    "select_provider",
}


def test_providers_exports_are_pinned_and_resolve() -> None:
    assert set(providers.__all__) == PUBLIC
    assert len(providers.__all__) == len(PUBLIC)
    for name in providers.__all__:
        assert getattr(providers, name) is not None


def test_failure_kind_wire_strings_are_pinned() -> None:
    assert {k.value for k in providers.FailureKind} == {
        "connect_error", "connect_timeout", "pool_timeout", "write_error", "write_timeout",
        "disconnected_before_response", "read_timeout", "connection_reset", "partial_response",
        "transport_error", "deadline_exceeded", "cancelled", "rate_limited", "http_client_error",
        "http_server_error", "http_unexpected_status", "malformed_response", "blocked",
        "no_candidates", "max_tokens", "unexpected_finish", "empty_output", "output_not_json",
        "schema_mismatch", "client_error", "authentication_failed", "not_found",
            "plugin_error", "response_too_large", "local_capacity",
    }  # fmt: skip
    assert {k.value for k in providers.PRE_OUTPUT_FAILURES} == {
        "connect_error", "connect_timeout", "pool_timeout", "write_error", "write_timeout",
        "disconnected_before_response",
    }  # fmt: skip


def test_infrastructure_failures_are_the_outage_kinds_and_nothing_the_model_said() -> None:
    from harness.providers.kinds import INFRASTRUCTURE_FAILURES, FailureKind, infrastructure_cause

    assert {k.value: c.value for k, c in INFRASTRUCTURE_FAILURES.items()} == {
        "authentication_failed": "authentication", "rate_limited": "quota",
        "not_found": "not_found", "connect_error": "connection",
        "connect_timeout": "connection", "pool_timeout": "connection",
        "local_capacity": "local_capacity",
    }  # fmt: skip
    for answered in ("schema_mismatch", "output_not_json", "max_tokens", "http_server_error"):
        assert infrastructure_cause(FailureKind(answered)) is None
    assert infrastructure_cause(None) is None
