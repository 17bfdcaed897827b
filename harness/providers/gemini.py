"""The Gemini provider: gemini-2.5-flash through google-genai, with the study's retry rule.

Each request becomes one ``generateContent`` call with the frozen settings: model, temperature,
the request's seed, the role's max output tokens and thinking budget, JSON output constrained by
``responseJsonSchema``, automatic function calling and continuation off, and SDK retries off
(``HttpRetryOptions(attempts=1)``: the SDK would otherwise retry 408/429/5xx by itself). The
reply is judged by our own code: finish reason STOP, non-empty text, JSON, and valid against the
response schema (``json_schema.validate_response``).

Retry rule: exactly one identical retry (same SDK call, byte-identical body), and only after a
transport failure before any response byte (``PRE_OUTPUT_FAILURES``). Every other failure (HTTP
4xx/5xx, 429, read timeout, reset after the request was sent, partial body, malformed JSON,
MAX_TOKENS, blocked, no candidates, schema mismatch) is recorded and returned as the result's
failure; the policy maps it to ``continue``.

Concurrency: ``client.aio`` does not run under trio, so the sync client runs in
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
import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import msgspec
import pydantic
import trio
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.json_schema import validate_response
from harness.log import get_logger
from harness.providers._capture import Capture, CapturingTransport, bind, unbind
from harness.providers.audit import AttemptIntent, AttemptRecord, Audit, Usage, estimate_cost
from harness.providers.config import GeminiSettings, GenerationConfig, config_digest
from harness.providers.credentials import Credential, scrub_ambient
from harness.providers.endpoint import PUBLIC_BASE_URL, check_base_url
from harness.providers.kinds import (
    PRE_OUTPUT_FAILURES,
    AttemptStatus,
    FailureKind,
    ProviderName,
    Role,
)
from harness.providers.protocol import ProviderRequest, ProviderResult

__all__ = ["PREFLIGHT_CELL", "PREFLIGHT_PROMPT", "GeminiProvider"]

PREFLIGHT_CELL: Final = "preflight"
PREFLIGHT_PROMPT: Final = "preflight.model-metadata.v1"

_DETAIL_MAX: Final = 500
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
# httpcore's words for "the peer closed the connection and not one response byte arrived".
_NOTHING_RECEIVED: Final = "Server disconnected without sending a response"

_log = get_logger("harness.providers")


@dataclass(frozen=True)
class _Outcome:
    response: types.GenerateContentResponse | None
    error: Exception | None


@dataclass(frozen=True)
class _Judgement:
    output: dict[str, Any] | None
    failure: FailureKind | None
    detail: str | None
    finish_reason: str | None


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL_MAX else flat[: _DETAIL_MAX - 3] + "..."


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
        if capture.response_started:
            # Status and headers arrived, the body did not finish: output may exist.
            return FailureKind.PARTIAL_RESPONSE, detail
        simple: tuple[tuple[type[Exception], FailureKind], ...] = (
            (httpx2.ConnectTimeout, FailureKind.CONNECT_TIMEOUT),
            (httpx2.ConnectError, FailureKind.CONNECT_ERROR),
            (httpx2.PoolTimeout, FailureKind.POOL_TIMEOUT),
            (httpx2.WriteTimeout, FailureKind.WRITE_TIMEOUT),
            (httpx2.WriteError, FailureKind.WRITE_ERROR),
            (httpx2.ReadTimeout, FailureKind.READ_TIMEOUT),
            (httpx2.ReadError, FailureKind.CONNECTION_RESET),
        )
        for cls, kind in simple:
            if isinstance(error, cls):
                return kind, detail
        if isinstance(error, httpx2.RemoteProtocolError) and str(error).startswith(
            _NOTHING_RECEIVED
        ):
            return FailureKind.DISCONNECTED_BEFORE_RESPONSE, detail
        # Anything else (e.g. a garbled status line) means bytes came back: not retry-safe.
        return FailureKind.TRANSPORT_ERROR, detail
    if isinstance(error, (json.JSONDecodeError, httpx2.DecodingError, pydantic.ValidationError)):
        return FailureKind.MALFORMED_RESPONSE, detail
    return FailureKind.CLIENT_ERROR, detail


def _judge(response: types.GenerateContentResponse, schema: dict[str, Any]) -> _Judgement:
    """Judge a 200 reply: usable output, or why not."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        reason = getattr(feedback.block_reason, "value", str(feedback.block_reason))
        return _Judgement(None, FailureKind.BLOCKED, f"prompt blocked: {reason}", None)
    candidates = response.candidates or []
    if not candidates:
        return _Judgement(None, FailureKind.NO_CANDIDATES, "the reply has no candidates", None)
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
        return _Judgement(None, kind, f"finish reason {finish}", finish)
    parts = candidate.content.parts if candidate.content and candidate.content.parts else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    if not text.strip():
        return _Judgement(None, FailureKind.EMPTY_OUTPUT, "the reply has no text", finish)
    try:
        value = msgspec.json.decode(text.encode("utf-8"))
    except msgspec.DecodeError as e:
        return _Judgement(None, FailureKind.OUTPUT_NOT_JSON, f"output is not JSON: {e}", finish)
    findings = validate_response(value, schema)
    if findings:
        return _Judgement(None, FailureKind.SCHEMA_MISMATCH, "; ".join(findings[:5]), finish)
    return _Judgement(value, None, None, finish)


def _usage(response: types.GenerateContentResponse | None) -> Usage:
    meta = None if response is None else response.usage_metadata
    if meta is None:
        return Usage(prompt_tokens=None, output_tokens=None, thought_tokens=None)
    return Usage(
        prompt_tokens=meta.prompt_token_count,
        output_tokens=meta.candidates_token_count,
        thought_tokens=meta.thoughts_token_count,
    )


def _call(
    client: genai.Client,
    model: str,
    contents: list[types.Content],
    config: types.GenerateContentConfig,
    capture: Capture,
) -> _Outcome:
    """Run one SDK call on a worker thread, recording its wire facts into ``capture``."""
    bind(capture)
    try:
        return _Outcome(
            response=client.models.generate_content(model=model, contents=contents, config=config),
            error=None,
        )
    except Exception as e:  # noqa: BLE001 - every failure of a call is a recorded result
        return _Outcome(response=None, error=e)
    finally:
        unbind()


class GeminiProvider:
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
        self._clients: dict[tuple[str, int], tuple[genai.Client, httpx2.Client]] = {}
        scrub_ambient(environ)

    @property
    def name(self) -> ProviderName:
        """``gemini``."""
        return ProviderName.GEMINI

    @property
    def base_url(self) -> str:
        """The endpoint every call goes to."""
        return self._base_url

    def _client(self, settings: GeminiSettings) -> genai.Client:
        key = (settings.api_version, settings.timeout_ms)
        if key not in self._clients:
            http = httpx2.Client(
                transport=CapturingTransport(httpx2.HTTPTransport(trust_env=False, retries=0)),
                trust_env=False,
                follow_redirects=False,
            )
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
        return self._clients[key][0]

    def close(self) -> None:
        """Close the HTTP connections (calls still running on abandoned threads may fail)."""
        for _, http in self._clients.values():
            http.close()
        self._clients.clear()

    def probe(self, config: GenerationConfig, audit: Audit) -> AttemptRecord:
        """Preflight: one authenticated request that spends no tokens (the model's metadata).

        ``GET {base}/{api_version}/models/{model}`` through the same client, transport and
        credential as every study call. The attempt is journaled in ``audit`` like any other,
        with role ``preflight``; its failure kind says why the provider is unusable (a rejected
        key, a missing model, no connection) and its detail carries the provider's own reason.
        Never raises for a failed request.
        """
        settings = config.gemini
        client = self._client(settings)
        described = {
            "method": "GET",
            "model": settings.model,
            "api_version": settings.api_version,
            "base_url": self._base_url,
        }
        request_hash = digest_bytes(Domain.PROVIDER_REQUEST, canonical_bytes(described))
        cfg_digest = config_digest(config)
        audit.journal.begin(
            AttemptIntent(
                provider=ProviderName.GEMINI,
                simulated=False,
                model=settings.model,
                role=Role.PREFLIGHT,
                cell_id=PREFLIGHT_CELL,
                prompt_id=PREFLIGHT_PROMPT,
                attempt_index=0,
                retry_reason=None,
                request_hash=request_hash,
                config_digest=cfg_digest,
            )
        )
        capture = Capture()
        started = time.perf_counter()
        bind(capture)
        try:
            client.models.get(model=settings.model)
            failure, detail = None, None
        except Exception as e:  # noqa: BLE001 - every failure of the probe is its verdict
            failure, detail = _classify(e, capture)
        finally:
            unbind()
        latency_ms = (time.perf_counter() - started) * 1000.0
        body = capture.response_body if capture.response_complete else None
        response_blob, response_hash, stored, redacted = self._store(
            audit, body, Domain.PROVIDER_RESPONSE
        )
        # A metadata request is not billed and counts no tokens.
        usage = Usage(prompt_tokens=0, output_tokens=0, thought_tokens=0)
        record = AttemptRecord(
            provider=ProviderName.GEMINI,
            simulated=False,
            model=settings.model,
            base_url=self._base_url,
            role=Role.PREFLIGHT,
            cell_id=PREFLIGHT_CELL,
            prompt_id=PREFLIGHT_PROMPT,
            config_digest=cfg_digest,
            attempt_index=0,
            retry_reason=None,
            request_hash=request_hash,
            request_body_hash=None,
            request_blob=None,
            status=AttemptStatus.FAILED if failure is not None else AttemptStatus.SUCCEEDED,
            failure_kind=failure,
            failure_detail=None if detail is None else _one_line(self._credential.redact(detail)),
            http_status=capture.status,
            response_hash=response_hash,
            response_blob=response_blob,
            response_bytes=stored,
            response_complete=capture.response_complete,
            redacted=redacted,
            finish_reason=None,
            model_version=None,
            response_id=None,
            usage=usage,
            latency_ms=round(latency_ms, 3),
            price=settings.price,
            cost_usd=estimate_cost(settings.price, usage),
        )
        audit.journal.end(record)
        _log.debug(
            "provider.preflight",
            provider="gemini",
            status=record.status.value,
            failure_kind=None if failure is None else failure.value,
            http_status=capture.status,
            latency_ms=record.latency_ms,
        )
        return record

    @staticmethod
    def _sdk_arguments(
        request: ProviderRequest,
    ) -> tuple[list[types.Content], types.GenerateContentConfig]:
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
        return contents, config

    def _store(
        self, audit: Audit, data: bytes | None, domain: Domain
    ) -> tuple[str | None, str | None, int, bool]:
        """Redact and store ``data``; return (blob address, hash, stored length, redacted?)."""
        if data is None:
            return None, None, 0, False
        clean, redacted = self._credential.redact_bytes(data)
        return audit.blobs.put(clean), digest_bytes(domain, clean), len(clean), redacted

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Answer ``request``: one attempt, plus one identical retry after a pre-output failure.

        Never raises for a failed call. Re-raises trio cancellation after journaling the
        attempt in flight as abandoned.
        """
        request_hash = request.digest()
        cfg_digest = config_digest(request.config)
        contents, sdk_config = self._sdk_arguments(request)
        records: list[AttemptRecord] = []
        output: dict[str, Any] | None = None
        retry_reason: FailureKind | None = None
        for index in range(2):
            record, output = await self._attempt(
                request, audit, contents, sdk_config, index, retry_reason, request_hash, cfg_digest
            )
            records.append(record)
            if index == 0 and record.failure_kind in PRE_OUTPUT_FAILURES:
                retry_reason = record.failure_kind
                continue
            break
        return ProviderResult(
            provider=ProviderName.GEMINI,
            output=output,
            failure=records[-1].failure_kind,
            attempts=tuple(records),
        )

    async def _attempt(
        self,
        request: ProviderRequest,
        audit: Audit,
        contents: list[types.Content],
        sdk_config: types.GenerateContentConfig,
        index: int,
        retry_reason: FailureKind | None,
        request_hash: str,
        cfg_digest: str,
    ) -> tuple[AttemptRecord, dict[str, Any] | None]:
        settings = request.config.gemini
        client = self._client(settings)
        audit.journal.begin(
            AttemptIntent(
                provider=ProviderName.GEMINI,
                simulated=False,
                model=settings.model,
                role=request.role,
                cell_id=request.cell_id,
                prompt_id=request.prompt_id,
                attempt_index=index,
                retry_reason=retry_reason,
                request_hash=request_hash,
                config_digest=cfg_digest,
            )
        )
        record_fields = functools.partial(
            self._record,
            request=request,
            audit=audit,
            index=index,
            retry_reason=retry_reason,
            request_hash=request_hash,
            cfg_digest=cfg_digest,
        )
        capture = Capture()
        started = time.perf_counter()
        outcome: _Outcome | None = None
        try:
            with trio.fail_after(settings.deadline_s):
                outcome = await trio.to_thread.run_sync(
                    functools.partial(_call, client, settings.model, contents, sdk_config, capture),
                    abandon_on_cancel=True,
                )
        except trio.TooSlowError:
            outcome = None
        except trio.Cancelled:
            record = record_fields(
                capture=capture,
                latency_ms=(time.perf_counter() - started) * 1000.0,
                response=None,
                abandoned=FailureKind.CANCELLED,
                failure=None,
                detail="the caller cancelled the call; its server-side outcome is unknown",
                judgement=None,
            )
            audit.journal.end(record)
            raise
        latency_ms = (time.perf_counter() - started) * 1000.0
        if outcome is None:
            record = record_fields(
                capture=capture,
                latency_ms=latency_ms,
                response=None,
                abandoned=FailureKind.DEADLINE_EXCEEDED,
                failure=None,
                detail=(
                    f"no answer within the {settings.deadline_s} s deadline; the call was "
                    "abandoned and its server-side outcome is unknown"
                ),
                judgement=None,
            )
            audit.journal.end(record)
            return record, None
        judgement: _Judgement | None = None
        failure: FailureKind | None
        detail: str | None
        if outcome.error is not None:
            failure, detail = _classify(outcome.error, capture)
        else:
            assert outcome.response is not None
            judgement = _judge(outcome.response, request.response_schema)
            failure, detail = judgement.failure, judgement.detail
        record = record_fields(
            capture=capture,
            latency_ms=latency_ms,
            response=outcome.response,
            abandoned=None,
            failure=failure,
            detail=detail,
            judgement=judgement,
        )
        audit.journal.end(record)
        return record, None if judgement is None else judgement.output

    def _record(
        self,
        *,
        request: ProviderRequest,
        audit: Audit,
        index: int,
        retry_reason: FailureKind | None,
        request_hash: str,
        cfg_digest: str,
        capture: Capture,
        latency_ms: float,
        response: types.GenerateContentResponse | None,
        abandoned: FailureKind | None,
        failure: FailureKind | None,
        detail: str | None,
        judgement: _Judgement | None,
    ) -> AttemptRecord:
        """Store the attempt's blobs and build its audit row."""
        settings = request.config.gemini
        request_blob, request_body_hash, _, request_redacted = self._store(
            audit, capture.request_body, Domain.PROVIDER_REQUEST
        )
        if abandoned is not None:
            # The worker thread may still be writing the capture: store nothing it received.
            body, complete, status = None, False, None
        elif capture.response_complete:
            body, complete, status = capture.response_body, True, capture.status
        else:
            body, complete, status = capture.partial_body or None, False, capture.status
        response_blob, response_hash, stored_bytes, response_redacted = self._store(
            audit, body, Domain.PROVIDER_RESPONSE
        )
        usage = _usage(response)
        kind = abandoned if abandoned is not None else failure
        record = AttemptRecord(
            provider=ProviderName.GEMINI,
            simulated=False,
            model=settings.model,
            base_url=self._base_url,
            role=request.role,
            cell_id=request.cell_id,
            prompt_id=request.prompt_id,
            config_digest=cfg_digest,
            attempt_index=index,
            retry_reason=retry_reason,
            request_hash=request_hash,
            request_body_hash=request_body_hash,
            request_blob=request_blob,
            status=(
                AttemptStatus.ABANDONED
                if abandoned is not None
                else AttemptStatus.FAILED
                if failure is not None
                else AttemptStatus.SUCCEEDED
            ),
            failure_kind=kind,
            failure_detail=None if detail is None else _one_line(self._credential.redact(detail)),
            http_status=status,
            response_hash=response_hash,
            response_blob=response_blob,
            response_bytes=stored_bytes,
            response_complete=complete,
            redacted=request_redacted or response_redacted,
            finish_reason=None if judgement is None else judgement.finish_reason,
            model_version=None if response is None else response.model_version,
            response_id=None if response is None else response.response_id,
            usage=usage,
            latency_ms=round(latency_ms, 3),
            price=settings.price,
            cost_usd=estimate_cost(settings.price, usage),
        )
        _log.debug(
            "provider.attempt",
            provider="gemini",
            role=request.role.value,
            cell_id=request.cell_id,
            attempt_index=index,
            status=record.status.value,
            failure_kind=None if kind is None else kind.value,
            http_status=status,
            latency_ms=record.latency_ms,
        )
        return record
