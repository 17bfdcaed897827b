"""The attempt machine every networked provider shares (Gemini, OpenAI-compatible endpoints).

What is the same for each: one attempt waits for one of the process's provider call slots
(``harness.capacity``; none within the deadline: ``local_capacity``, never sent) and is
journaled as begun (a caller that cancels it meanwhile journals nothing: nothing was sent),
then its blocking client call runs on a worker thread holding that slot
(``trio.to_thread.run_sync(..., abandon_on_cancel=True)``) under ``trio.fail_after(deadline_s)``
- a deadline the capturing transport enforces on the thread too - while the transport records
its wire facts, and it ends as a record: succeeded, failed (a failure kind and a one-line,
redacted detail) or abandoned (the deadline passed, or the caller cancelled; the server-side
outcome is unknown). Exactly one identical retry follows, and only after a transport failure
before any response byte (``PRE_OUTPUT_FAILURES``). Everything stored is redacted first
(``Credential``: every spelling of the key, raw or escaped): request and response bytes, the
failure detail, the fields the endpoint writes (model version, response id, finish reason) and
the judged output the study keeps. The preflight probe (one request that spends no tokens) is
journaled the same way.

What differs lives in the provider: the client and its call, how an exception maps to a
failure kind, how a 200 reply is judged, its usage, model and price (the hooks of
``NetworkProvider``).
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, cast

import httpx2
import msgspec
import trio

from harness import capacity
from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.json_schema import validate_response
from harness.log import get_logger
from harness.providers._capture import AttemptDeadlineError, Capture, bind, unbind
from harness.providers.attempts import (
    AttemptIntent,
    AttemptRecord,
    Audit,
    Usage,
    detail_line,
    estimate_cost,
    schema_detail,
)
from harness.providers.config import GenerationConfig, PriceTable, config_digest
from harness.providers.credentials import Credential, KeyScan
from harness.providers.kinds import (
    PRE_OUTPUT_FAILURES,
    AttemptStatus,
    FailureKind,
    ProviderName,
    Role,
)
from harness.providers.protocol import ProviderRequest, ProviderResult

__all__ = [
    "PREFLIGHT_CELL",
    "PREFLIGHT_PROMPT",
    "Judgement",
    "NetworkProvider",
    "judge_text",
    "transport_kind",
]

PREFLIGHT_CELL: Final = "preflight"
PREFLIGHT_PROMPT: Final = "preflight.model-metadata.v1"
# httpcore's words for "the peer closed the connection and not one response byte arrived".
_NOTHING_RECEIVED: Final = "Server disconnected without sending a response"
_TRANSPORT: Final[tuple[tuple[type[BaseException], FailureKind], ...]] = (
    (httpx2.ConnectTimeout, FailureKind.CONNECT_TIMEOUT),
    (httpx2.ConnectError, FailureKind.CONNECT_ERROR),
    (httpx2.PoolTimeout, FailureKind.POOL_TIMEOUT),
    (httpx2.WriteTimeout, FailureKind.WRITE_TIMEOUT),
    (httpx2.WriteError, FailureKind.WRITE_ERROR),
    (httpx2.ReadTimeout, FailureKind.READ_TIMEOUT),
    (httpx2.ReadError, FailureKind.CONNECTION_RESET),
)

_log = get_logger("harness.providers")

R = TypeVar("R")


def transport_kind(error: BaseException, capture: Capture) -> FailureKind:
    """The failure kind of a transport exception, by how far the attempt got on the wire."""
    if capture.response_started:
        # Status and headers arrived, the body did not finish: output may exist.
        return FailureKind.PARTIAL_RESPONSE
    for cls, kind in _TRANSPORT:
        if isinstance(error, cls):
            return kind
    if isinstance(error, httpx2.RemoteProtocolError) and str(error).startswith(_NOTHING_RECEIVED):
        return FailureKind.DISCONNECTED_BEFORE_RESPONSE
    # Anything else (e.g. a garbled status line) means bytes came back: not retry-safe.
    return FailureKind.TRANSPORT_ERROR


@dataclass(frozen=True)
class Judgement:
    """A judged 200 reply: usable ``output``, or the failure and why."""

    output: dict[str, Any] | None
    failure: FailureKind | None
    detail: str | None
    finish_reason: str | None


def judge_text(text: str, schema: dict[str, Any], finish: str | None) -> Judgement:
    """Judge a reply's text that finished normally: JSON, valid against ``schema``."""
    try:
        value = msgspec.json.decode(text.encode("utf-8"))
    except msgspec.DecodeError as e:
        return Judgement(None, FailureKind.OUTPUT_NOT_JSON, f"output is not JSON: {e}", finish)
    findings = validate_response(value, schema)
    if findings:
        return Judgement(None, FailureKind.SCHEMA_MISMATCH, schema_detail(findings), finish)
    return Judgement(value, None, None, finish)


@dataclass(frozen=True)
class _Outcome(Generic[R]):
    response: R | None
    error: Exception | None


def _run(call: Callable[[], R], capture: Capture) -> _Outcome[R]:
    """Run one blocking client call on a worker thread, recording its wire facts."""
    bind(capture)
    try:
        return _Outcome(response=call(), error=None)
    except Exception as e:  # noqa: BLE001 - every failure of a call is a recorded result
        return _Outcome(response=None, error=e)
    finally:
        unbind()


def _past_deadline(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps: the clients wrap transport errors) is the
    transport's ``AttemptDeadlineError``."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, AttemptDeadlineError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _Slot:
    """One provider call slot (``harness.capacity``), reserved before the attempt's deadline
    starts, then handed to ``trio.to_thread.run_sync`` as its limiter: trio releases it when the
    worker thread ends, even after the call was abandoned at its deadline."""

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self._limiter = limiter
        self.held = False
        self._handed = False

    @property
    def total(self) -> int:
        """How many slots the process has."""
        return int(self._limiter.total_tokens)

    async def reserve(self) -> None:
        """Wait for a free slot."""
        await self._limiter.acquire_on_behalf_of(self)
        self.held = True

    def handed(self) -> trio.CapacityLimiter:
        """This reserved slot, shaped as the limiter ``to_thread.run_sync`` takes."""
        return cast("trio.CapacityLimiter", self)

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        """Called by trio before it starts the thread: the slot is already held."""
        self._handed = True

    def release_on_behalf_of(self, borrower: object) -> None:
        """Called by trio when the thread has ended (or could not start)."""
        self._release()

    def release_unless_handed(self) -> None:
        """Free the slot if no thread ever took it (cancelled before the call started)."""
        if not self._handed:
            self._release()

    def _release(self) -> None:
        if self.held:
            self.held = False
            self._limiter.release_on_behalf_of(self)


class NetworkProvider(ABC, Generic[R]):
    """Base of the providers that call a model over HTTP; ``R`` is their client's reply type."""

    _credential: Credential | None
    _base_url: str
    _clients: dict[Any, tuple[Any, httpx2.Client]]
    given_price: PriceTable | None = None
    """The user's price table for this run (``--price-input``/``--price-output``), which
    replaces the provider's own in every attempt record; None: the provider's own."""

    @property
    @abstractmethod
    def name(self) -> ProviderName:
        """Which provider this is."""

    @property
    def base_url(self) -> str:
        """The endpoint every call goes to."""
        return self._base_url

    def key_scan(self) -> KeyScan | None:
        """The matcher of this provider's key (None: it sends none)."""
        return None if self._credential is None else self._credential.scan()

    def close(self) -> None:
        """Close the HTTP connections (calls still running on abandoned threads may fail)."""
        for _, http in self._clients.values():
            http.close()
        self._clients.clear()

    # What each provider supplies.

    @abstractmethod
    def _model(self, config: GenerationConfig) -> str:
        """The model every call of ``config`` names."""

    @abstractmethod
    def _price(self, config: GenerationConfig) -> PriceTable:
        """The provider's own price table for ``config`` (``PriceTable.unpriced`` when the
        endpoint's prices are not known)."""

    def _attempt_price(self, config: GenerationConfig) -> PriceTable:
        """The price table the attempts' costs are estimated with: the user's, else the
        provider's own."""
        return self.given_price if self.given_price is not None else self._price(config)

    @abstractmethod
    def _prepare(self, request: ProviderRequest) -> Callable[[], R]:
        """The blocking client call that answers ``request`` (the same for both attempts)."""

    @abstractmethod
    def _probe_call(self, config: GenerationConfig) -> tuple[dict[str, Any], Callable[[], object]]:
        """The preflight request, described (its hash is the request hash), and its call."""

    @abstractmethod
    def _classify(self, error: Exception, capture: Capture) -> tuple[FailureKind, str]:
        """Map an exception raised by the client call to a failure kind and a detail line."""

    @abstractmethod
    def _judge(self, response: R, schema: dict[str, Any]) -> Judgement:
        """Judge a 200 reply: usable output, or why not."""

    @abstractmethod
    def _usage(self, response: R | None) -> Usage:
        """The reply's token counts (all None without a reply)."""

    @abstractmethod
    def _served(self, response: R) -> tuple[str | None, str | None]:
        """The reply's model version and response id."""

    # The machine.

    def _failure(self, error: Exception, capture: Capture) -> tuple[FailureKind, str]:
        """The failure of a call that raised: a reply over the bound first, whoever wrapped it."""
        if capture.too_large is not None:
            return FailureKind.RESPONSE_TOO_LARGE, capture.too_large
        return self._classify(error, capture)

    def _redact(self, text: str) -> str:
        return text if self._credential is None else self._credential.redact(text)

    def _redact_field(self, value: str | None) -> str | None:
        return None if value is None else self._redact(value)

    def _redact_output(self, output: dict[str, Any] | None) -> dict[str, Any] | None:
        """The judged output with the key masked in every string: what the study keeps of a
        reply (actions, messages, answers) never carries it."""
        if output is None or self._credential is None:
            return output
        clean, _ = self._credential.redact_value(output)
        result: dict[str, Any] = clean
        return result

    def _store(
        self, audit: Audit, data: bytes | None, domain: Domain
    ) -> tuple[str | None, str | None, int, bool]:
        """Redact and store ``data``; return (blob address, hash, stored length, redacted?)."""
        if data is None:
            return None, None, 0, False
        clean, redacted = (
            (data, False) if self._credential is None else self._credential.redact_bytes(data)
        )
        return audit.blobs.put(clean), digest_bytes(domain, clean), len(clean), redacted

    def probe(self, config: GenerationConfig, audit: Audit) -> AttemptRecord:
        """Preflight: one authenticated request that spends no tokens (the model's metadata).

        It goes through the same client, transport and credential as every study call, and
        is journaled in ``audit`` like any other attempt, with role ``preflight``; its failure
        kind says why the provider is unusable (a rejected key, a missing model, no
        connection) and its detail carries the provider's own reason. Never raises for a
        failed request.
        """
        described, call = self._probe_call(config)
        model = self._model(config)
        request_hash = digest_bytes(Domain.PROVIDER_REQUEST, canonical_bytes(described))
        intent = AttemptIntent(
            provider=self.name,
            simulated=False,
            model=model,
            role=Role.PREFLIGHT,
            cell_id=PREFLIGHT_CELL,
            prompt_id=PREFLIGHT_PROMPT,
            attempt_index=0,
            retry_reason=None,
            request_hash=request_hash,
            config_digest=config_digest(config),
        )
        audit.journal.begin(intent)
        capture = Capture(deadline=time.monotonic() + config.gemini.deadline_s)
        started = time.perf_counter()
        bind(capture)
        try:
            call()
            failure, detail = None, None
        except Exception as e:  # noqa: BLE001 - every failure of the probe is its verdict
            failure, detail = self._failure(e, capture)
        finally:
            unbind()
        latency_ms = (time.perf_counter() - started) * 1000.0
        body = capture.response_body if capture.response_complete else None
        response_blob, response_hash, stored, redacted = self._store(
            audit, body, Domain.PROVIDER_RESPONSE
        )
        # A metadata request is not billed and counts no tokens.
        usage = Usage(prompt_tokens=0, output_tokens=0, thought_tokens=0)
        price = self._attempt_price(config)
        record = intent.ended(
            base_url=self._base_url,
            request_body_hash=None,
            request_blob=None,
            status=AttemptStatus.FAILED if failure is not None else AttemptStatus.SUCCEEDED,
            failure_kind=failure,
            failure_detail=None if detail is None else detail_line(self._redact(detail)),
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
        _log.debug(
            "provider.preflight",
            provider=self.name.value,
            status=record.status.value,
            failure_kind=None if failure is None else failure.value,
            http_status=capture.status,
            latency_ms=record.latency_ms,
        )
        return record

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Answer ``request``: one attempt, plus one identical retry after a pre-output failure.

        Never raises for a failed call. Re-raises trio cancellation after journaling the
        attempt in flight as abandoned.
        """
        model = self._model(request.config)
        call = self._prepare(request)
        records: list[AttemptRecord] = []
        output: dict[str, Any] | None = None
        retry_reason: FailureKind | None = None
        for index in range(2):
            intent = AttemptIntent.of(
                request,
                provider=self.name,
                simulated=False,
                model=model,
                attempt_index=index,
                retry_reason=retry_reason,
            )
            record, output = await self._attempt(request, audit, call, intent)
            records.append(record)
            if index == 0 and record.failure_kind in PRE_OUTPUT_FAILURES:
                retry_reason = record.failure_kind
                continue
            break
        return ProviderResult(
            provider=self.name,
            output=output,
            failure=records[-1].failure_kind,
            attempts=tuple(records),
        )

    async def _attempt(
        self,
        request: ProviderRequest,
        audit: Audit,
        call: Callable[[], R],
        intent: AttemptIntent,
    ) -> tuple[AttemptRecord, dict[str, Any] | None]:
        deadline_s = request.config.gemini.deadline_s
        record_fields = functools.partial(
            self._record, config=request.config, audit=audit, intent=intent
        )
        capture = Capture()
        started = time.perf_counter()
        outcome: _Outcome[R] | None = None
        slot = _Slot(capacity.current().providers)
        try:
            with trio.move_on_after(deadline_s):
                await slot.reserve()
            # Cancelled while waiting for a slot (waiting yields to the other cells, one of
            # which may stop the run): nothing was sent, so nothing is journaled. Nothing
            # below yields before the worker thread starts, so every attempt journaled as
            # begun is sent, or said never to be (``local_capacity``).
            await trio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            slot.release_unless_handed()
            raise
        audit.journal.begin(intent)
        try:
            if not slot.held:
                record = record_fields(
                    capture=capture,
                    latency_ms=(time.perf_counter() - started) * 1000.0,
                    response=None,
                    abandoned=None,
                    failure=FailureKind.LOCAL_CAPACITY,
                    detail=(
                        f"not sent: all {slot.total} provider call slots of this process stayed "
                        f"busy for the {deadline_s} s deadline (calls given up at their "
                        "deadline still running); a local failure, not the model's"
                    ),
                    judgement=None,
                )
                audit.journal.end(record)
                return record, None
            # The deadline runs from here: the worker thread holds it too (the transport cuts
            # every timeout to the time left), so an abandoned call frees its slot at the
            # deadline, not when the endpoint lets go.
            capture.deadline = time.monotonic() + deadline_s
            started = time.perf_counter()  # latency is the call's, not the wait for a slot
            with trio.fail_after(deadline_s):
                outcome = await trio.to_thread.run_sync(
                    functools.partial(_run, call, capture),
                    abandon_on_cancel=True,
                    limiter=slot.handed(),
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
        finally:
            slot.release_unless_handed()
        latency_ms = (time.perf_counter() - started) * 1000.0
        if outcome is not None and outcome.error is not None and _past_deadline(outcome.error):
            # The thread's own deadline check ended the call a moment before trio's did.
            outcome = None
        if outcome is None:
            record = record_fields(
                capture=capture,
                latency_ms=latency_ms,
                response=None,
                abandoned=FailureKind.DEADLINE_EXCEEDED,
                failure=None,
                detail=(
                    f"no answer within the {deadline_s} s deadline; the call was "
                    "abandoned and its server-side outcome is unknown"
                ),
                judgement=None,
            )
            audit.journal.end(record)
            return record, None
        judgement: Judgement | None = None
        failure: FailureKind | None
        detail: str | None
        if outcome.error is not None:
            failure, detail = self._failure(outcome.error, capture)
        else:
            assert outcome.response is not None
            judgement = self._judge(outcome.response, request.response_schema)
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
        return record, None if judgement is None else self._redact_output(judgement.output)

    def _record(
        self,
        *,
        config: GenerationConfig,
        audit: Audit,
        intent: AttemptIntent,
        capture: Capture,
        latency_ms: float,
        response: R | None,
        abandoned: FailureKind | None,
        failure: FailureKind | None,
        detail: str | None,
        judgement: Judgement | None,
    ) -> AttemptRecord:
        """Store the attempt's blobs and build its audit row."""
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
        usage = self._usage(response)
        price = self._attempt_price(config)
        # The endpoint writes these too (a gateway can echo anything): stored only redacted.
        served = (None, None) if response is None else self._served(response)
        finish = None if judgement is None else judgement.finish_reason
        model_version, response_id, finish = (self._redact_field(x) for x in (*served, finish))
        fields_redacted = (model_version, response_id, finish) != (*served, finish)
        kind = abandoned if abandoned is not None else failure
        record = intent.ended(
            base_url=self._base_url,
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
            failure_detail=None if detail is None else detail_line(self._redact(detail)),
            http_status=status,
            response_hash=response_hash,
            response_blob=response_blob,
            response_bytes=stored_bytes,
            response_complete=complete,
            redacted=request_redacted or response_redacted or fields_redacted,
            finish_reason=finish,
            model_version=model_version,
            response_id=response_id,
            usage=usage,
            latency_ms=round(latency_ms, 3),
            price=price,
            cost_usd=estimate_cost(price, usage),
        )
        _log.debug(
            "provider.attempt",
            provider=self.name.value,
            role=intent.role.value,
            cell_id=intent.cell_id,
            attempt_index=intent.attempt_index,
            status=record.status.value,
            failure_kind=None if kind is None else kind.value,
            http_status=status,
            latency_ms=record.latency_ms,
        )
        return record
