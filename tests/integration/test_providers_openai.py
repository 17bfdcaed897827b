"""The OpenAI-compatible provider: the real ``openai`` client against a fake endpoint on loopback.

No OpenAI-compatible service can be reached here (no network); ``providers_fake_openai`` speaks
the chat-completions wire format and plays scripted failures. Nothing in the client is mocked:
requests go through ``openai``, httpx2 and real loopback sockets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
import trio
from providers_fake_gemini import disconnect_before_response, reset_after_request, slow
from providers_fake_openai import FakeOpenAI, chat_error, chat_output, chat_text

from harness.errors import ProviderSelectionError
from harness.providers import (
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
from harness.providers.critic import TaskBrief, TraceStep, critic_request, critic_view
from harness.providers.kinds import ProviderName, infrastructure_cause
from harness.providers.openai_chat import OpenAIProvider
from harness.providers.selection import (
    open_provider,
    probe_provider,
    provider_identity,
    select_provider,
)
from harness.store import read_store
from harness.studies.static.run import run_static

KEY = "sk-FAKE-test-key-0123456789abcdefghij"
MODEL = "fake-model-1"
GOOD = {"decision": "complete", "reason": "The answer addresses the question."}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _config(*, timeout_ms: int = 5_000, deadline_s: float = 20.0) -> GenerationConfig:
    base = default_generation_config()
    gemini = msgspec.structs.replace(base.gemini, timeout_ms=timeout_ms, deadline_s=deadline_s)
    return msgspec.structs.replace(base, gemini=gemini)


def _request(config: GenerationConfig | None = None) -> ProviderRequest:
    task = TaskBrief(task_id="t-07", question="Total units at site A?", required_slots=("total",))
    trace = (
        TraceStep(index=0, tool="metric_lookup", arguments={"site": "A"}, status="ok", response=3),
    )
    view = critic_view(task, {"total": 3}, trace, full_trace=False)
    return critic_request(view, cell_id="cell-0001", seed=2, config=config or _config())


@dataclass
class Run:
    result: ProviderResult
    journal: MemoryJournal
    blobs: MemoryBlobSink


def _run(base_url: str, *, key: str | None = KEY, request: ProviderRequest | None = None) -> Run:
    audit, journal, blobs = memory_audit()
    credential = None if key is None else Credential(key, CredentialSource(kind="env", name="K"))
    provider = OpenAIProvider(credential, model=MODEL, base_url=base_url)

    async def go() -> ProviderResult:
        return await provider.generate(request or _request(), audit)

    try:
        result = trio.run(go)
    finally:
        provider.close()
    return Run(result, journal, blobs)


def test_openai_success_sends_the_frozen_settings_and_stores_raw_bytes(fake: FakeOpenAI) -> None:
    fake.script(chat_output(GOOD))
    run = _run(fake.base_url)
    assert run.result.ok
    assert run.result.output == GOOD
    assert run.result.provider is ProviderName.OPENAI
    (sent,) = fake.chat_requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    doc = sent.json()
    assert doc["model"] == MODEL
    assert doc["temperature"] == 0.2
    assert doc["seed"] == 2
    assert doc["response_format"]["type"] == "json_schema"
    assert doc["response_format"]["json_schema"]["schema"] == _request().response_schema
    assert [m["role"] for m in doc["messages"]] == ["system", "user"]
    (record,) = run.result.attempts
    assert record.status is AttemptStatus.SUCCEEDED
    assert record.http_status == 200
    assert record.finish_reason == "stop"
    assert record.usage.prompt_tokens == 120
    assert record.request_blob is not None
    assert record.response_blob is not None
    blobs = run.blobs.all()
    assert blobs[record.request_blob] == sent.body
    assert json.loads(blobs[record.response_blob])["choices"][0]["finish_reason"] == "stop"
    for data in blobs.values():
        assert KEY.encode() not in data
    assert [e.attempt_index for e in run.journal.records] == [0]


def test_openai_retries_once_identically_after_a_pre_output_disconnect(fake: FakeOpenAI) -> None:
    fake.script(disconnect_before_response(), chat_output(GOOD))
    run = _run(fake.base_url)
    assert run.result.ok
    first, second = fake.chat_requests
    assert first.body == second.body
    kinds = [a.failure_kind for a in run.result.attempts]
    assert kinds == [FailureKind.DISCONNECTED_BEFORE_RESPONSE, None]
    assert run.result.attempts[1].retry_reason is FailureKind.DISCONNECTED_BEFORE_RESPONSE


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (reset_after_request(), FailureKind.CONNECTION_RESET),
        (chat_error(401, "Incorrect API key provided"), FailureKind.AUTHENTICATION_FAILED),
        (chat_error(429, "Rate limit reached", "rate_limit_exceeded"), FailureKind.RATE_LIMITED),
        (chat_error(404, "The model does not exist"), FailureKind.NOT_FOUND),
        (chat_error(400, "response_format is not supported"), FailureKind.HTTP_CLIENT_ERROR),
        (chat_error(500, "boom", "server_error"), FailureKind.HTTP_SERVER_ERROR),
        (chat_output({"decision": "maybe"}), FailureKind.SCHEMA_MISMATCH),
        (chat_text("not json"), FailureKind.OUTPUT_NOT_JSON),
        (chat_text(None), FailureKind.EMPTY_OUTPUT),
        (chat_text('{"decision":', finish_reason="length"), FailureKind.MAX_TOKENS),
        (chat_text(None, finish_reason="content_filter"), FailureKind.BLOCKED),
    ],
    ids=[
        "reset",
        "401",
        "429",
        "404",
        "400",
        "500",
        "schema",
        "not-json",
        "empty",
        "length",
        "filtered",
    ],
)
def test_openai_failures_are_recorded_never_retried(
    fake: FakeOpenAI, answer: object, kind: FailureKind
) -> None:
    fake.script(answer)  # type: ignore[arg-type]
    run = _run(fake.base_url)
    assert not run.result.ok
    assert run.result.failure is kind
    assert len(fake.chat_requests) == 1
    (record,) = run.result.attempts
    assert record.status is AttemptStatus.FAILED
    assert record.failure_detail
    assert KEY not in record.failure_detail


def test_openai_failure_kinds_split_infrastructure_from_model_failures() -> None:
    assert infrastructure_cause(FailureKind.AUTHENTICATION_FAILED) is not None
    assert infrastructure_cause(FailureKind.RATE_LIMITED) is not None
    assert infrastructure_cause(FailureKind.SCHEMA_MISMATCH) is None
    assert infrastructure_cause(FailureKind.PLUGIN_ERROR) is None


def test_openai_connection_refused_is_retried_once_then_infrastructure() -> None:
    with FakeOpenAI() as server:
        url = server.base_url  # closed after this block: nothing listens there
    run = _run(url)
    assert [a.failure_kind for a in run.result.attempts] == [FailureKind.CONNECT_ERROR] * 2
    assert infrastructure_cause(run.result.failure) is not None


def test_openai_deadline_abandons_a_slow_call(fake: FakeOpenAI) -> None:
    fake.script(slow(3.0, chat_output(GOOD)))
    run = _run(fake.base_url, request=_request(_config(timeout_ms=10_000, deadline_s=0.5)))
    (record,) = run.result.attempts
    assert record.status is AttemptStatus.ABANDONED
    assert record.failure_kind is FailureKind.DEADLINE_EXCEEDED


def test_openai_no_credential_sends_no_authorization_header(fake: FakeOpenAI) -> None:
    fake.script(chat_output(GOOD))
    run = _run(fake.base_url, key=None)
    assert run.result.ok
    (sent,) = fake.chat_requests
    assert "authorization" not in sent.headers


def test_openai_ambient_variables_are_never_used(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-AMBIENT-never-sent")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://192.0.2.1/v1")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-ambient")
    fake.script(chat_output(GOOD))
    selection = select_provider(
        "openai",
        credential_file=None,
        credential_env=None,
        base_url=fake.base_url,
        model=MODEL,
        no_credential=True,
    )
    provider = open_provider(selection)
    assert "OPENAI_API_KEY" not in os.environ
    assert "OPENAI_BASE_URL" not in os.environ
    audit, _, _ = memory_audit()

    async def go() -> ProviderResult:
        return await provider.generate(_request(), audit)

    try:
        result = trio.run(go)
    finally:
        provider.close()  # type: ignore[attr-defined]
    assert result.ok
    (sent,) = fake.chat_requests
    assert "authorization" not in sent.headers
    assert "openai-organization" not in sent.headers


def test_openai_preflight_reads_the_model_without_tokens(fake: FakeOpenAI) -> None:
    config = _config()
    selection = select_provider(
        "openai",
        credential_file=None,
        credential_env=None,
        base_url=fake.base_url,
        model=MODEL,
        no_credential=True,
    )
    provider = open_provider(selection)
    audit, journal, _ = memory_audit()
    ok, line = probe_provider(provider, selection, config, audit)
    assert ok, line
    assert MODEL in line
    fake.metadata(chat_error(404, "The model does not exist"))
    ok, line = probe_provider(provider, selection, config, audit)
    assert not ok
    assert "HTTP 404" in line
    provider.close()  # type: ignore[attr-defined]
    assert [r.path for r in fake.requests] == [f"/v1/models/{MODEL}"] * 2
    assert not fake.chat_requests
    assert [r.failure_kind for r in journal.records] == [None, FailureKind.NOT_FOUND]


def test_openai_identity_names_model_endpoint_and_host(fake: FakeOpenAI) -> None:
    selection = select_provider(
        "openai",
        credential_file=None,
        credential_env="SOME_KEY",
        base_url=fake.base_url,
        model=MODEL,
    )
    identity = provider_identity(selection, _config())
    assert identity.provider is ProviderName.OPENAI
    assert identity.model == MODEL
    assert identity.endpoint == fake.base_url
    assert identity.endpoint_host is not None
    assert identity.endpoint_host.startswith("127.0.0.1:")
    assert identity.credential == "key"
    assert not identity.frozen_study


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, r"needs --model NAME"),
        ({"model": MODEL}, r"exactly one of --credential-file"),
        ({"model": MODEL, "no_credential": True, "credential_env": "K"}, r"exactly one of"),
    ],
    ids=["no-model", "no-credential-source", "two-sources"],
)
def test_openai_selection_refuses_incomplete_options(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"credential_file": None, "credential_env": None, "base_url": None}
    args.update(kwargs)
    with pytest.raises(ProviderSelectionError, match=match):
        select_provider("openai", **args)  # type: ignore[arg-type]


def test_gemini_refuses_openai_only_options() -> None:
    with pytest.raises(ProviderSelectionError, match=r"^--model applies only to --provider openai"):
        select_provider(
            "gemini", credential_file=None, credential_env="K", base_url=None, model="x"
        )


def test_static_dev_run_through_openai_audits_every_attempt(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    selection = select_provider(
        "openai",
        credential_file=None,
        credential_env=None,
        base_url=fake.base_url,
        model=MODEL,
        no_credential=True,
    )
    info = run_static(out, split="dev", selection=selection)
    assert info.attempts == len(fake.chat_requests) == 108
    genesis = read_store(out).genesis
    assert genesis is not None
    assert MODEL in json.dumps(genesis.identity)
    assert genesis.identity["provider"]["provider"] == "openai"
