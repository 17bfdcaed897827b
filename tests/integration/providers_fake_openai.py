"""The loopback OpenAI-compatible endpoint the tests script: one implementation, in
``harness.providers.loopback`` (both wire shapes) and ``harness.providers.loopback_sim`` (the
simulated behaviour behind it).

Kept under its old name so the tests read ``from providers_fake_openai import FakeOpenAI, ...``;
here ``FakeOpenAI()`` answers past its script with the simulated behaviour, as it always did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from harness.providers import loopback
from harness.providers.config import GenerationConfig, default_generation_config
from harness.providers.loopback import (
    Answer,
    RecordedRequest,
    Responder,
    chat_error,
    chat_output,
    chat_text,
    disconnect_before_response,
    model_object,
)
from harness.providers.loopback_sim import SimulatedResponder, simulated_output

__all__ = [
    "Answer",
    "FakeOpenAI",
    "RecordedRequest",
    "SimulatedChat",
    "_model_object",
    "chat_error",
    "chat_output",
    "chat_text",
    "disconnect_before_response",
    "simulated_output",
]

_model_object = model_object


def SimulatedChat(  # noqa: N802 - the name the tests have always used
    *,
    config: GenerationConfig | None = None,
    cell_of: Callable[[], str] | None = None,
    latency_s: float = 0.0,
    faults: Mapping[int, Answer] | None = None,
) -> SimulatedResponder:
    """The simulated responder on the chat-completions shape."""
    return SimulatedResponder(
        config or default_generation_config(),
        shape="openai",
        latency_ms=latency_s * 1000.0,
        cell_of=cell_of,
        faults=faults,
    )


class FakeOpenAI(loopback.FakeOpenAI):
    """A loopback chat-completions endpoint answering past its script with ``responder``
    (default: the simulated behaviour)."""

    def __init__(self, responder: Responder | None = None) -> None:
        super().__init__(responder or SimulatedChat())

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self
