"""Every reply is bounded before it is read: the real google-genai and openai clients against
loopback fakes that answer 100 MB, an endless body and a gzip bomb.

Each such reply is one failed attempt (``response_too_large``) that keeps the reply's first
``KEPT_PREFIX_BYTES`` and stores nothing larger; the provider answers the next request normally.
Nothing is mocked: the bodies cross real sockets into the real clients. Memory is measured by
``scripts/bench_reply_bounds.py`` (docs/benchmarks.md); here the kept prefix and the bytes the
fake sent before the client hung up show that the body was not read to its end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import trio
from providers_fake_gemini import FakeGemini, endless, gzip_bomb, huge, output
from providers_fake_openai import FakeOpenAI, chat_output

from harness.canonical import Domain, digest_bytes
from harness.providers import (
    AttemptRecord,
    AttemptStatus,
    Credential,
    CredentialSource,
    FailureKind,
    GenerationConfig,
    ProviderRequest,
    ProviderResult,
    default_generation_config,
    memory_audit,
)
from harness.providers.critic import TaskBrief, TraceStep, critic_request, critic_view
from harness.providers.gemini import GeminiProvider
from harness.providers.limits import KEPT_PREFIX_BYTES, MAX_REPLY_BYTES
from harness.providers.loopback import Answer
from harness.providers.openai_chat import OpenAIProvider
from harness.providers.plugin import PluginPlanner, resolve_plugin
from harness.store._files import MAX_BLOB

KEY = "AIzaFAKE-bounds-test-key-0123456789abcd"
GOOD = {"decision": "complete", "reason": "The answer addresses the question."}

BODIES: dict[str, Callable[[], Answer]] = {
    "100MB": lambda: huge(100_000_000),
    "endless": endless,
    "gzip-bomb": gzip_bomb,
}


def _config() -> GenerationConfig:
    base = default_generation_config()
    gemini = msgspec.structs.replace(base.gemini, timeout_ms=20_000, deadline_s=60.0)
    return msgspec.structs.replace(base, gemini=gemini)


def _request() -> ProviderRequest:
    task = TaskBrief(task_id="t-07", question="Total units at site A?", required_slots=("total",))
    trace = (
        TraceStep(index=0, tool="metric_lookup", arguments={"site": "A"}, status="ok", response=3),
    )
    view = critic_view(task, {"total": 3}, trace, full_trace=False)
    return critic_request(view, cell_id="cell-0001", seed=2, config=_config())


Provider = GeminiProvider | OpenAIProvider


@pytest.fixture(params=["gemini", "openai"])
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[Provider, Callable[..., None]]]:
    credential = Credential(KEY, CredentialSource(kind="env", name="K"))
    if request.param == "gemini":
        with FakeGemini() as gemini:
            provider: Provider = GeminiProvider(credential, base_url=gemini.base_url)
            yield provider, lambda *a: gemini.script(*(x or output(GOOD) for x in a))
    else:
        with FakeOpenAI() as chat:
            provider = OpenAIProvider(credential, model="fake-model", base_url=chat.base_url)
            yield provider, lambda *a: chat.script(*(x or chat_output(GOOD) for x in a))
    provider.close()


def _generate(provider: Provider, audit: object) -> ProviderResult:
    async def go() -> ProviderResult:
        return await provider.generate(_request(), audit)  # type: ignore[arg-type]

    return trio.run(go)


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_a_reply_over_the_bound_is_one_failed_attempt_with_its_first_bytes_kept(
    endpoint: tuple[Provider, Callable[..., None]], kind: str
) -> None:
    provider, script = endpoint
    script(BODIES[kind](), None)
    audit, journal, blobs = memory_audit()
    result = _generate(provider, audit)
    assert result.output is None
    assert result.failure is FailureKind.RESPONSE_TOO_LARGE
    (record,) = result.attempts  # never retried: bytes came back
    assert isinstance(record, AttemptRecord)
    assert record.status is AttemptStatus.FAILED
    assert record.http_status == 200
    assert record.response_complete is False
    decompressed = "once decompressed" if kind == "gzip-bomb" else "bytes (the bound"
    assert decompressed in (record.failure_detail or "")
    # The first bytes are kept, and nothing larger than them reaches the blob sink.
    assert record.response_bytes == KEPT_PREFIX_BYTES
    assert record.response_blob is not None
    kept = blobs.get(record.response_blob)
    assert len(kept) == KEPT_PREFIX_BYTES
    assert record.response_hash == digest_bytes(Domain.PROVIDER_RESPONSE, kept)
    expected = bytes(KEPT_PREFIX_BYTES) if kind == "gzip-bomb" else b" " * KEPT_PREFIX_BYTES
    assert kept == expected
    assert max(len(b) for b in blobs.all().values()) <= KEPT_PREFIX_BYTES
    assert [type(e).__name__ for e in journal.entries] == ["AttemptIntent", "AttemptRecord"]
    # The provider goes on: the next request is answered normally.
    after = _generate(provider, audit)
    assert after.output == GOOD
    assert after.failure is None


def test_the_reply_bound_is_well_under_the_store_blob_bound() -> None:
    assert MAX_REPLY_BYTES * 4 <= MAX_BLOB
    assert KEPT_PREFIX_BYTES < MAX_REPLY_BYTES


class _Huge:
    """A plug-in whose reply is 70 MB once encoded (over the blob bound, were it stored)."""

    def respond(self, request: dict[str, object]) -> dict[str, object]:
        return {"action": "stuck", "message": "x" * 70_000_000}


def test_a_plugin_reply_over_the_bound_is_a_failed_attempt_with_its_first_bytes_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "huge.py"
    path.write_text("PLANNER = None\n")
    planner = PluginPlanner(resolve_plugin(f"python:{path}:PLANNER"), _Huge())
    audit, _, blobs = memory_audit()

    async def go() -> ProviderResult:
        return await planner.generate(_request(), audit)

    result = trio.run(go)
    (record,) = result.attempts
    assert result.output is None
    assert result.failure is FailureKind.RESPONSE_TOO_LARGE
    assert record.status is AttemptStatus.FAILED
    assert record.response_complete is False
    assert record.response_bytes == KEPT_PREFIX_BYTES
    assert record.response_blob is not None
    kept = blobs.get(record.response_blob)
    assert kept == b'{"action":"stuck","message":"' + b"x" * (KEPT_PREFIX_BYTES - 29)
    assert "70000031 bytes as JSON" in (record.failure_detail or "")
    assert max(len(b) for b in blobs.all().values()) <= KEPT_PREFIX_BYTES
