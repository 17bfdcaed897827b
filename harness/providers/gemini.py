"""The Gemini provider: gemini-2.5-flash through google-genai, with the study's retry rule.

Each request becomes one ``generateContent`` call with the frozen settings: model, temperature,
the request's seed, the role's max output tokens and thinking budget, JSON output constrained by
``responseJsonSchema``, automatic function calling and continuation off, and SDK retries off
(``HttpRetryOptions(attempts=1)``: the SDK would otherwise retry 408/429/5xx by itself). The
reply is judged by our own code: finish reason STOP, non-empty text, JSON, and valid against the
response schema (``json_schema.validate_response``).

Retry rule (``network.NetworkProvider``, shared with ``openai_chat``): exactly one identical
retry (same SDK call, byte-identical body), and only after a transport failure before any
response byte (``PRE_OUTPUT_FAILURES``). Every other failure (HTTP 4xx/5xx, 429, read timeout,
reset after the request was sent, partial body, malformed JSON, MAX_TOKENS, blocked, no
candidates, schema mismatch) is recorded and returned as the result's failure; the policy maps
it to ``continue``.

Concurrency (shared likewise): ``client.aio`` does not run under trio, so the sync client runs in
``trio.to_thread.run_sync(..., abandon_on_cancel=True)`` under ``trio.fail_after(deadline_s)``.
An abandoned call may still complete server-side; it is audited as ``abandoned`` (outcome
unknown) and never retried.

Credential: the key is handed to the SDK client only (it travels in the ``x-goog-api-key``
header, which the capturing transport never records). Ambient ``GOOGLE_*``/``GEMINI_*``
variables are removed before the client is built, and every stored byte string and failure
message is passed through ``Credential.redact`` first.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, MutableMapping
from typing import Any, Final

import httpx2
import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from harness.providers._capture import Capture, CapturingTransport
from harness.providers.attempts import Usage
from harness.providers.config import GeminiSettings, GenerationConfig, PriceTable
from harness.providers.credentials import Credential, scrub_ambient
from harness.providers.endpoint import PUBLIC_BASE_URL, check_base_url
from harness.providers.kinds import FailureKind, ProviderName, Role
from harness.providers.network import (
    PREFLIGHT_CELL,
    PREFLIGHT_PROMPT,
    Judgement,
    NetworkProvider,
    judge_text,
    transport_kind,
)
from harness.providers.protocol import ProviderRequest

__all__ = ["PREFLIGHT_CELL", "PREFLIGHT_PROMPT", "GeminiProvider"]

_BLOCKING_FINISH: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "MODEL_ARMOR",
    }
)


def _names_api_key(error: genai_errors.APIError) -> bool:
    """True when a 400 says the API key is invalid (how Gemini answers a wrong key)."""
    reasons = []
    body: dict[str, Any] = error.details if isinstance(error.details, dict) else {}
    inner = body.get("error")
    found: dict[str, Any] = inner if isinstance(inner, dict) else body
    for item in found.get("details") or []:
        if isinstance(item, dict) and isinstance(item.get("reason"), str):
            reasons.append(item["reason"])
    return "API_KEY_INVALID" in reasons or "API key not valid" in (error.message or "")


def _classify(error: Exception, capture: Capture) -> tuple[FailureKind, str]:
    """Map an exception raised by the SDK call to a failure kind and a detail line."""
    if isinstance(error, genai_errors.APIError):
        detail = f"HTTP {error.code} {error.status}: {error.message}"
        if error.code == 429:
            return FailureKind.RATE_LIMITED, detail
        if error.code in (401, 403) or (error.code == 400 and _names_api_key(error)):
            return FailureKind.AUTHENTICATION_FAILED, detail
        if error.code == 404:
            return FailureKind.NOT_FOUND, detail
        if isinstance(error, genai_errors.ClientError):
            return FailureKind.HTTP_CLIENT_ERROR, detail
        if isinstance(error, genai_errors.ServerError):
            return FailureKind.HTTP_SERVER_ERROR, detail
        return FailureKind.HTTP_UNEXPECTED_STATUS, detail
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, httpx2.TransportError):
        return transport_kind(error, capture), detail
    if isinstance(error, (json.JSONDecodeError, httpx2.DecodingError, pydantic.ValidationError)):
        return FailureKind.MALFORMED_RESPONSE, detail
    return FailureKind.CLIENT_ERROR, detail


def _judge(response: types.GenerateContentResponse, schema: dict[str, Any]) -> Judgement:
    """Judge a 200 reply: usable output, or why not."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        reason = getattr(feedback.block_reason, "value", str(feedback.block_reason))
        return Judgement(None, FailureKind.BLOCKED, f"prompt blocked: {reason}", None)
    candidates = response.candidates or []
    if not candidates:
        return Judgement(None, FailureKind.NO_CANDIDATES, "the reply has no candidates", None)
    candidate = candidates[0]
    raw_finish = candidate.finish_reason
    finish = None if raw_finish is None else str(getattr(raw_finish, "value", raw_finish))
    if finish != "STOP":
        if finish == "MAX_TOKENS":
            kind = FailureKind.MAX_TOKENS
        elif finish in _BLOCKING_FINISH:
            kind = FailureKind.BLOCKED
        else:
            kind = FailureKind.UNEXPECTED_FINISH
        return Judgement(None, kind, f"finish reason {finish}", finish)
    parts = candidate.content.parts if candidate.content and candidate.content.parts else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    if not text.strip():
        return Judgement(None, FailureKind.EMPTY_OUTPUT, "the reply has no text", finish)
    return judge_text(text, schema, finish)


def _usage(response: types.GenerateContentResponse | None) -> Usage:
    meta = None if response is None else response.usage_metadata
    if meta is None:
        return Usage(prompt_tokens=None, output_tokens=None, thought_tokens=None)
    return Usage(
        prompt_tokens=meta.prompt_token_count,
        output_tokens=meta.candidates_token_count,
        thought_tokens=meta.thoughts_token_count,
    )


class GeminiProvider(NetworkProvider[types.GenerateContentResponse]):
    """Answers requests with Gemini through the google-genai SDK."""

    def __init__(
        self,
        credential: Credential,
        *,
        base_url: str = PUBLIC_BASE_URL,
        environ: MutableMapping[str, str] | None = None,
    ) -> None:
        """Build the provider; removes ambient ``GOOGLE_*``/``GEMINI_*`` variables first.

        Args:
            credential: the key, from an explicitly named source.
            base_url: the endpoint (the public Gemini API, a gateway, or a local fake).
            environ: the environment to scrub (default: the process environment, which the
                SDK reads).

        Raises:
            ProviderSelectionError: when ``base_url`` is unusable.
        """
        self._credential = credential
        self._base_url = check_base_url(base_url)
        self._clients = {}
        scrub_ambient(environ)

    @property
    def name(self) -> ProviderName:
        """``gemini``."""
        return ProviderName.GEMINI

    def _client(self, settings: GeminiSettings) -> genai.Client:
        key = (settings.api_version, settings.timeout_ms)
        if key not in self._clients:
            http = httpx2.Client(
                transport=CapturingTransport(httpx2.HTTPTransport(trust_env=False, retries=0)),
                trust_env=False,
                follow_redirects=False,
            )
            assert self._credential is not None  # a Gemini key is never optional
            client = genai.Client(
                vertexai=False,
                api_key=self._credential.reveal(),
                http_options=types.HttpOptions(
                    base_url=self._base_url,
                    api_version=settings.api_version,
                    timeout=settings.timeout_ms,
                    retry_options=types.HttpRetryOptions(attempts=1),
                    httpx_client=http,
                ),
            )
            self._clients[key] = (client, http)
        client_: genai.Client = self._clients[key][0]
        return client_

    def _model(self, config: GenerationConfig) -> str:
        return config.gemini.model

    def _price(self, config: GenerationConfig) -> PriceTable:
        # The frozen table is Google's price at Google's endpoint; a gateway or a local server
        # charges what it charges, which the harness does not know.
        if self._base_url == PUBLIC_BASE_URL:
            return config.gemini.price
        return PriceTable.unpriced(config.gemini.model)

    def _probe_call(self, config: GenerationConfig) -> tuple[dict[str, Any], Callable[[], object]]:
        """``GET {base}/{api_version}/models/{model}``."""
        settings = config.gemini
        client = self._client(settings)
        described = {
            "method": "GET",
            "model": settings.model,
            "api_version": settings.api_version,
            "base_url": self._base_url,
        }
        return described, functools.partial(client.models.get, model=settings.model)

    def _prepare(self, request: ProviderRequest) -> Callable[[], types.GenerateContentResponse]:
        settings = request.config.gemini
        limits = settings.planner if request.role is Role.PLANNER else settings.critic
        system = [m.text for m in request.messages if m.role == "system"]
        contents = [
            types.Content(role=m.role, parts=[types.Part(text=m.text)])
            for m in request.messages
            if m.role != "system"
        ]
        config = types.GenerateContentConfig(
            system_instruction=system[0] if system else None,
            temperature=settings.temperature,
            seed=request.seed,
            candidate_count=1,
            max_output_tokens=limits.max_output_tokens,
            response_mime_type="application/json",
            response_json_schema=request.response_schema,
            thinking_config=types.ThinkingConfig(thinking_budget=limits.thinking_budget),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            automatic_continuation=False,
        )
        return functools.partial(
            self._client(settings).models.generate_content,
            model=settings.model,
            contents=contents,
            config=config,
        )

    def _classify(self, error: Exception, capture: Capture) -> tuple[FailureKind, str]:
        return _classify(error, capture)

    def _judge(self, response: types.GenerateContentResponse, schema: dict[str, Any]) -> Judgement:
        return _judge(response, schema)

    def _usage(self, response: types.GenerateContentResponse | None) -> Usage:
        return _usage(response)

    def _served(self, response: types.GenerateContentResponse) -> tuple[str | None, str | None]:
        return response.model_version, response.response_id
