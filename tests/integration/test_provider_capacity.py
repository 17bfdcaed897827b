"""Provider calls and tool calls have their own capacity, and an attempt keeps its deadline.

The real google-genai client against the loopback fake (nothing leaves 127.0.0.1):

- a reply that drips one byte every 0.1 s (every read well within the read timeout) is given
  up at the attempt's deadline, and its worker thread ends there too, freeing its slot;
- an attempt that finds every provider slot of the process busy for its whole deadline is never
  sent: ``local_capacity``, an infrastructure failure that counts toward the breaker;
- 40 slow-drip connections at ``max_cells`` 40 (real sandbox, real store): every later attempt
  is sent, every ``deadline_exceeded`` is an attempt the endpoint received, and the run
  commits every cell and finalizes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio
from providers_fake_gemini import Answer, FakeGemini, RecordedRequest, drip, output
from v2_support import config, reduced

from harness import capacity
from harness.providers import (
    AttemptStatus,
    Credential,
    CredentialSource,
    FailureKind,
    GenerationConfig,
    ProviderRequest,
    ProviderResult,
    memory_audit,
)
from harness.providers.attempts import AttemptRecord
from harness.providers.config import config_digest
from harness.providers.critic import TaskBrief, TraceStep, critic_request, critic_view
from harness.providers.gemini import GeminiProvider
from harness.providers.kinds import InfrastructureCause, infrastructure_cause
from harness.providers.loopback_sim import SimulatedResponder
from harness.sandbox import open_backend
from harness.store import RunStore, finalize_store, read_store, verify_store
from harness.studies._store_audit import Breaker
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import prepare, run_rows
from harness.studies.v2.schedule import plain_rows

KEY = "AIzaFAKE-capacity-test-0123456789abcdef"
GOOD = {"decision": "complete", "reason": "The answer addresses the question."}


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def _generation(deadline_s: float) -> GenerationConfig:
    base = config().generation_config
    gemini = msgspec.structs.replace(base.gemini, timeout_ms=30_000, deadline_s=deadline_s)
    return msgspec.structs.replace(base, gemini=gemini)


def _request(deadline_s: float) -> ProviderRequest:
    task = TaskBrief(task_id="t-07", question="Total units at site A?", required_slots=("total",))
    trace = (
        TraceStep(index=0, tool="metric_lookup", arguments={"site": "A"}, status="ok", response=3),
    )
    view = critic_view(task, {"total": 3}, trace, full_trace=False)
    return critic_request(view, cell_id="cell-0001", seed=2, config=_generation(deadline_s))


def _provider(fake: FakeGemini) -> GeminiProvider:
    return GeminiProvider(
        Credential(KEY, CredentialSource(kind="env", name="K")), base_url=fake.base_url
    )


async def _slots_free(limit_s: float) -> bool:
    """Whether every provider slot is free again within ``limit_s`` (a bounded wait)."""
    limiter = capacity.current().providers
    with trio.move_on_after(limit_s):
        while limiter.borrowed_tokens:  # noqa: ASYNC110 - a limiter has no "all free" event
            await trio.sleep(0.05)
        return True
    return False


def test_a_dripping_reply_is_given_up_at_the_deadline_and_frees_its_thread(
    fake: FakeGemini,
) -> None:
    fake.script(drip(0.1), output(GOOD))
    provider = _provider(fake)
    audit, _, _ = memory_audit()

    async def go() -> tuple[ProviderResult, bool, ProviderResult]:
        capacity.install(1)
        first = await provider.generate(_request(1.5), audit)
        # The abandoned call's thread ends at the deadline (the transport holds it to it),
        # not when the endpoint stops dripping (a 1 MiB body at 10 bytes/s: about a day).
        freed = await _slots_free(10.0)
        second = await provider.generate(_request(1.5), audit)
        return first, freed, second

    try:
        first, freed, second = trio.run(go)
    finally:
        provider.close()
    (record,) = first.attempts
    assert record.status is AttemptStatus.ABANDONED
    assert record.failure_kind is FailureKind.DEADLINE_EXCEEDED
    assert freed
    assert second.output == GOOD
    assert len(fake.generate_requests) == 2


def test_an_attempt_with_no_free_slot_is_a_local_failure_never_sent(fake: FakeGemini) -> None:
    fake.always(output(GOOD))
    provider = _provider(fake)
    audit, _, _ = memory_audit()

    async def go() -> tuple[ProviderResult, ProviderResult]:
        limiter = capacity.install(1).providers  # 2 slots
        held = [object(), object()]
        for borrower in held:
            await limiter.acquire_on_behalf_of(borrower)
        starved = await provider.generate(_request(0.5), audit)
        for borrower in held:
            limiter.release_on_behalf_of(borrower)
        served = await provider.generate(_request(5.0), audit)
        return starved, served

    try:
        starved, served = trio.run(go)
    finally:
        provider.close()
    (record,) = starved.attempts  # not retried
    assert isinstance(record, AttemptRecord)
    assert starved.failure is FailureKind.LOCAL_CAPACITY
    assert record.status is AttemptStatus.FAILED
    assert record.request_blob is None  # nothing was sent
    assert record.http_status is None
    assert "not sent: all 2 provider call slots" in (record.failure_detail or "")
    assert infrastructure_cause(record.failure_kind) is InfrastructureCause.LOCAL_CAPACITY
    breaker = Breaker(1)
    breaker.observe(record)
    assert breaker.tripped is not None
    assert "local_capacity" in breaker.tripped
    assert served.output == GOOD


def test_an_attempt_cancelled_while_waiting_for_a_slot_is_neither_sent_nor_journaled(
    fake: FakeGemini,
) -> None:
    # The run stops (breaker, Ctrl-C) by cancelling its cells; a cell waiting for a slot then
    # sent nothing, so the journal may hold nothing of it: every attempt journaled is one the
    # endpoint received, or one said never to be sent.
    fake.always(output(GOOD))
    provider = _provider(fake)
    audit, journal, _ = memory_audit()

    async def go() -> tuple[bool, ProviderResult]:
        limiter = capacity.install(1).providers  # 2 slots
        held = [object(), object()]
        for borrower in held:
            await limiter.acquire_on_behalf_of(borrower)
        with trio.move_on_after(0.3) as waiting:  # well within the 5 s deadline
            await provider.generate(_request(5.0), audit)
        for borrower in held:
            limiter.release_on_behalf_of(borrower)
        served = await provider.generate(_request(5.0), audit)
        return waiting.cancelled_caught, served

    try:
        cancelled, served = trio.run(go)
    finally:
        provider.close()
    assert cancelled
    assert served.output == GOOD
    (_begun, ended) = journal.entries  # the served attempt only
    assert isinstance(ended, AttemptRecord)
    assert ended.status is AttemptStatus.SUCCEEDED
    assert len(fake.generate_requests) == 1
    assert len(fake.generate_requests) == 1  # only the second attempt reached the endpoint
    assert [type(e).__name__ for e in journal.entries[:2]] == ["AttemptIntent", "AttemptRecord"]


class _DripFirst:
    """The first ``count`` generateContent requests drip forever; the rest are simulated."""

    def __init__(self, count: int) -> None:
        self._inner = SimulatedResponder(config().generation_config)
        self._count = count
        self._lock = threading.Lock()
        self.dripped = 0
        self.answered = 0

    def __call__(self, recorded: RecordedRequest) -> Answer:
        with self._lock:
            dripping = self.dripped < self._count
            if dripping:
                self.dripped += 1
            else:
                self.answered += 1
        return drip(0.2) if dripping else self._inner(recorded)


def test_forty_slow_drip_connections_at_max_cells_40_starve_nothing(tmp_path: Path) -> None:
    cells = 40
    generation = _generation(3.0)
    v2 = msgspec.structs.replace(
        config(), generation_config=generation, generation_config_digest=config_digest(generation)
    )
    rows = reduced(cells)
    inputs = prepare(v2, rows)
    responder = _DripFirst(cells)
    store = tmp_path / "store"
    with FakeGemini(responder=responder) as fake:
        provider = _provider(fake)
        writer = RunStore.create(
            store, b"opaque lock", plain_rows(rows), result_type=CellResult,
            attempt_type=AttemptRecord,
        )  # fmt: skip
        try:
            report = run_rows(
                writer,
                inputs,
                provider,
                SandboxTools(open_backend(), timeout_s=20.0),
                keep_results=True,
                handle_signals=False,
                max_cells=cells,
            )
        finally:
            writer.close()
            provider.close()
        received = len(fake.generate_requests)
    assert report.committed == cells
    assert report.outage is None
    finalize_store(store, cells)
    assert verify_store(store).manifest_digest is not None
    attempts = [a for c in read_store(store).cells for a in c.audit]
    kinds = [a["failure_kind"] for a in attempts]
    assert kinds.count("deadline_exceeded") == cells  # the 40 dripping replies, each sent
    assert "local_capacity" not in kinds
    # Every attempt journaled was received by the endpoint: none is a timeout never sent.
    assert len(attempts) == received == responder.dripped + responder.answered
