"""A V2 cell through the real Gemini provider, against the fake Gemini server on loopback.

The real google-genai client sends the planner prompt to ``providers_fake_gemini.FakeGemini``
(nothing beyond 127.0.0.1), which plays a pre-output disconnect (retried once, identically), a
tool call, an off-schema reply (the decision is spent as unusable) and a completion with a
certificate computed the way a careful model would. ECT accepts it; the store journals every
attempt, holds no credential, and labels the result as the model's, not simulated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from providers_fake_gemini import FakeGemini, disconnect_before_response, output
from v2_support import config, reduced, reindexed

from harness.ect import Claim, descriptor_digest, ledger_digest
from harness.providers import open_provider, select_provider
from harness.providers.attempts import AttemptRecord
from harness.sandbox import open_backend
from harness.store import RunStore, read_store, verify_store
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import prepare, run_rows
from harness.studies.v2.schedule import plain_rows
from harness.tools.adapter import build_ledger
from harness.worlds import certificate_for, find_support, run_calls

KEY = "fake-key-v2-0123456789abcdef"


def test_v2_cell_through_gemini_is_audited_and_accepted_by_ect(tmp_path: Path) -> None:
    row = next(r for r in reduced(8) if r.checkpoint == "incomplete" and r.policy == "ect")
    rows = reindexed([row])
    inputs = prepare(config(), rows)
    cell = inputs.cell(rows[0])
    task, checkpoint = cell.task, cell.checkpoint
    recovery = checkpoint.recovery[0]
    trace = (
        *checkpoint.trace,
        *run_calls(cell.world, [recovery], first=checkpoint.first_new_call),
    )
    ledger = build_ledger(task.task_id, trace)
    support = find_support(task, ledger)
    assert support is not None
    claims = [
        Claim(slot=p.slot, value=task.gold[p.slot], evidence=support[p.slot], transform=p.transform)
        for p in task.plan
    ]
    certificate = certificate_for(task, ledger, claims)
    assert certificate.descriptor_digest == descriptor_digest(task.descriptor)
    assert certificate.ledger_digest == ledger_digest(ledger.receipts)
    call: dict[str, Any] = {
        "action": "call_tool",
        "tool_call": {"tool_id": recovery.tool_id, "args": recovery.args},
        "answer": None,
        "certificate": None,
        "message": "Fetching the missing value.",
    }
    complete: dict[str, Any] = {
        "action": "complete",
        "tool_call": None,
        "answer": dict(task.gold),
        "certificate": msgspec.to_builtins(certificate),
        "message": "Done.\nDONE",
    }
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    store = tmp_path / "store"
    with FakeGemini() as fake:
        fake.script(
            disconnect_before_response(),
            output(call),
            output({"action": "maybe", "message": "off schema"}),
            output(complete),
        )
        # A loopback endpoint has no price of its own: the run gives one (USD per million).
        selection = select_provider(
            "gemini", credential_file=key_file, credential_env=None, base_url=fake.base_url,
            price_input=0.3, price_output=2.5,
        )  # fmt: skip
        provider = open_provider(selection)
        writer = RunStore.create(
            store,
            b"opaque lock",
            plain_rows(rows),
            result_type=CellResult,
            attempt_type=AttemptRecord,
        )
        try:
            report = run_rows(
                writer,
                inputs,
                provider,
                SandboxTools(open_backend(), timeout_s=20.0),
                keep_results=True,
                handle_signals=False,
            )
        finally:
            writer.close()
            close = getattr(provider, "close", None)
            if callable(close):
                close()
        sent = fake.requests
    assert len(sent) == 4  # three decisions, one of them retried once after a disconnect
    assert sent[0].body == sent[1].body  # the retry is identical
    result = report.results[0]
    assert result.provider == "gemini"
    assert not result.simulated
    assert [s.action for s in result.steps] == ["call_tool", "unusable", "complete"]
    assert result.steps[1].planner_failure == "schema_mismatch"
    assert result.steps[2].verdict == "complete"
    assert result.supported_completion
    assert result.recovery_event
    assert result.completed_after_recovery
    assert (result.provider_calls, result.planner_calls, result.provider_failures) == (4, 4, 2)
    assert result.cost_usd > 0
    assert not result.cost_known  # the disconnected attempt reported no tokens: cost unknown
    assert verify_store(store)
    record = read_store(store).cells[0]
    assert len(record.audit) == 4
    assert [a["attempt_index"] for a in record.audit] == [0, 1, 0, 0]
    for path in store.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    # The cell reads back from the store: the model's replies come from their blobs.
    from harness.studies.v2.transcript import render_transcript, transcripts_of

    (shown,) = transcripts_of(store, [record], None)
    first, unusable, last = shown.decisions
    assert first.message == "Fetching the missing value."
    assert [(a.attempt_index, a.status) for a in first.attempts] == [
        (0, "failed"),
        (1, "succeeded"),
    ]
    assert first.call is not None
    assert first.call.receipt_ids == result.steps[0].receipts
    assert unusable.planner_failure == "schema_mismatch"
    assert last.answer == dict(task.gold)
    assert last.certificate == msgspec.json.decode(msgspec.json.encode(certificate))
    assert (last.verdict, last.supported) == ("complete", True)
    assert "  gold judge: supported, answer correct" in render_transcript(shown).splitlines()
