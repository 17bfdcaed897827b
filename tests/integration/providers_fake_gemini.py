"""The loopback Gemini endpoint the tests script: one implementation, in
``harness.providers.loopback``.

Kept under its old name so the tests read ``from providers_fake_gemini import FakeGemini, ...``.
"""

from __future__ import annotations

from harness.providers.loopback import (
    DEFAULT_USAGE,
    Answer,
    FakeGemini,
    RecordedRequest,
    blocked,
    body,
    disconnect_before_response,
    drip,
    echo_credential,
    endless,
    error,
    gzip_bomb,
    huge,
    model_metadata,
    no_candidates,
    output,
    partial_body,
    reset_after_request,
    slow,
    text,
)

__all__ = [
    "DEFAULT_USAGE",
    "Answer",
    "FakeGemini",
    "RecordedRequest",
    "blocked",
    "body",
    "disconnect_before_response",
    "drip",
    "echo_credential",
    "endless",
    "error",
    "gzip_bomb",
    "huge",
    "model_metadata",
    "no_candidates",
    "output",
    "partial_body",
    "reset_after_request",
    "slow",
    "text",
]
