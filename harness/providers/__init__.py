"""Providers: who answers the planner's and the critics' calls, and the audit of every attempt.

One protocol (``Provider.generate(request, audit) -> ProviderResult``) with two
implementations: the deterministic ``SimulatedProvider`` (the default; offline, labelled
simulated everywhere) and ``harness.providers.gemini.GeminiProvider`` (gemini-2.5-flash through
google-genai, with the single pre-output retry; not re-exported here, so that importing the
package does not import the SDK). Every attempt is journaled before and after it runs and
recorded with hashes, content-addressed raw bytes, tokens, latency and estimated cost. Prompts
are versioned files rendered from blinded views; credentials come only from an explicitly named
source.

This package does not decide anything about termination (that is the policies' job) and does
not persist anything itself (the run store implements ``AttemptJournal`` and ``BlobSink``).
"""

from harness.providers.attempts import (
    AttemptIntent,
    AttemptJournal,
    AttemptRecord,
    Audit,
    BlobSink,
    MemoryBlobSink,
    MemoryJournal,
    Usage,
    estimate_cost,
    memory_audit,
)
from harness.providers.config import (
    FULL_TRACE_CRITIC_SEED,
    CriticBehaviour,
    GeminiSettings,
    GenerationConfig,
    PriceTable,
    RoleLimits,
    SimulatedSettings,
    config_digest,
    decode_generation_config,
    default_generation_config,
)
from harness.providers.credentials import (
    Credential,
    CredentialSource,
    load_credential,
    scrub_ambient,
)
from harness.providers.endpoint import PUBLIC_BASE_URL
from harness.providers.kinds import (
    PRE_OUTPUT_FAILURES,
    AttemptStatus,
    FailureKind,
    ProviderName,
    Role,
)
from harness.providers.prompts import prompt_bytes, prompt_ids, render_prompt
from harness.providers.protocol import Message, Provider, ProviderRequest, ProviderResult
from harness.providers.selection import (
    ProviderSelection,
    open_provider,
    select_provider,
)
from harness.providers.simulated import RoleBehaviour, SimulatedProvider, default_behaviours

__all__ = [
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
]
