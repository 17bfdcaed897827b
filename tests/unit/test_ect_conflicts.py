"""A ledger never contradicts itself: two receipts of one call, one response and one value path
that disagree make it conflicting, wherever they sit and whether or not they are cited."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from harness import ect
from harness.ect import ReasonCode as R
from harness.examples import Example, regional_sum

replace = msgspec.structs.replace


def _bound(ex: Example, receipts: list[ect.Receipt], **claim0: object) -> Example:
    ledger = replace(ex.ledger, receipts=tuple(receipts))
    claims = list(ex.certificate.claims)
    if claim0:
        claims[0] = replace(claims[0], **claim0)
    cert = replace(ex.certificate, ledger_digest=ect.ledger_digest(receipts), claims=tuple(claims))
    return ex._replace(ledger=ledger, certificate=cert)


def _forged_copy(receipt: ect.Receipt, value: object) -> ect.Receipt:
    """A second record of the same call, response and path with another (self-consistent) value."""
    return replace(
        receipt, receipt_id=receipt.receipt_id + "b", value=value, value_hash=ect.value_hash(value)
    )


def _cite(ex: Example, evidence: tuple[str, ...], total: int) -> Example:
    claims = ex.certificate.claims
    cited = (
        replace(claims[0], evidence=evidence, value=total),
        replace(claims[1], evidence=evidence),
    )
    return ex._replace(certificate=replace(ex.certificate, claims=cited))


def test_the_audited_forgery_is_refused() -> None:
    # r1 (120) and r1b (500): same call, response hash and path; the certificate cites r1b.
    ex = regional_sum()
    r1, r2, r3 = ex.ledger.receipts
    forged = _forged_copy(r1, 500)
    cited = ("r1b", "r2", "r3")
    decision = ect.verify(*_cite(_bound(ex, [r1, r2, r3, forged]), cited, 500 + 75 + 98))
    assert decision.decision is ect.Verdict.CONTINUE
    assert decision.reason_codes == (
        R.COVERAGE_CONFLICTING_RECEIPTS,
        R.REPLAY_EVIDENCE_UNAVAILABLE,
    )
    # The same certificate over a ledger holding only the forged copy passes: the refusal is
    # the conflict, nothing else about the certificate.
    assert ect.verify(*_cite(_bound(ex, [forged, r2, r3]), cited, 500 + 75 + 98))


@pytest.mark.parametrize(
    "change",
    [
        {"value": 500, "value_hash": ect.value_hash(500)},
        {"value": 120.0, "value_hash": ect.value_hash(120.0)},  # same number, other record
        {"value_hash": ect.value_hash(500)},
        {"exec_status": "error"},
        {"validation": "unvalidated"},
        {"scope": ect.Scope(entity="site-a", attribute="visits", level="site", date="2024-04")},
        {"tool_id": "get_series"},
    ],
    ids=["value", "float-copy", "value-hash", "status", "validation", "scope", "tool"],
)
def test_any_disagreement_conflicts_even_when_nothing_cites_it(change: dict[str, object]) -> None:
    ex = regional_sum()
    r1 = ex.ledger.receipts[0]
    twin = replace(r1, receipt_id="r1b", **change)
    for position in range(4):  # before, between and after the honest receipts
        receipts = list(ex.ledger.receipts)
        receipts.insert(position, twin)
        decision = ect.verify(*_bound(ex, receipts))
        assert decision.reason_codes[0] is R.COVERAGE_CONFLICTING_RECEIPTS, position
        assert R.COVERAGE_CONFLICTING_RECEIPTS in decision.reason_codes


def test_agreeing_copies_and_other_calls_are_not_conflicts() -> None:
    ex = regional_sum()
    r1 = ex.ledger.receipts[0]
    # The same record under another id agrees with it: not a conflict (citing both would be a
    # duplicate scope, which the scope check owns).
    same = replace(r1, receipt_id="r1b")
    assert ect.verify(*_bound(ex, [*ex.ledger.receipts, same]))
    # Another call (or another path) with another value is different evidence, not a conflict:
    # the paper's T1 case, left to the scope and replay checks.
    other_call = replace(_forged_copy(r1, 500), call_id="c9")
    other_path = replace(_forged_copy(r1, 500), source_path="/body/other")
    for extra in (other_call, other_path):
        decision = ect.verify(*_bound(ex, [*ex.ledger.receipts, extra]))
        assert decision, decision.reason_codes


def test_three_copies_report_each_disagreeing_one() -> None:
    ex = regional_sum()
    r1 = ex.ledger.receipts[0]
    copies = [_forged_copy(r1, v) for v in (500, 501)]
    copies[1] = replace(copies[1], receipt_id="r1c")
    for order in itertools.permutations([*ex.ledger.receipts, *copies]):
        decision = ect.verify(*_bound(ex, list(order)))
        found = [f for f in decision.findings if f.code is R.COVERAGE_CONFLICTING_RECEIPTS]
        assert len(found) == 2
        assert R.REPLAY_EVIDENCE_UNAVAILABLE in decision.reason_codes  # r1 itself is ambiguous
