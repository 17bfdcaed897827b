"""The Gemini provider: the real google-genai client against a fake endpoint on 127.0.0.1.

The Gemini service itself cannot be reached here (no network); the fake server in
``providers_fake_gemini`` speaks its REST protocol and plays scripted failures. Nothing in the
SDK is mocked: requests go through google-genai, httpx2 and real loopback sockets.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec
import pytest
import structlog
import trio
from providers_fake_gemini import (
    DEFAULT_USAGE,
    Answer,
    FakeGemini,
    blocked,
    body,
    disconnect_before_response,
    echo_credential,
    no_candidates,
    output,
    partial_body,
    reset_after_request,
    slow,
    text,
)

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.providers import (
    AttemptIntent,
    AttemptRecord,
    AttemptStatus,
    Credential,
    CredentialSource,
    FailureKind,
    GenerationConfig,
    MemoryBlobSink,
    MemoryJournal,
    ProviderRequest,
    ProviderResult,
    default_generation_config,
    memory_audit,
)
from harness.providers.config import PriceTable
from harness.providers.critic import TaskBrief, TraceStep, critic_request, critic_view
from harness.providers.gemini import GeminiProvider

KEY = "AIzaFAKE-test-key-0123456789abcdefghij"
GOOD = {"decision": "complete", "reason": "The answer addresses the question."}


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def _config(*, timeout_ms: int = 5_000, deadline_s: float = 20.0) -> GenerationConfig:
    base = default_generation_config()
    gemini = msgspec.structs.replace(base.gemini, timeout_ms=timeout_ms, deadline_s=deadline_s)
    return msgspec.structs.replace(base, gemini=gemini)


def _request(
    config: GenerationConfig | None = None, *, full_trace: bool = False
) -> ProviderRequest:
    task = TaskBrief(task_id="t-07", question="Total units at site A?", required_slots=("total",))
    trace = (
        TraceStep(index=0, tool="metric_lookup", arguments={"site": "A"}, status="ok", response=3),
    )
    view = critic_view(task, {"total": 3}, trace, full_trace=full_trace)
    return critic_request(
        view,
        cell_id="cell-0001",
        seed=None if full_trace else 2,
        config=config or _config(),
    )


@dataclass
class Run:
    result: ProviderResult
    journal: MemoryJournal
    blobs: MemoryBlobSink


def _run(
    base_url: str, request: ProviderRequest | None = None, *, price: PriceTable | None = None
) -> Run:
    audit, journal, blobs = memory_audit()
    provider = GeminiProvider(
        Credential(KEY, CredentialSource(kind="env", name="K")), base_url=base_url
    )
    provider.given_price = price

    async def go() -> ProviderResult:
        return await provider.generate(request or _request(), audit)

    try:
        result = trio.run(go)
    finally:
        provider.close()
    return Run(result, journal, blobs)


def _check_audit(run: Run) -> None:
    """Every attempt is journaled begin-then-end and its blobs are stored and hash-consistent."""
    attempts = run.result.attempts
    assert run.journal.open_attempts == []
    assert len(run.journal.entries) == 2 * len(attempts)
    for i, record in enumerate(attempts):
        intent = run.journal.entries[2 * i]
        assert isinstance(intent, AttemptIntent)
        assert run.journal.entries[2 * i + 1] == record
        assert (intent.attempt_index, intent.request_hash) == (i, record.request_hash)
        assert record.attempt_index == i
        assert record.provider == "gemini"
        assert record.simulated is False
        assert record.model == "gemini-2.5-flash"
        assert record.role == "critic"
        assert record.cell_id == "cell-0001"
        assert record.latency_ms >= 0
        if record.response_blob is not None:
            stored = run.blobs.get(record.response_blob)
            assert record.response_hash == digest_bytes(Domain.PROVIDER_RESPONSE, stored)
            assert record.response_bytes == len(stored)
        if record.request_blob is not None:
            stored = run.blobs.get(record.request_blob)
            assert record.request_body_hash == digest_bytes(Domain.PROVIDER_REQUEST, stored)
    assert len({r.request_hash for r in attempts}) == 1


# name, script, final failure (None: success), attempts, http status of the last attempt
CASES: list[tuple[str, list[Answer], FailureKind | None, int, int | None]] = [
    ("ok", [output(GOOD)], None, 1, 200),
    (
        "rate_limited_429",
        [
            body(
                429, b'{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}'
            )
        ],
        FailureKind.RATE_LIMITED,
        1,
        429,
    ),
    (
        "server_error_500",
        [body(500, b'{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}')],
        FailureKind.HTTP_SERVER_ERROR,
        1,
        500,
    ),
    (
        "html_error_page_502",
        [body(502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")],
        FailureKind.HTTP_SERVER_ERROR,
        1,
        502,
    ),
    (
        "client_error_400",
        [body(400, b'{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}')],
        FailureKind.HTTP_CLIENT_ERROR,
        1,
        400,
    ),
    (
        "malformed_json_200",
        [body(200, b'{"candidates": [{"content": ')],
        FailureKind.MALFORMED_RESPONSE,
        1,
        200,
    ),
    (
        "truncated_json_max_tokens",
        [text('{"decision": "complete", "rea', finish_reason="MAX_TOKENS")],
        FailureKind.MAX_TOKENS,
        1,
        200,
    ),
    (
        "permission_denied_403",
        [body(403, b'{"error": {"code": 403, "message": "no", "status": "PERMISSION_DENIED"}}')],
        FailureKind.AUTHENTICATION_FAILED,
        1,
        403,
    ),
    (
        "unauthenticated_401",
        [body(401, b'{"error": {"code": 401, "message": "no", "status": "UNAUTHENTICATED"}}')],
        FailureKind.AUTHENTICATION_FAILED,
        1,
        401,
    ),
    (
        # How Gemini answers a wrong key: 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
        "api_key_invalid_400",
        [
            body(
                400,
                b'{"error": {"code": 400, "message": "API key not valid. Please pass a valid API '
                b'key.", "status": "INVALID_ARGUMENT", "details": [{"@type": '
                b'"type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}',
            )
        ],
        FailureKind.AUTHENTICATION_FAILED,
        1,
        400,
    ),
    (
        "model_not_found_404",
        [body(404, b'{"error": {"code": 404, "message": "no model", "status": "NOT_FOUND"}}')],
        FailureKind.NOT_FOUND,
        1,
        404,
    ),
    ("no_candidates", [no_candidates()], FailureKind.NO_CANDIDATES, 1, 200),
    ("prompt_blocked", [blocked("SAFETY")], FailureKind.BLOCKED, 1, 200),
    ("finish_safety", [text(None, finish_reason="SAFETY")], FailureKind.BLOCKED, 1, 200),
    (
        "finish_other",
        [text('{"x": 1}', finish_reason="OTHER")],
        FailureKind.UNEXPECTED_FINISH,
        1,
        200,
    ),
    ("empty_output", [text(None)], FailureKind.EMPTY_OUTPUT, 1, 200),
    (
        "output_not_json",
        [text("Sure! The answer is complete.")],
        FailureKind.OUTPUT_NOT_JSON,
        1,
        200,
    ),
    (
        "schema_mismatch_enum",
        [output({"decision": "approve", "reason": "fine"})],
        FailureKind.SCHEMA_MISMATCH,
        1,
        200,
    ),
    (
        "schema_mismatch_extra_field",
        [output({**GOOD, "confidence": 0.9})],
        FailureKind.SCHEMA_MISMATCH,
        1,
        200,
    ),
    ("reset_after_send", [reset_after_request()], FailureKind.CONNECTION_RESET, 1, None),
    ("partial_body", [partial_body(GOOD)], FailureKind.PARTIAL_RESPONSE, 1, 200),
    ("disconnect_then_ok", [disconnect_before_response(), output(GOOD)], None, 2, 200),
    (
        "disconnect_twice",
        [disconnect_before_response(), disconnect_before_response()],
        FailureKind.DISCONNECTED_BEFORE_RESPONSE,
        2,
        None,
    ),
    (
        "disconnect_then_500",
        [
            disconnect_before_response(),
            body(500, b'{"error": {"code": 500, "message": "x", "status": "INTERNAL"}}'),
        ],
        FailureKind.HTTP_SERVER_ERROR,
        2,
        500,
    ),
]


@pytest.mark.parametrize(
    ("script", "failure", "attempts", "status"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_gemini_scripted_answer_gives_failure_kind_retries_and_audit(
    fake: FakeGemini,
    script: list[Answer],
    failure: FailureKind | None,
    attempts: int,
    status: int | None,
) -> None:
    fake.script(*script)
    run = _run(fake.base_url)
    result = run.result
    assert result.failure == failure
    assert result.ok == (failure is None)
    assert len(result.attempts) == attempts
    assert len(fake.requests) == attempts
    last = result.attempts[-1]
    assert last.failure_kind == failure
    assert last.http_status == status
    assert last.status == (AttemptStatus.SUCCEEDED if failure is None else AttemptStatus.FAILED)
    if failure is None:
        assert result.output == GOOD
    else:
        assert result.output is None
        assert last.failure_detail
    if attempts == 2:
        first = result.attempts[0]
        assert first.failure_kind == FailureKind.DISCONNECTED_BEFORE_RESPONSE
        assert first.retry_reason is None
        assert last.retry_reason == FailureKind.DISCONNECTED_BEFORE_RESPONSE
        # The retry is byte-identical on the wire.
        assert fake.requests[0].body == fake.requests[1].body
        assert first.request_body_hash == last.request_body_hash
    else:
        assert last.retry_reason is None
    # What the audit stored as the request body is what the server received.
    for record, received in zip(result.attempts, fake.requests, strict=True):
        assert record.request_blob is not None
        assert run.blobs.get(record.request_blob) == received.body
    _check_audit(run)


def test_gemini_success_records_tokens_cost_and_raw_response(fake: FakeGemini) -> None:
    fake.script(output(GOOD), output(GOOD))
    # The loopback endpoint is not Google's: no price is known, the cost is unknown (not 0).
    unpriced = _run(fake.base_url).result.attempts[0]
    assert unpriced.price == PriceTable.unpriced(default_generation_config().gemini.model)
    assert unpriced.cost_usd is None
    # With the user's prices (--price-input/--price-output) the attempt is priced by them.
    price = PriceTable.given("gemini-2.5-flash", 0.30, 2.50)
    run = _run(fake.base_url, price=price)
    record = run.result.attempts[0]
    assert record.usage.prompt_tokens == DEFAULT_USAGE["prompt"]
    assert record.usage.output_tokens == DEFAULT_USAGE["output"]
    assert record.usage.thought_tokens == DEFAULT_USAGE["thoughts"]
    assert record.price == price
    billed_out = DEFAULT_USAGE["output"] + DEFAULT_USAGE["thoughts"]
    expected = (DEFAULT_USAGE["prompt"] * 0.30 + billed_out * 2.50) / 1e6
    assert record.cost_usd == pytest.approx(expected)
    assert record.finish_reason == "STOP"
    assert record.model_version == "gemini-2.5-flash-fake"
    assert record.response_complete is True
    assert record.redacted is False
    assert record.base_url == fake.base_url
    # The stored raw response is the exact reply body: enough to replay the scoring offline.
    assert record.response_blob is not None
    stored = msgspec.json.decode(run.blobs.get(record.response_blob))
    assert msgspec.json.decode(stored["candidates"][0]["content"]["parts"][0]["text"]) == GOOD


def test_gemini_partial_body_stores_the_partial_bytes(fake: FakeGemini) -> None:
    fake.script(partial_body(GOOD))
    record = _run(fake.base_url).result.attempts[0]
    assert record.response_complete is False
    assert record.response_bytes > 0


def test_gemini_request_carries_the_frozen_generation_settings(fake: FakeGemini) -> None:
    fake.script(output(GOOD), output(GOOD))
    _run(fake.base_url)
    _run(fake.base_url, _request(full_trace=True))
    core, full = fake.requests
    assert core.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert core.headers["x-goog-api-key"] == KEY  # only the fake's own log sees the header
    settings = default_generation_config().gemini
    generation = core.json()["generationConfig"]
    assert generation["temperature"] == 0.2
    assert generation["seed"] == 2
    assert generation["candidateCount"] == 1
    assert generation["maxOutputTokens"] == settings.critic.max_output_tokens
    assert generation["thinkingConfig"] == {"thinking_budget": settings.critic.thinking_budget}
    assert generation["responseMimeType"] == "application/json"
    assert generation["responseJsonSchema"]["required"] == ["decision", "reason"]
    assert "systemInstruction" in core.json()
    # The full-trace critic runs with the study's fixed seed.
    assert full.json()["generationConfig"]["seed"] == 2705


def test_gemini_slow_reply_past_the_timeout_is_a_read_timeout_not_retried(
    fake: FakeGemini,
) -> None:
    fake.script(slow(3.0, output(GOOD)))
    run = _run(fake.base_url, _request(_config(timeout_ms=300)))
    assert run.result.failure == FailureKind.READ_TIMEOUT
    assert len(run.result.attempts) == 1
    assert len(fake.requests) == 1
    _check_audit(run)


def test_gemini_deadline_abandons_the_call_and_audits_it_as_unknown(fake: FakeGemini) -> None:
    fake.script(slow(3.0, output(GOOD)))
    run = _run(fake.base_url, _request(_config(timeout_ms=10_000, deadline_s=0.3)))
    record = run.result.attempts[0]
    assert run.result.failure == FailureKind.DEADLINE_EXCEEDED
    assert record.status == AttemptStatus.ABANDONED
    assert record.response_blob is None
    assert len(run.result.attempts) == 1
    _check_audit(run)


def test_gemini_cancellation_journals_the_attempt_then_propagates(fake: FakeGemini) -> None:
    fake.script(slow(3.0, output(GOOD)))
    audit, journal, _ = memory_audit()
    provider = GeminiProvider(
        Credential(KEY, CredentialSource(kind="env", name="K")), base_url=fake.base_url
    )

    async def go() -> None:
        # Cancel once the endpoint holds the request (a fixed delay raced a loaded machine:
        # an attempt cancelled before it is sent is rightly never journaled).
        async with trio.open_nursery() as nursery:

            async def cancel_when_received() -> None:
                with trio.fail_after(30):
                    while not fake.requests:  # noqa: ASYNC110 - the endpoint runs in another thread
                        await trio.sleep(0.01)
                nursery.cancel_scope.cancel()

            nursery.start_soon(cancel_when_received)
            await provider.generate(_request(), audit)
            raise AssertionError("the call finished before it was cancelled")

    trio.run(go)
    provider.close()
    assert journal.open_attempts == []
    (record,) = journal.records
    assert record.status == AttemptStatus.ABANDONED
    assert record.failure_kind == FailureKind.CANCELLED


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_gemini_connect_refused_is_retried_once_with_the_identical_body() -> None:
    run = _run(f"http://127.0.0.1:{_closed_port()}/")
    first, second = run.result.attempts
    assert run.result.failure == FailureKind.CONNECT_ERROR
    assert (first.failure_kind, second.failure_kind) == (FailureKind.CONNECT_ERROR,) * 2
    assert second.retry_reason == FailureKind.CONNECT_ERROR
    assert first.request_body_hash is not None
    assert first.request_body_hash == second.request_body_hash
    assert first.request_blob == second.request_blob
    _check_audit(run)


def test_gemini_never_leaks_the_credential(
    fake: FakeGemini, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    fake.script(
        echo_credential(400),
        echo_credential(500),
        output(GOOD),
        disconnect_before_response(),
        body(200, b"{broken"),
    )
    audit, journal, blobs = memory_audit()
    provider = GeminiProvider(
        Credential(KEY, CredentialSource(kind="env", name="K")), base_url=fake.base_url
    )
    results: list[ProviderResult] = []

    async def go() -> None:
        for _ in range(4):
            results.append(await provider.generate(_request(), audit))

    caplog.set_level(logging.DEBUG)
    saved = structlog.get_config()
    # Per-attempt events are debug: let them through here.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as events:
            trio.run(go)
    finally:
        structlog.configure(**saved)
    provider.close()
    # The fake really echoed the key, so there was something to leak.
    assert KEY in fake.requests[0].headers["x-goog-api-key"]
    assert results[0].attempts[0].redacted is True
    captured = capfd.readouterr()
    haystacks: list[bytes] = [
        *(canonical_bytes(entry) for entry in journal.entries),
        *(canonical_bytes(result) for result in results),
        *blobs.all().values(),
        repr(events).encode(),
        caplog.text.encode(),
        captured.out.encode(),
        captured.err.encode(),
        repr(provider.__dict__).encode(),
    ]
    for haystack in haystacks:
        assert KEY.encode() not in haystack
    assert any(b"[REDACTED]" in blob for blob in blobs.all().values())
    assert [e["event"] for e in events].count("provider.attempt") == 5


def test_gemini_ignores_ambient_google_variables(
    fake: FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "ambient-google-key")
    monkeypatch.setenv("GEMINI_API_KEY", "ambient-gemini-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1")
    fake.script(output(GOOD))
    run = _run(fake.base_url)
    assert run.result.ok
    (received,) = fake.requests
    assert received.headers["x-goog-api-key"] == KEY
    assert received.path.startswith("/v1beta/")
    assert not [n for n in os.environ if n.upper().startswith(("GOOGLE_", "GEMINI_"))]


def test_gemini_parse_failure_is_a_result_not_an_exception(fake: FakeGemini) -> None:
    fake.script(text('{"decision": "complete", "reason": "ok"} trailing words'))
    result = _run(fake.base_url).result
    assert result.failure == FailureKind.OUTPUT_NOT_JSON
    record: AttemptRecord = result.attempts[0]
    assert record.status == AttemptStatus.FAILED
    assert record.failure_detail is not None
    assert record.failure_detail.startswith("output is not JSON")


def test_importing_the_providers_package_does_not_import_the_sdk() -> None:
    code = "import sys, harness.providers; print('google.genai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_gemini_probe_reads_the_model_metadata_and_spends_no_tokens(fake: FakeGemini) -> None:
    audit, journal, blobs = memory_audit()
    provider = GeminiProvider(
        Credential(KEY, CredentialSource(kind="env", name="K")), base_url=fake.base_url
    )
    try:
        record = provider.probe(_config(), audit)
    finally:
        provider.close()
    assert [(r.method, r.path) for r in fake.requests] == [
        ("GET", "/v1beta/models/gemini-2.5-flash")
    ]
    assert fake.requests[0].headers["x-goog-api-key"] == KEY
    assert record.status is AttemptStatus.SUCCEEDED
    assert record.role == "preflight"
    # Not billed, and at a loopback endpoint no price is known either: cost unknown.
    assert (record.usage.prompt_tokens, record.usage.output_tokens, record.cost_usd) == (0, 0, None)
    assert record.response_blob is not None
    assert b"models/gemini-2.5-flash" in blobs.get(record.response_blob)
    assert journal.records == [record]
    assert not journal.open_attempts


def test_gemini_probe_reports_a_rejected_key_in_the_providers_words(fake: FakeGemini) -> None:
    fake.metadata(
        body(403, b'{"error": {"code": 403, "message": "nope", "status": "PERMISSION_DENIED"}}')
    )
    audit, journal, _ = memory_audit()
    provider = GeminiProvider(
        Credential(KEY, CredentialSource(kind="env", name="K")), base_url=fake.base_url
    )
    try:
        record = provider.probe(_config(), audit)
    finally:
        provider.close()
    assert record.status is AttemptStatus.FAILED
    assert record.failure_kind is FailureKind.AUTHENTICATION_FAILED
    assert record.failure_detail == "HTTP 403 PERMISSION_DENIED: nope"
    assert journal.records == [record]
