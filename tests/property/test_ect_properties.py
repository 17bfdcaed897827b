"""Hypothesis: verifier totality, mutation sensitivity, ledger digest invariance."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import conftest
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import ect
from harness.ect.transforms import ArgMax, ArgMin, Max, Mean, Min, Sum, TopK, values_match
from harness.examples import regional_sum

replace = msgspec.structs.replace
EX = regional_sum()
PARTS = [msgspec.json.encode(p) for p in EX]

json_values = conftest.json_values(conftest.json_scalars(integers=(-(2**63), 2**63)), leaves=20)


@given(json_values)
def test_arbitrary_json_certificate_never_completes(value: Any) -> None:
    decision = ect.verify_json(PARTS[0], PARTS[1], PARTS[2], msgspec.json.encode(value))
    assert decision.decision is ect.Verdict.CONTINUE
    assert decision.reason_codes


@given(st.binary(max_size=256))
def test_arbitrary_bytes_certificate_never_completes(data: bytes) -> None:
    decision = ect.verify_json(PARTS[0], PARTS[1], PARTS[2], data)
    assert decision.decision is ect.Verdict.CONTINUE


@given(
    st.dictionaries(
        st.sampled_from(["task_id", "claims", "x", "ledger_digest"]), json_values, min_size=1
    )
)
def test_certificate_shaped_junk_never_completes(junk: dict[str, Any]) -> None:
    base = msgspec.to_builtins(EX.certificate)
    if all(base.get(key) == value for key, value in junk.items()):
        return  # the draw reproduced the original fields; nothing was changed
    base.update(junk)
    decision = ect.verify_json(PARTS[0], PARTS[1], PARTS[2], msgspec.json.encode(base))
    assert decision.decision is ect.Verdict.CONTINUE


def _claim_mutations() -> st.SearchStrategy[tuple[int, dict[str, Any]]]:
    index = st.integers(min_value=0, max_value=len(EX.certificate.claims) - 1)
    receipt_ids = [r.receipt_id for r in EX.ledger.receipts]
    other_value = json_values.filter(lambda v: v not in (293, 293.0, "site-a"))
    evidence = st.lists(st.sampled_from([*receipt_ids, "r404"]), max_size=5).map(tuple)
    transform = st.sampled_from(
        [
            Sum(),
            Mean(),
            Min(),
            Max(),
            ArgMin(key="entity"),
            ArgMax(key="date"),
            TopK(key="entity", k=1, order="desc"),
        ]
    )
    return st.tuples(
        index,
        st.one_of(
            other_value.map(lambda v: {"value": v}),
            evidence.filter(lambda e: sorted(e) != receipt_ids).map(lambda e: {"evidence": e}),
            transform.map(lambda t: {"transform": t}),
        ),
    )


@given(_claim_mutations())
def test_any_single_claim_mutation_yields_continue(mutation: tuple[int, dict[str, Any]]) -> None:
    index, change = mutation
    claims = list(EX.certificate.claims)
    claims[index] = replace(claims[index], **change)
    if claims[index] == EX.certificate.claims[index]:
        return  # the draw reproduced the original claim; nothing was mutated
    cert = replace(EX.certificate, claims=tuple(claims))
    assert ect.verify(EX.descriptor, EX.requirements, EX.ledger, cert).decision == "continue"


@given(
    st.sampled_from(["task_id", "descriptor_digest", "ledger_digest"]),
    st.text(min_size=1, max_size=20) | st.from_regex(r"\Ablake3:[0-9a-f]{64}\Z"),
)
def test_any_binding_field_mutation_yields_continue(field: str, value: str) -> None:
    if getattr(EX.certificate, field) == value:
        return
    cert = replace(EX.certificate, **{field: value})
    assert not ect.verify(EX.descriptor, EX.requirements, EX.ledger, cert)


@given(st.permutations(list(EX.ledger.receipts)))
def test_ledger_digest_ignores_receipt_order(receipts: list[ect.Receipt]) -> None:
    assert ect.ledger_digest(receipts) == ect.ledger_digest(EX.ledger.receipts)
    ledger = replace(EX.ledger, receipts=tuple(receipts))
    assert ect.verify(EX.descriptor, EX.requirements, ledger, EX.certificate)


_RECEIPT_FIELDS = ["receipt_id", "task_id", "call_id", "tool_id", "source_path"]


@settings(max_examples=60)
@given(
    st.integers(min_value=0, max_value=len(EX.ledger.receipts) - 1),
    st.sampled_from([*_RECEIPT_FIELDS, "value", "exec_status", "validation", "entity", "date"]),
)
def test_ledger_digest_changes_under_any_receipt_change(index: int, field: str) -> None:
    receipt = EX.ledger.receipts[index]
    if field in _RECEIPT_FIELDS:
        changed = replace(receipt, **{field: getattr(receipt, field) + "x"})
    elif field == "value":
        changed = replace(receipt, value=receipt.value + 1)
    elif field == "exec_status":
        changed = replace(receipt, exec_status="error")
    elif field == "validation":
        changed = replace(receipt, validation="unvalidated")
    else:
        changed = replace(receipt, scope=replace(receipt.scope, **{field: "elsewhere"}))
    receipts = list(EX.ledger.receipts)
    receipts[index] = changed
    assert ect.ledger_digest(receipts) != ect.ledger_digest(EX.ledger.receipts)
    ledger = replace(EX.ledger, receipts=tuple(receipts))
    # The certificate was bound to the old ledger, so it no longer binds.
    decision = ect.verify(EX.descriptor, EX.requirements, ledger, EX.certificate)
    assert ect.ReasonCode.BINDING_LEDGER_DIGEST_MISMATCH in decision.reason_codes


@given(st.sets(st.sampled_from(list(ect.Check))))
def test_disabling_checks_never_raises(disabled: set[ect.Check]) -> None:
    decision = ect.verify(*EX, disabled=disabled)
    assert decision.decision in (ect.Verdict.COMPLETE, ect.Verdict.CONTINUE)
    assert all(ect.check_of(c) not in disabled for c in decision.reason_codes)


# ---------------------------------------------------------------------------------------------
# Numbers compare exactly (integers as integers; tolerance only where the contract gives it).

big_ints = st.integers(min_value=-(2**70), max_value=2**70)


def _sum_example(
    values: Sequence[int | float], *, abs_tol: float = 0.0, rel_tol: float = 0.0
) -> Any:
    """The worked example with receipt values ``values`` (three sites) and the total slot's
    tolerance set; the certificate is re-bound to the new ledger."""
    receipts = tuple(
        replace(r, value=v, value_hash=ect.value_hash(v))
        for r, v in zip(EX.ledger.receipts, values, strict=True)
    )
    first = replace(EX.requirements.slots[0], abs_tol=abs_tol, rel_tol=rel_tol)
    slots = (first, *EX.requirements.slots[1:])
    ledger = replace(EX.ledger, receipts=receipts)
    certificate = replace(EX.certificate, ledger_digest=ect.ledger_digest(receipts))
    return EX._replace(
        requirements=replace(EX.requirements, slots=slots), ledger=ledger, certificate=certificate
    )


def _claim_total(ex: Any, total: Any) -> Any:
    claims = (replace(ex.certificate.claims[0], value=total), *ex.certificate.claims[1:])
    return ex._replace(certificate=replace(ex.certificate, claims=claims))


def _busiest(values: Sequence[int | float]) -> str:
    sites = [r.scope.entity for r in EX.ledger.receipts]
    return sorted(zip(values, sites, strict=True), key=lambda p: (-p[0], p[1]))[0][1]


@given(values=st.lists(big_ints, min_size=3, max_size=3), delta=big_ints)
@settings(max_examples=300)
def test_integer_sums_compare_as_integers(values: list[int], delta: int) -> None:
    ex = _sum_example(values)
    ex = ex._replace(
        certificate=replace(
            ex.certificate,
            claims=(
                ex.certificate.claims[0],
                replace(ex.certificate.claims[1], value=_busiest(values)),
            ),
        )
    )
    total = sum(values)
    assert ect.verify(*_claim_total(ex, total))
    # Any other integer is refused, however large the numbers; a float stands for the total
    # exactly when its value is the total (not when it is merely the nearest double:
    # 2**53 + 1 + 75 + 99 -> ...168.0).
    if delta:
        assert not ect.verify(*_claim_total(ex, total + delta))
    try:
        as_float = float(total)
    except OverflowError:
        return  # no double holds it
    decision = ect.verify(*_claim_total(ex, as_float))
    if int(as_float) == total:
        assert decision, decision.reason_codes
    else:
        assert decision.reason_codes == (ect.ReasonCode.REPLAY_VALUE_MISMATCH,)


def test_the_reported_rounding_case_is_refused() -> None:
    values = [2**53 + 1, 75, 99]
    ex = _sum_example(values)
    ex = ex._replace(
        certificate=replace(
            ex.certificate,
            claims=(
                ex.certificate.claims[0],
                replace(ex.certificate.claims[1], value=_busiest(values)),
            ),
        )
    )
    assert ect.verify(*_claim_total(ex, 9007199254741167))
    assert not ect.verify(*_claim_total(ex, 9007199254741168.0))
    assert not ect.verify(*_claim_total(ex, 9007199254741168))


@given(zero=st.sampled_from([0.0, -0.0]), tol=st.sampled_from([0.0, 0.5, 1e-9]))
def test_a_zero_total_is_zero_whatever_its_json_type(zero: float, tol: float) -> None:
    ex = _sum_example([0, 0, 0], abs_tol=tol)
    ex = ex._replace(
        certificate=replace(
            ex.certificate,
            claims=(
                ex.certificate.claims[0],
                replace(ex.certificate.claims[1], value=_busiest([0, 0, 0])),
            ),
        )
    )
    assert ect.verify(*_claim_total(ex, 0))
    assert ect.verify(*_claim_total(ex, zero))
    assert not ect.verify(*_claim_total(ex, False))


@given(
    values=st.lists(
        st.floats(min_value=-1e12, max_value=1e12, allow_nan=False) | big_ints,
        min_size=3,
        max_size=3,
    ),
    claimed=st.floats(allow_nan=False, allow_infinity=True) | big_ints,
    abs_tol=st.sampled_from([0.0, 1e-9, 0.5, 2.0]),
    rel_tol=st.sampled_from([0.0, 1e-12, 1e-6]),
)
@settings(max_examples=400)
def test_mixed_numbers_match_exactly_within_the_contract_tolerance(
    values: list[int | float], claimed: int | float, abs_tol: float, rel_tol: float
) -> None:
    if all(type(v) is int for v in values):
        replayed: int | float = sum(values)
    else:
        replayed = math.fsum(values)
    got = values_match(claimed, replayed, abs_tol, rel_tol)
    if isinstance(claimed, float) and not math.isfinite(claimed):
        assert not got
        return
    exact = abs(Fraction(claimed) - Fraction(replayed)) <= max(
        Fraction(abs_tol), Fraction(rel_tol) * abs(Fraction(replayed))
    )
    assert got is exact
    if abs_tol == 0.0 and rel_tol == 0.0:
        assert got is (claimed == replayed)
