"""One test per reason code that triggers it (and, where the design allows, only it)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from harness import ect
from harness.canonical import Domain, digest
from harness.ect import ReasonCode as R
from harness.ect.transforms import AllNull, ArgMax, Identity, Max, Ratio, Sum
from harness.examples import Example, regional_sum

replace = msgspec.structs.replace
Case = tuple[Example | None, Callable[[], ect.Decision] | None]


def _ex() -> Example:
    return regional_sum()


def _with_receipt(ex: Example, index: int, **changes: object) -> Example:
    """Replace receipt ``index`` and re-bind the certificate to the new ledger."""
    receipts = list(ex.ledger.receipts)
    receipts[index] = replace(receipts[index], **changes)
    return _with_receipts(ex, receipts)


def _with_receipts(ex: Example, receipts: list[ect.Receipt]) -> Example:
    ledger = replace(ex.ledger, receipts=tuple(receipts))
    cert = replace(ex.certificate, ledger_digest=ect.ledger_digest(receipts))
    return ex._replace(ledger=ledger, certificate=cert)


def _with_claim(ex: Example, index: int, **changes: object) -> Example:
    claims = list(ex.certificate.claims)
    claims[index] = replace(claims[index], **changes)
    return ex._replace(certificate=replace(ex.certificate, claims=tuple(claims)))


def _with_slot(ex: Example, index: int, **changes: object) -> Example:
    slots = list(ex.requirements.slots)
    slots[index] = replace(slots[index], **changes)
    return ex._replace(requirements=replace(ex.requirements, slots=tuple(slots)))


def _with_value(ex: Example, index: int, value: object) -> Example:
    return _with_receipt(ex, index, value=value, value_hash=ect.value_hash(value))


def _json(ex: Example) -> list[bytes]:
    return [msgspec.json.encode(part) for part in ex]


def _decode_case(part: int, data: bytes) -> ect.Decision:
    parts: list[bytes | None] = list(_json(_ex()))
    parts[part] = data
    return ect.verify_json(*parts)  # type: ignore[arg-type]


ANSWER: dict[str, object] = {"total_visits": 293, "busiest_site": "site-a"}


def _decode_case_answer(answer: bytes) -> ect.Decision:
    return ect.verify_json(*_json(_ex()), answer=answer)


def _extra_slot() -> Example:
    ex = _ex()
    extra = replace(ex.certificate.claims[0], slot="bonus")
    return ex._replace(certificate=replace(ex.certificate, claims=(*ex.certificate.claims, extra)))


def _duplicate_slot() -> Example:
    ex = _ex()
    claims = (*ex.certificate.claims, ex.certificate.claims[0])
    return ex._replace(certificate=replace(ex.certificate, claims=claims))


def _duplicate_receipt() -> Example:
    ex = _ex()
    return _with_receipts(ex, [*ex.ledger.receipts, ex.ledger.receipts[0]])


def _conflicting_receipt() -> Example:
    ex = _ex()
    spare = replace(ex.ledger.receipts[2], receipt_id="r9")
    other = replace(spare, call_id="c99")
    return _with_receipts(ex, [*ex.ledger.receipts, spare, other])


def _conflicting_receipts() -> Example:
    # Another record of r3's call, response and path, with another value; nothing cites it.
    ex = _ex()
    forged = replace(
        ex.ledger.receipts[2], receipt_id="r3b", value=500, value_hash=ect.value_hash(500)
    )
    ex = _with_receipts(ex, [*ex.ledger.receipts, forged])
    # r3 is now ambiguous too, so the claims citing it cannot replay.
    return ex


def _scope_duplicate() -> Example:
    ex = _ex()
    twin = replace(ex.ledger.receipts[2], receipt_id="r4", call_id="c4")
    ex = _with_receipts(ex, [*ex.ledger.receipts, twin])
    return _with_claim(ex, 0, evidence=("r1", "r3", "r4"), value=120 + 98 + 98)


def _ratio_by_zero() -> Example:
    ex = _with_value(_ex(), 1, 0)
    ratio = Ratio(key="entity", numerator="site-a", denominator="site-b")
    ex = _with_slot(ex, 0, transforms=(ratio,), min_evidence=2, max_evidence=2)
    return _with_claim(ex, 0, transform=ratio, evidence=("r1", "r2"), value=0)


def _identity_of_null() -> Example:
    ex = _with_value(_ex(), 0, None)
    ex = _with_slot(ex, 0, transforms=(Identity(),), min_evidence=1, max_evidence=1)
    ex = _with_claim(ex, 0, transform=Identity(), evidence=("r1",), value=None)
    ex = _with_slot(ex, 1, min_evidence=2)
    return _with_claim(ex, 1, evidence=("r2", "r3"), value="site-c")  # the non-null receipts


def _null_abstention_of_values() -> Example:
    ex = _with_slot(_ex(), 0, transforms=(AllNull(),), nullable=True)
    return _with_claim(ex, 0, transform=AllNull(), value=None)


# name -> (build the example or the decision, the exact expected code set)
CASES: dict[str, tuple[Callable[[], Example | ect.Decision], set[R]]] = {
    "descriptor-malformed": (
        lambda: _decode_case(0, b'{"task_id": "t"}'),
        {R.ADAPTER_DESCRIPTOR_MALFORMED},
    ),
    "requirements-extra-field": (
        lambda: _decode_case(1, _json(_ex())[1][:-1] + b',"trust_me":true}'),
        {R.ADAPTER_REQUIREMENTS_MALFORMED},
    ),
    "ledger-bad-status": (
        lambda: _decode_case(2, _json(_ex())[2].replace(b'"ok"', b'"maybe"', 1)),
        {R.ADAPTER_LEDGER_MALFORMED},
    ),
    "certificate-duplicate-key": (
        lambda: _decode_case(3, b'{"task_id":"a","task_id":"b"}'),
        {R.ADAPTER_CERTIFICATE_MALFORMED},
    ),
    "certificate-missing": (
        lambda: ect.verify(*_ex()[:3], None),
        {R.ADAPTER_CERTIFICATE_MISSING, R.COVERAGE_NO_CLAIMS},
    ),
    "input-too-large": (
        lambda: _decode_case(3, b" " * (ect.MAX_INPUT_BYTES + 1)),
        {R.ADAPTER_INPUT_TOO_LARGE},
    ),
    "contract-mismatch": (
        lambda: _ex()._replace(
            requirements=replace(_ex().requirements, descriptor_digest=digest(Domain.VALUE, 1))
        ),
        {R.ADAPTER_CONTRACT_MISMATCH},
    ),
    "descriptor-digest": (
        lambda: _ex()._replace(
            certificate=replace(_ex().certificate, descriptor_digest=digest(Domain.VALUE, 1))
        ),
        {R.ADAPTER_DESCRIPTOR_DIGEST_MISMATCH},
    ),
    "task-id": (
        lambda: _ex()._replace(certificate=replace(_ex().certificate, task_id="other")),
        {R.BINDING_TASK_ID_MISMATCH},
    ),
    "ledger-task": (
        lambda: _ex()._replace(ledger=replace(_ex().ledger, task_id="other")),
        {R.BINDING_LEDGER_TASK_MISMATCH},
    ),
    "ledger-digest": (
        lambda: _ex()._replace(
            certificate=replace(_ex().certificate, ledger_digest=digest(Domain.LEDGER, []))
        ),
        {R.BINDING_LEDGER_DIGEST_MISMATCH},
    ),
    "duplicate-receipt": (_duplicate_receipt, {R.COVERAGE_DUPLICATE_RECEIPT_ID}),
    "conflicting-receipt": (_conflicting_receipt, {R.COVERAGE_CONFLICTING_RECEIPT_ID}),
    "conflicting-receipts": (
        _conflicting_receipts,
        {R.COVERAGE_CONFLICTING_RECEIPTS, R.REPLAY_EVIDENCE_UNAVAILABLE},
    ),
    "no-claims": (
        lambda: _ex()._replace(certificate=replace(_ex().certificate, claims=())),
        {R.COVERAGE_NO_CLAIMS, R.COVERAGE_MISSING_SLOT},
    ),
    "missing-slot": (
        lambda: _ex()._replace(
            certificate=replace(_ex().certificate, claims=_ex().certificate.claims[:1])
        ),
        {R.COVERAGE_MISSING_SLOT},
    ),
    "extra-slot": (_extra_slot, {R.COVERAGE_EXTRA_SLOT}),
    "duplicate-slot": (_duplicate_slot, {R.COVERAGE_DUPLICATE_SLOT}),
    "evidence-empty": (
        lambda: _with_claim(_ex(), 0, evidence=()),
        {R.EVIDENCE_EMPTY, R.SCOPE_CARDINALITY, R.REPLAY_ARITY},
    ),
    "duplicate-citation": (
        lambda: _with_claim(_ex(), 0, evidence=("r1", "r2", "r3", "r1")),
        {R.EVIDENCE_DUPLICATE_CITATION, R.SCOPE_CARDINALITY},
    ),
    "receipt-absent": (
        lambda: _with_claim(_ex(), 0, evidence=("r1", "r2", "r404")),
        {R.EVIDENCE_RECEIPT_ABSENT, R.REPLAY_EVIDENCE_UNAVAILABLE},
    ),
    "foreign-task": (
        lambda: _with_receipt(_ex(), 2, task_id="other-task"),
        {R.EVIDENCE_FOREIGN_TASK},
    ),
    "value-hash": (
        lambda: _with_receipt(_ex(), 2, value_hash=ect.value_hash(97)),
        {R.EVIDENCE_VALUE_HASH_MISMATCH},
    ),
    "unsuccessful": (
        lambda: _with_receipt(_ex(), 2, exec_status="error"),
        {R.EVIDENCE_UNSUCCESSFUL},
    ),
    "unvalidated": (
        lambda: _with_receipt(_ex(), 2, validation="unvalidated"),
        {R.EVIDENCE_UNVALIDATED},
    ),
    "cardinality": (
        lambda: _with_slot(_ex(), 0, min_evidence=4, max_evidence=4),
        {R.SCOPE_CARDINALITY},
    ),
    "entity": (
        lambda: _with_receipt(
            _ex(), 2, scope=replace(_ex().ledger.receipts[2].scope, entity="site-z")
        ),
        {R.SCOPE_ENTITY},
    ),
    "attribute": (
        lambda: _with_receipt(
            _ex(), 2, scope=replace(_ex().ledger.receipts[2].scope, attribute="revenue")
        ),
        {R.SCOPE_ATTRIBUTE},
    ),
    "level": (
        lambda: _with_receipt(
            _ex(), 2, scope=replace(_ex().ledger.receipts[2].scope, level="district")
        ),
        {R.SCOPE_LEVEL},
    ),
    "date": (
        lambda: _with_receipt(
            _ex(), 2, scope=replace(_ex().ledger.receipts[2].scope, date="2024-02")
        ),
        {R.SCOPE_DATE},
    ),
    "undated-not-listed": (
        lambda: _with_receipt(_ex(), 2, scope=replace(_ex().ledger.receipts[2].scope, date=None)),
        {R.SCOPE_DATE},
    ),
    "scope-duplicate": (_scope_duplicate, {R.SCOPE_DUPLICATE}),
    "transform-not-allowed": (
        lambda: _with_claim(_ex(), 0, transform=Max(), value=120),
        {R.TRANSFORM_NOT_ALLOWED},
    ),
    "transform-params": (
        lambda: _with_slot(_ex(), 1, transforms=(ArgMax(key="date"),)),
        {R.TRANSFORM_PARAMS_MISMATCH},
    ),
    "replay-unavailable": (
        lambda: ect.verify(
            *_with_claim(_ex(), 0, evidence=("r1", "r2", "r404")),
            disabled={ect.Check.REFERENCE},
        ),
        {R.REPLAY_EVIDENCE_UNAVAILABLE},
    ),
    "replay-arity": (
        lambda: _with_claim(
            _with_slot(_ex(), 0, transforms=(Sum(), Identity())), 0, transform=Identity()
        ),
        {R.REPLAY_ARITY},
    ),
    "replay-type": (lambda: _with_value(_ex(), 2, "98"), {R.REPLAY_TYPE_ERROR}),
    "replay-null-input": (lambda: _with_value(_ex(), 2, None), {R.REPLAY_NULL_INPUT}),
    "replay-not-all-null": (_null_abstention_of_values, {R.REPLAY_NOT_ALL_NULL}),
    "replay-undefined": (_ratio_by_zero, {R.REPLAY_UNDEFINED}),
    "replay-null-not-allowed": (_identity_of_null, {R.REPLAY_NULL_NOT_ALLOWED}),
    "replay-value": (lambda: _with_claim(_ex(), 0, value=294), {R.REPLAY_VALUE_MISMATCH}),
    "answer-malformed": (
        lambda: _decode_case_answer(b'["total_visits", 293]'),
        {R.ADAPTER_ANSWER_MALFORMED},
    ),
    "answer-extra-slot": (
        lambda: ect.verify(*_ex(), answer={**ANSWER, "bonus": 1}),
        {R.COVERAGE_ANSWER_SLOT},
    ),
    "answer-missing-slot": (
        lambda: ect.verify(*_ex(), answer={"total_visits": 293}),
        {R.COVERAGE_ANSWER_SLOT},
    ),
    "answer-value": (
        lambda: ect.verify(*_ex(), answer={**ANSWER, "total_visits": 290}),
        {R.REPLAY_ANSWER_MISMATCH},
    ),
    "answer-bool-for-int": (
        lambda: ect.verify(*_ex(), answer={**ANSWER, "total_visits": True}),
        {R.REPLAY_ANSWER_MISMATCH},
    ),
    "answer-string-for-int": (
        lambda: ect.verify(*_ex(), answer={**ANSWER, "total_visits": "293"}),
        {R.REPLAY_ANSWER_MISMATCH},
    ),
    "source-tool": (
        lambda: _with_receipt(_ex(), 2, tool_id="get_series"),
        {R.SCOPE_TOOL},
    ),
    "source-path": (
        lambda: _with_receipt(_ex(), 2, source_path="/body/nonsense"),
        {R.SCOPE_SOURCE_PATH},
    ),
    "internal": (
        lambda: ect.verify(_ex().descriptor, _ex().requirements, None, _ex().certificate),  # type: ignore[arg-type]
        {R.INTERNAL_ERROR},
    ),
}


def _decide(build: Callable[[], Example | ect.Decision]) -> ect.Decision:
    built = build()
    return built if isinstance(built, ect.Decision) else ect.verify(*built)


def test_example_is_complete() -> None:
    decision = ect.verify(*_ex())
    assert decision.decision is ect.Verdict.COMPLETE
    assert decision.reason_codes == ()
    assert bool(decision)


def test_example_with_its_certified_answer_is_complete() -> None:
    assert ect.verify(*_ex(), answer=ANSWER)
    assert ect.verify_json(*_json(_ex()), answer=msgspec.json.encode(ANSWER))


def test_answer_mismatch_names_the_slot() -> None:
    decision = ect.verify(*_ex(), answer={**ANSWER, "busiest_site": "site-b"})
    (finding,) = decision.findings
    assert (finding.code, finding.path) == (R.REPLAY_ANSWER_MISMATCH, "answer.busiest_site")
    assert (finding.expected, finding.got) == ('"site-a"', '"site-b"')
    assert [c.codes for c in decision.claims] == [(), (R.REPLAY_ANSWER_MISMATCH,)]


def test_answer_within_the_contract_tolerance_is_the_certified_one() -> None:
    # total_visits allows rel_tol 1e-9: an answer within it is the certified value.
    ex = _with_slot(_ex(), 0, abs_tol=0.5)
    assert ect.verify(*ex, answer={**ANSWER, "total_visits": 293})
    assert not ect.verify(*ex, answer={**ANSWER, "total_visits": 294})


def test_answer_is_checked_against_the_replayed_value_too() -> None:
    # The claim drifts within tolerance of replay; the answer drifts again from the claim:
    # both are compared with the replayed value, so tolerance cannot compound.
    ex = _with_slot(_ex(), 0, abs_tol=1.0)
    ex = _with_claim(ex, 0, value=294)
    assert ect.verify(*ex)
    assert ect.verify(*ex, answer={**ANSWER, "total_visits": 294})
    decision = ect.verify(*ex, answer={**ANSWER, "total_visits": 295})
    assert decision.reason_codes == (R.REPLAY_ANSWER_MISMATCH,)


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_reason_code_case(name: str) -> None:
    build, expected = CASES[name]
    decision = _decide(build)
    assert decision.decision is ect.Verdict.CONTINUE
    assert set(decision.reason_codes) == expected
    assert not decision


def test_every_reason_code_has_a_case() -> None:
    covered = set().union(*(codes for _, codes in CASES.values()))
    assert covered == set(R)


def test_findings_name_path_expected_got() -> None:
    decision = ect.verify(*_with_claim(_ex(), 0, value=294))
    (finding,) = decision.findings
    assert finding.path == "$.claims[0].value"
    assert (finding.expected, finding.got) == ("293", "294")
    assert [c.passed for c in decision.claims] == [False, True]
