"""harness.gate: the framework-neutral session over twelve benchmark tasks, bad input, audit.

Real tool calls (the catalog against generated worlds), the real trusted adapter, the real
verifier; the exported files are checked by the real ``harness verify`` command.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from gate_support import (
    BEHAVIOURS,
    Behaviour,
    CallAction,
    Script,
    Seen,
    SubmitAction,
    task_by_id,
    task_ids,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.ect import Verdict, ledger_digest
from harness.errors import ExportError, GateError
from harness.gate import (
    MAX_MODEL_INPUT_BYTES,
    EctSession,
    GateDecision,
    GateRecord,
    Observation,
    ToolResult,
    catalog_sources,
    export_record,
    reverify,
)
from harness.tools.adapter import ToolCall, build_ledger
from harness.tools.catalog import call_tool
from harness.worlds import WORLD_IDS, Task, build_tasks, generate_world

MAX_REFUSALS = 2


def _session(task: Task, max_refusals: int = MAX_REFUSALS) -> EctSession:
    return EctSession(
        task.descriptor, task.requirements, catalog_sources(), max_refusals=max_refusals
    )


def _run(task_id: str, behaviour: Behaviour) -> tuple[EctSession, list[GateDecision], list[Seen]]:
    task, world = task_by_id(task_id)
    session = _session(task)
    script = Script(task, behaviour)
    seen: list[Seen] = []
    decisions: list[GateDecision] = []
    for _ in range(40):
        action = script.next(seen)
        if isinstance(action, CallAction):
            result = call_tool(world, action.tool_id, action.args)
            recorded = session.record_call(action.tool_id, action.args, result)
            seen.append(Seen(recorded.call_id, action.tool_id, action.args, result))
            continue
        assert isinstance(action, SubmitAction)
        decision = session.submit(action.claims, action.answer)
        decisions.append(decision)
        if decision.verdict is not Verdict.CONTINUE:
            return session, decisions, seen
    raise AssertionError("the scripted run did not end")


EXPECTED_CODE: dict[Behaviour, str] = {
    "no_evidence": "EVIDENCE_EMPTY",
    "wrong_scope": "SCOPE_TOOL",
    "altered_answer": "REPLAY_ANSWER_MISMATCH",
}


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("task_id", task_ids())
def test_each_behaviour_gets_its_verdict_on_each_task(task_id: str, behaviour: Behaviour) -> None:
    session, decisions, _ = _run(task_id, behaviour)
    task, _ = task_by_id(task_id)
    if behaviour == "honest":
        assert [d.verdict for d in decisions] == [Verdict.COMPLETE]
        assert decisions[0].answer == task.gold
        assert decisions[0].feedback.startswith("Accepted")
    else:
        assert [d.verdict for d in decisions] == [Verdict.CONTINUE, Verdict.STUCK]
        code = EXPECTED_CODE[behaviour]
        for decision in decisions:
            assert code in decision.reason_codes
            assert code in decision.feedback  # the reason reaches the model
            assert decision.answer is None
        assert decisions[-1].reason_codes[-1] == "GATE_REFUSAL_BUDGET_SPENT"
        # Only a refusal for evidence names the evidence missing; a changed answer needs none.
        asks = "Evidence the contract asks for" in decisions[0].feedback
        assert asks is (behaviour != "altered_answer")
        assert "refusal budget is spent" in decisions[-1].feedback
    assert session.terminal == decisions[-1]
    checks = reverify(session.to_record())
    assert [c.index for c in checks] == [d.submission for d in decisions]
    assert all(c.agrees for c in checks), checks


@pytest.mark.parametrize("task_id", task_ids())
def test_the_gate_ledger_is_the_trusted_adapter_ledger(task_id: str) -> None:
    session, _, seen = _run(task_id, "honest")
    calls = [
        ToolCall(call_id=s.call_id, tool_id=s.tool_id, args=s.args, response=s.result) for s in seen
    ]
    expected = build_ledger(task_id, calls)
    assert session.ledger() == expected
    assert session.ledger_digest() == ledger_digest(expected.receipts)


def test_missing_evidence_is_named_with_what_is_in_scope() -> None:
    task_id = task_ids()[1]  # aggregation: four site values per slot
    _, decisions, _ = _run(task_id, "no_evidence")
    feedback = decisions[0].feedback
    task, _ = task_by_id(task_id)
    for slot in task.requirements.slots:
        assert f"slot {slot.slot}: cite {slot.min_evidence} receipt(s) from get_metric" in feedback
    assert "In the ledger now: none yet." in feedback


def test_the_feedback_lists_receipts_already_in_scope() -> None:
    task, world = task_by_id(task_ids()[1])
    session = _session(task)
    item = task.plan[0].evidence[0]
    recorded = session.record_call(
        item.call.tool_id, item.call.args, call_tool(world, item.call.tool_id, item.call.args)
    )
    decision = session.submit("[]", "{}")
    assert f"In the ledger now: {recorded.receipts[0].receipt_id}." in decision.feedback
    assert "COVERAGE_NO_CLAIMS" in decision.reason_codes


# --- bad input from the model ------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "answer", "codes"),
    [
        ("{not json", "{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ("", "{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ('[{"slot": 1}]', "{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ('{"claims": []}', "{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ("[]", "[1, 2]", ("ADAPTER_ANSWER_MALFORMED",)),
        ("[]", "not json", ("ADAPTER_ANSWER_MALFORMED",)),
        ("[]", '{"a": 1, "a": 2}', ("ADAPTER_ANSWER_MALFORMED",)),
        ("[]", '{"a": NaN}', ("ADAPTER_ANSWER_MALFORMED",)),
        ("nope", None, ("ADAPTER_CERTIFICATE_MALFORMED", "ADAPTER_ANSWER_MALFORMED")),
        ([{"slot": "x", "value": math.nan}], {}, ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ([{"slot": "x", "value": {1, 2}}], {}, ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ("[" * 100_000 + "]" * 100_000, "{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        ("[" + " " * MAX_MODEL_INPUT_BYTES + "]", "{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        (b"\xff\xfe", b"{}", ("ADAPTER_CERTIFICATE_MALFORMED",)),
        (b"[]", b'{"a": "\xff"}', ("ADAPTER_ANSWER_MALFORMED",)),
        ("[]", "{}" + " " * MAX_MODEL_INPUT_BYTES, ("ADAPTER_ANSWER_MALFORMED",)),
    ],
    ids=[
        "claims-not-json",
        "claims-empty",
        "claims-wrong-type",
        "claims-an-object",
        "answer-a-list",
        "answer-not-json",
        "answer-duplicate-key",
        "answer-nan",
        "both-bad",
        "claims-parsed-nan",
        "claims-parsed-set",
        "claims-too-deep",
        "claims-too-large",
        "claims-not-utf8",
        "answer-not-utf8-inside-json",
        "answer-json-padded-over-the-bound",
    ],
)
def test_bad_model_input_is_a_readable_refusal(claims: Any, answer: Any, codes: tuple[str]) -> None:
    task, _ = task_by_id(task_ids()[0])
    session = _session(task, max_refusals=5)
    decision = session.submit(claims, answer)
    assert decision.verdict is Verdict.CONTINUE
    assert decision.reason_codes == codes
    for code in codes:
        assert code in decision.feedback
    assert len(decision.feedback) <= 8000
    (check,) = reverify(session.to_record())
    assert check.agrees, check
    # The record itself is JSON and decodes back to the same record.
    record = session.to_record()
    assert msgspec.json.decode(msgspec.json.encode(record), type=GateRecord) == record


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@settings(max_examples=60)
@given(
    claims=JSONISH | st.text(max_size=40) | st.binary(max_size=40),
    answer=JSONISH | st.text(max_size=40),
)
def test_whatever_the_model_sends_never_raises_and_reverifies(claims: Any, answer: Any) -> None:
    task, _ = task_by_id(task_ids()[0])
    session = _session(task, max_refusals=1)
    decision = session.submit(claims, answer)
    assert decision.verdict is Verdict.STUCK
    (check,) = reverify(session.to_record())
    assert check.agrees, check


# --- tool results the extractor cannot read ----------------------------------------------


def test_an_unreadable_result_yields_no_receipt_and_a_note() -> None:
    task, _ = task_by_id(task_ids()[0])

    def broken(call: ToolResult) -> list[Observation]:
        raise KeyError("body")

    session = EctSession(task.descriptor, task.requirements, {"get_metric": broken})
    recorded = session.record_call("get_metric", {"entity": "x"}, {"status": "ok"})
    assert recorded.receipts == ()
    assert recorded.note == "result not read (KeyError: 'body')"
    other = session.record_call("list_children", {"entity": "x"}, {})
    assert other.receipts == ()
    assert other.note == "not an evidence tool"
    assert session.receipts == ()


@pytest.mark.parametrize(
    "result",
    [
        {"status": "ok", "body": {"value": math.inf}},
        object(),
        {"status": "ok", "body": {"value": {1, 2}}},
        {"status": "ok", 1: "a non-string key"},
        b"bytes",
        "text that is no object",
    ],
)
def test_a_result_that_cannot_be_hashed_or_read_is_not_evidence(result: Any) -> None:
    task, _ = task_by_id(task_ids()[0])
    session = _session(task)
    recorded = session.record_call(
        "get_metric", {"entity": "R1.D1.S1", "metric": "m", "period": "2024-01"}, result
    )
    if isinstance(result, str):
        # Readable but failed: the adapter records the call as one unsuccessful receipt.
        assert [r.exec_status for r in recorded.receipts] == ["error"]
    else:
        assert recorded.receipts == ()
        assert recorded.note is not None
        assert recorded.note.startswith("result not read")


def test_repeated_and_framework_call_ids_stay_unique() -> None:
    task, world = task_by_id(task_ids()[0])
    session = _session(task)
    args = {"entity": "R1"}
    result = call_tool(world, "list_children", args)
    first = session.record_call("list_children", args, result, call_id="call_abc")
    second = session.record_call("list_children", args, result, call_id="call_abc")
    third = session.record_call("list_children", args, result)
    assert [first.call_id, second.call_id, third.call_id] == ["call_abc", "call_abc#2", "c03"]


def test_concurrent_records_keep_one_consistent_ledger() -> None:
    task, world = task_by_id(task_ids()[1])
    session = _session(task)
    specs = [i.call for p in task.plan for i in p.evidence]

    def work(n: int) -> None:
        for spec in specs:
            session.record_call(spec.tool_id, spec.args, call_tool(world, spec.tool_id, spec.args))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    receipts = session.receipts
    assert len(receipts) == 4 * len(specs)
    assert len({r.receipt_id for r in receipts}) == len(receipts)
    assert session.ledger_digest() == ledger_digest(receipts)


# --- terminal states, set-up errors, async ----------------------------------------------


def test_a_submit_after_the_end_returns_the_end_and_records_nothing() -> None:
    session, decisions, _ = _run(task_ids()[0], "honest")
    again = session.submit("[]", "{}")
    assert again == decisions[-1]
    assert len(session.to_record().submissions) == 1


def test_the_async_methods_gate_the_same_way() -> None:
    task, world = task_by_id(task_ids()[0])
    script = Script(task, "honest")

    async def run() -> GateDecision:
        session = _session(task)
        seen: list[Seen] = []
        while True:
            action = script.next(seen)
            if isinstance(action, SubmitAction):
                return await session.asubmit(action.claims, action.answer)
            result = call_tool(world, action.tool_id, action.args)
            recorded = await session.arecord_call(action.tool_id, action.args, result)
            seen.append(Seen(recorded.call_id, action.tool_id, action.args, result))

    assert asyncio.run(run()).verdict is Verdict.COMPLETE


def test_a_contract_of_another_task_or_no_budget_is_refused_at_set_up() -> None:
    (task, _), (other, _) = task_by_id(task_ids()[0]), task_by_id(task_ids()[1])
    with pytest.raises(GateError, match="the contract is for task"):
        EctSession(task.descriptor, other.requirements, catalog_sources())
    with pytest.raises(GateError, match="max_refusals must be at least 1, not 0"):
        EctSession(task.descriptor, task.requirements, catalog_sources(), max_refusals=0)
    forged = msgspec.structs.replace(task.requirements, descriptor_digest="blake3:" + "0" * 64)
    with pytest.raises(GateError, match="descriptor digest"):
        EctSession(task.descriptor, forged, catalog_sources())


# --- offline: the exported files through the real command -------------------------------


def _harness_verify(folder: Path, submission: int) -> subprocess.CompletedProcess[str]:
    sub = folder / f"submission-{submission:02d}"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "verify",
            "--descriptor",
            str(folder / "descriptor.json"),
            "--requirements",
            str(folder / "requirements.json"),
            "--ledger",
            str(sub / "ledger.json"),
            "--certificate",
            str(sub / "certificate.json"),
            "--answer",
            str(sub / "answer.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("behaviour", "exits"),
    [("honest", [0]), ("altered_answer", [1, 1])],
)
def test_an_exported_run_reverifies_with_harness_verify(
    tmp_path: Path, behaviour: Behaviour, exits: list[int]
) -> None:
    session, decisions, _ = _run(task_ids()[2], behaviour)
    folder = tmp_path / "run"
    written = export_record(session.to_record(), folder)
    assert folder / "record.json" in written
    for index, (decision, code) in enumerate(zip(decisions, exits, strict=True), start=1):
        done = _harness_verify(folder, index)
        assert done.returncode == code, done.stderr
        verdict = json.loads(done.stdout)
        live = tuple(c.value for c in decision.decision.reason_codes)
        assert tuple(verdict["reason_codes"]) == live
    recorded = json.loads((folder / "submission-01" / "decision.json").read_text())
    assert recorded["decision"] == decisions[0].decision.decision.value


def test_a_refused_malformed_submission_exports_to_the_same_refusal(tmp_path: Path) -> None:
    task, _ = task_by_id(task_ids()[0])
    session = _session(task)
    session.submit("{not json", '{"x": 1}')
    export_record(session.to_record(), tmp_path / "run")
    done = _harness_verify(tmp_path / "run", 1)
    assert done.returncode == 1
    assert json.loads(done.stdout)["reason_codes"] == ["ADAPTER_CERTIFICATE_MALFORMED"]


def test_export_refuses_an_existing_directory(tmp_path: Path) -> None:
    session, _, _ = _run(task_ids()[0], "honest")
    with pytest.raises(ExportError, match="exists already"):
        export_record(session.to_record(), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("world_id", list(WORLD_IDS))
def test_every_benchmark_task_gets_each_behaviours_verdict(world_id: str) -> None:
    world = generate_world(world_id)
    plain = world.to_plain()
    for task in build_tasks(world):
        for behaviour in BEHAVIOURS:
            session = _session(task)
            script = Script(task, behaviour)
            seen: list[Seen] = []
            verdicts: list[Verdict] = []
            while not verdicts or verdicts[-1] is Verdict.CONTINUE:
                action = script.next(seen)
                if isinstance(action, CallAction):
                    result = call_tool(plain, action.tool_id, action.args)
                    recorded = session.record_call(action.tool_id, action.args, result)
                    seen.append(Seen(recorded.call_id, action.tool_id, action.args, result))
                else:
                    verdicts.append(session.submit(action.claims, action.answer).verdict)
            expected = (
                [Verdict.COMPLETE] if behaviour == "honest" else [Verdict.CONTINUE, Verdict.STUCK]
            )
            assert verdicts == expected, (task.task_id, behaviour)
            assert all(c.agrees for c in reverify(session.to_record()))


def test_a_changed_record_no_longer_reverifies() -> None:
    session, _, _ = _run(task_ids()[1], "honest")
    record = session.to_record()
    # A receipt's value changed after the fact: the ledger no longer hashes to what was bound.
    call = next(c for c in record.calls if c.receipts and c.tool_id == "get_metric")
    receipt = msgspec.structs.replace(call.receipts[0], value=call.receipts[0].value + 1)
    changed_call = msgspec.structs.replace(call, receipts=(receipt, *call.receipts[1:]))
    calls = tuple(changed_call if c is call else c for c in record.calls)
    (check,) = reverify(msgspec.structs.replace(record, calls=calls))
    assert not check.agrees
    assert check.verdict is Verdict.CONTINUE  # the first refusal of a budget of two
    assert "BINDING_LEDGER_DIGEST_MISMATCH" in check.reason_codes
    # A recorded verdict changed after the fact.
    (submission,) = record.submissions
    flipped = msgspec.structs.replace(submission, verdict=Verdict.CONTINUE)
    (check,) = reverify(msgspec.structs.replace(record, submissions=(flipped,)))
    assert not check.agrees
    assert check.verdict is Verdict.COMPLETE
