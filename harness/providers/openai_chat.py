"""The OpenAI-compatible provider: any chat-completions endpoint through the official client.

Serves ``--provider openai --model NAME``: OpenAI itself, vLLM, the llama.cpp server, Ollama, a
LiteLLM proxy. Each request becomes one ``POST {base}/chat/completions`` with the frozen
settings of the study (the generation config's temperature, the role's output budget and
timeouts; the model named on the command line), the request's seed, JSON output constrained by
``response_format`` (``json_schema``, not strict: endpoints differ in the subset they enforce),
and client retries off (``max_retries=0``: the client would otherwise retry 408/409/429/5xx and
connection errors by itself). The reply is judged by our own code either way: finish reason
``stop``, non-empty content, JSON, valid against the response
schema (``json_schema.validate_response``).

Retry rule and concurrency are Gemini's (``gemini.py``): exactly one identical retry, only after
a transport failure before any response byte; the sync client runs on a worker thread under
``trio.fail_after(deadline_s)`` and an abandoned call is audited as outcome unknown.

Credential: the key travels only in the ``Authorization`` header, which the capturing transport
never records; every stored byte string and failure message passes ``Credential.redact``.
``--no-credential`` (local servers) sends no ``Authorization`` header at all. Ambient
``OPENAI_*`` variables are removed before the client is built; the base URL and key are always
passed explicitly, so the client never falls back to them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import msgspec
import openai
import trio
from openai.types.chat import ChatCompletion

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.json_schema import validate_response
from harness.log import get_logger
from harness.providers._capture import Capture, CapturingTransport, bind, unbind
from harness.providers.audit import AttemptIntent, AttemptRecord, Audit, Usage, estimate_cost
from harness.providers.config import GenerationConfig, PriceTable, RoleLimits, config_digest
from harness.providers.credentials import Credential, scrub_ambient
from harness.providers.endpoint import check_base_url
from harness.providers.kinds import (
    PRE_OUTPUT_FAILURES,
    AttemptStatus,
    FailureKind,
    ProviderName,
    Role,
)
from harness.providers.protocol import ProviderRequest, ProviderResult

__all__ = ["OpenAIProvider", "chat_price", "chat_request_body"]

PREFLIGHT_CELL: Final = "preflight"
PREFLIGHT_PROMPT: Final = "preflight.model-metadata.v1"
_DETAIL_MAX: Final = 500
_NOTHING_RECEIVED: Final = "Server disconnected without sending a response"
# The client refuses to start without some key; with --no-credential this value is never sent
# (the Authorization header is removed from every request, see ``_NoAuthClient``).
_NO_KEY: Final = "no-credential"
_ROLE: Final = {"system": "system", "user": "user", "model": "assistant"}

_log = get_logger("harness.providers")


def chat_price(model: str) -> PriceTable:
    """The price table of an OpenAI-compatible model: none is known, so costs show as 0."""
    return PriceTable(
        model=model,
        currency="USD",
        input_per_million=0.0,
        output_per_million=0.0,
        source=(
            "no price table for OpenAI-compatible endpoints: token counts are recorded, "
            "cost is not estimated (shown as 0)"
        ),
    )


def chat_request_body(request: ProviderRequest, model: str) -> dict[str, Any]:
    """The chat-completions arguments of ``request`` (the JSON body the client sends)."""
    settings = request.config.gemini
    limits: RoleLimits = settings.planner if request.role is Role.PLANNER else settings.critic
    return {
        "model": model,
        "messages": [{"role": _ROLE[m.role], "content": m.text} for m in request.messages],
        "temperature": settings.temperature,
        "seed": request.seed,
        "n": 1,
        "max_tokens": limits.max_output_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": request.prompt_id.replace(".", "_"),
                "schema": request.response_schema,
                "strict": False,
            },
        },
    }


@dataclass(frozen=True)
class _Outcome:
    response: ChatCompletion | None
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


def _transport_kind(error: BaseException, capture: Capture) -> FailureKind:
    if capture.response_started:
        return FailureKind.PARTIAL_RESPONSE
    simple: tuple[tuple[type[BaseException], FailureKind], ...] = (
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
            return kind
    if isinstance(error, httpx2.RemoteProtocolError) and str(error).startswith(_NOTHING_RECEIVED):
        return FailureKind.DISCONNECTED_BEFORE_RESPONSE
    return FailureKind.TRANSPORT_ERROR


def _classify(error: Exception, capture: Capture) -> tuple[FailureKind, str]:
    """Map an exception raised by the client call to a failure kind and a detail line."""
    if isinstance(error, openai.APIStatusError):
        # The provider's own words: the body's error message (the client prefixes its own).
        body = error.body if isinstance(error.body, dict) else {}
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        said = inner.get("message") if isinstance(inner, dict) else None
        detail = f"HTTP {error.status_code}: {said if isinstance(said, str) else error.message}"
        code = error.status_code
        if code == 429:
            return FailureKind.RATE_LIMITED, detail
        if code in (401, 403):
            return FailureKind.AUTHENTICATION_FAILED, detail
        if code == 404:
            return FailureKind.NOT_FOUND, detail
        if 400 <= code < 500:
            return FailureKind.HTTP_CLIENT_ERROR, detail
        if 500 <= code < 600:
            return FailureKind.HTTP_SERVER_ERROR, detail
        return FailureKind.HTTP_UNEXPECTED_STATUS, detail
    if isinstance(error, openai.APIConnectionError):
        # The client wraps the transport's exception; its cause says how far the request got.
        cause = error.__cause__ if error.__cause__ is not None else error
        return _transport_kind(cause, capture), f"{type(cause).__name__}: {cause}"
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, httpx2.TransportError):
        return _transport_kind(error, capture), detail
    if isinstance(error, (openai.APIResponseValidationError, ValueError)):
        return FailureKind.MALFORMED_RESPONSE, detail
    return FailureKind.CLIENT_ERROR, detail


def _judge(response: ChatCompletion, schema: dict[str, Any]) -> _Judgement:
    """Judge a 200 reply: usable output, or why not."""
    if not response.choices:
        return _Judgement(None, FailureKind.NO_CANDIDATES, "the reply has no choices", None)
    choice = response.choices[0]
    # Typed as never null, but compatible servers do send null: the client does not validate.
    raw: object = choice.finish_reason
    finish = None if raw is None else str(raw)
    if finish != "stop":
        if finish == "length":
            kind = FailureKind.MAX_TOKENS
        elif finish == "content_filter":
            kind = FailureKind.BLOCKED
        else:
            kind = FailureKind.UNEXPECTED_FINISH
        return _Judgement(None, kind, f"finish reason {finish}", finish)
    text = choice.message.content or ""
    if not text.strip():
        refusal = choice.message.refusal
        if refusal:
            return _Judgement(None, FailureKind.BLOCKED, f"refusal: {refusal}", finish)
        return _Judgement(None, FailureKind.EMPTY_OUTPUT, "the reply has no content", finish)
    try:
        value = msgspec.json.decode(text.encode("utf-8"))
    except msgspec.DecodeError as e:
        return _Judgement(None, FailureKind.OUTPUT_NOT_JSON, f"output is not JSON: {e}", finish)
    findings = validate_response(value, schema)
    if findings:
        return _Judgement(None, FailureKind.SCHEMA_MISMATCH, "; ".join(findings[:5]), finish)
    return _Judgement(value, None, None, finish)


def _usage(response: ChatCompletion | None) -> Usage:
    meta = None if response is None else response.usage
    if meta is None:
        return Usage(prompt_tokens=None, output_tokens=None, thought_tokens=None)
    details = meta.completion_tokens_details
    thoughts = None if details is None else details.reasoning_tokens
    output = meta.completion_tokens
    if thoughts is not None and output is not None:
        output = max(output - thoughts, 0)  # reasoning tokens are counted inside completion
    return Usage(prompt_tokens=meta.prompt_tokens, output_tokens=output, thought_tokens=thoughts)


class _NoAuthTransport(httpx2.BaseTransport):
    """Removes the ``Authorization`` header (``--no-credential``: nothing to send)."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` without an Authorization header."""
        request.headers.pop("Authorization", None)
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()


class OpenAIProvider:
    """Answers requests with a model behind an OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self,
        credential: Credential | None,
        *,
        model: str,
        base_url: str,
        environ: MutableMapping[str, str] | None = None,
    ) -> None:
        """Build the provider; removes ambient ``OPENAI_*`` (and Google) variables first.

        Args:
            credential: the key from an explicitly named source, or None (``--no-credential``).
            model: the model name the endpoint serves.
            base_url: the endpoint base, e.g. ``https://api.openai.com/v1``.
            environ: the environment to scrub (default: the process environment).

        Raises:
            ProviderSelectionError: when ``base_url`` is unusable.
        """
        self._credential = credential
        self._model = model
        self._base_url = check_base_url(base_url)
        self._clients: dict[int, tuple[openai.OpenAI, httpx2.Client]] = {}
        scrub_ambient(environ)

    @property
    def name(self) -> ProviderName:
        """``openai``."""
        return ProviderName.OPENAI

    @property
    def base_url(self) -> str:
        """The endpoint every call goes to."""
        return self._base_url

    def _client(self, timeout_ms: int) -> openai.OpenAI:
        if timeout_ms not in self._clients:
            transport: httpx2.BaseTransport = httpx2.HTTPTransport(trust_env=False, retries=0)
            if self._credential is None:
                transport = _NoAuthTransport(transport)
            http = httpx2.Client(
                transport=CapturingTransport(transport),
                trust_env=False,
                follow_redirects=False,
            )
            client = openai.OpenAI(
                api_key=_NO_KEY if self._credential is None else self._credential.reveal(),
                organization=None,
                project=None,
                base_url=self._base_url,
                timeout=timeout_ms / 1000.0,
                max_retries=0,
                http_client=http,
            )
            self._clients[timeout_ms] = (client, http)
        return self._clients[timeout_ms][0]

    def close(self) -> None:
        """Close the HTTP connections."""
        for _, http in self._clients.values():
            http.close()
        self._clients.clear()

    def _redact(self, text: str) -> str:
        return text if self._credential is None else self._credential.redact(text)

    def _store(
        self, audit: Audit, data: bytes | None, domain: Domain
    ) -> tuple[str | None, str | None, int, bool]:
        if data is None:
            return None, None, 0, False
        clean, redacted = (
            (data, False) if self._credential is None else self._credential.redact_bytes(data)
        )
        return audit.blobs.put(clean), digest_bytes(domain, clean), len(clean), redacted

    def probe(self, config: GenerationConfig, audit: Audit) -> AttemptRecord:
        """Preflight: one request that spends no tokens, ``GET {base}/models/{model}``.

        Journaled in ``audit`` with role ``preflight``; never raises for a failed request.
        """
        settings = config.gemini
        client = self._client(settings.timeout_ms)
        described = {"method": "GET", "model": self._model, "base_url": self._base_url}
        request_hash = digest_bytes(Domain.PROVIDER_REQUEST, canonical_bytes(described))
        cfg_digest = config_digest(config)
        audit.journal.begin(
            AttemptIntent(
                provider=ProviderName.OPENAI,
                simulated=False,
                model=self._model,
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
            client.models.retrieve(self._model)
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
        usage = Usage(prompt_tokens=0, output_tokens=0, thought_tokens=0)
        price = chat_price(self._model)
        record = AttemptRecord(
            provider=ProviderName.OPENAI,
            simulated=False,
            model=self._model,
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
            failure_detail=None if detail is None else _one_line(self._redact(detail)),
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
            price=price,
            cost_usd=estimate_cost(price, usage),
        )
        audit.journal.end(record)
        return record

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Answer ``request``: one attempt, plus one identical retry after a pre-output failure.

        Never raises for a failed call. Re-raises trio cancellation after journaling the
        attempt in flight as abandoned.
        """
        request_hash = request.digest()
        cfg_digest = config_digest(request.config)
        body = chat_request_body(request, self._model)
        records: list[AttemptRecord] = []
        output: dict[str, Any] | None = None
        retry_reason: FailureKind | None = None
        for index in range(2):
            record, output = await self._attempt(
                request, audit, body, index, retry_reason, request_hash, cfg_digest
            )
            records.append(record)
            if index == 0 and record.failure_kind in PRE_OUTPUT_FAILURES:
                retry_reason = record.failure_kind
                continue
            break
        return ProviderResult(
            provider=ProviderName.OPENAI,
            output=output,
            failure=records[-1].failure_kind,
            attempts=tuple(records),
        )

    def _call(self, client: openai.OpenAI, body: dict[str, Any], capture: Capture) -> _Outcome:
        bind(capture)
        try:
            response = client.chat.completions.create(**body)
            return _Outcome(response=response, error=None)
        except Exception as e:  # noqa: BLE001 - every failure of a call is a recorded result
            return _Outcome(response=None, error=e)
        finally:
            unbind()

    async def _attempt(
        self,
        request: ProviderRequest,
        audit: Audit,
        body: dict[str, Any],
        index: int,
        retry_reason: FailureKind | None,
        request_hash: str,
        cfg_digest: str,
    ) -> tuple[AttemptRecord, dict[str, Any] | None]:
        settings = request.config.gemini
        client = self._client(settings.timeout_ms)
        audit.journal.begin(
            AttemptIntent(
                provider=ProviderName.OPENAI,
                simulated=False,
                model=self._model,
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
                    functools.partial(self._call, client, body, capture),
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
        response: ChatCompletion | None,
        abandoned: FailureKind | None,
        failure: FailureKind | None,
        detail: str | None,
        judgement: _Judgement | None,
    ) -> AttemptRecord:
        """Store the attempt's blobs and build its audit row."""
        request_blob, request_body_hash, _, request_redacted = self._store(
            audit, capture.request_body, Domain.PROVIDER_REQUEST
        )
        if abandoned is not None:
            body, complete, status = None, False, None
        elif capture.response_complete:
            body, complete, status = capture.response_body, True, capture.status
        else:
            body, complete, status = capture.partial_body or None, False, capture.status
        response_blob, response_hash, stored_bytes, response_redacted = self._store(
            audit, body, Domain.PROVIDER_RESPONSE
        )
        usage = _usage(response)
        price = chat_price(self._model)
        kind = abandoned if abandoned is not None else failure
        record = AttemptRecord(
            provider=ProviderName.OPENAI,
            simulated=False,
            model=self._model,
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
            failure_detail=None if detail is None else _one_line(self._redact(detail)),
            http_status=status,
            response_hash=response_hash,
            response_blob=response_blob,
            response_bytes=stored_bytes,
            response_complete=complete,
            redacted=request_redacted or response_redacted,
            finish_reason=None if judgement is None else judgement.finish_reason,
            model_version=None if response is None else response.model,
            response_id=None if response is None else response.id,
            usage=usage,
            latency_ms=round(latency_ms, 3),
            price=price,
            cost_usd=estimate_cost(price, usage),
        )
        _log.debug(
            "provider.attempt",
            provider="openai",
            role=request.role.value,
            cell_id=request.cell_id,
            attempt_index=index,
            status=record.status.value,
            failure_kind=None if kind is None else kind.value,
            http_status=status,
            latency_ms=record.latency_ms,
        )
        return record
