"""The project's exception hierarchy: broken I/O or misuse, never a verdict.

A rejected certificate is a ``Decision``, not an exception. Every error a user can cause derives
from ``HarnessError``; the CLI catches it once and prints one sentence with its exit code.
Each area adds its family here (store, sandbox, provider, ...), so there is one home for them.
"""

from __future__ import annotations

__all__ = [
    "CredentialError",
    "GenerationConfigError",
    "HarnessError",
    "InputError",
    "PromptBlindingError",
    "PromptTemplateError",
    "ProviderError",
    "ProviderSelectionError",
    "ResponseSchemaError",
    "SimulatedBehaviourMissingError",
]


class HarnessError(Exception):
    """Base of every expected failure. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class InputError(HarnessError):
    """An input file is missing, unreadable or not what the command needs."""


class ProviderError(HarnessError):
    """A provider cannot be set up or used as asked (not a failed model call: that is a result)."""


class ProviderSelectionError(ProviderError):
    """The provider options contradict each other (e.g. a credential for the simulated provider)."""


class CredentialError(ProviderError):
    """The named credential source is missing, unreadable or empty. Never quotes the key."""


class GenerationConfigError(ProviderError):
    """The frozen generation config is inconsistent or not decodable."""


class ResponseSchemaError(ProviderError):
    """A response schema uses a JSON Schema keyword outside the supported subset."""


class PromptTemplateError(ProviderError):
    """A versioned prompt file is missing or malformed."""


class PromptBlindingError(ProviderError):
    """A prompt view carries a field a blinded prompt must never see (split, fault, gold)."""


class SimulatedBehaviourMissingError(ProviderError):
    """The simulated provider was asked to play a role it has no behaviour for."""
