"""Hypothesis: verifier totality, mutation sensitivity, ledger digest invariance."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import ect
from harness.ect.transforms import ArgMax, ArgMin, Max, Mean, Min, Sum, TopK
from harness.examples import regional_sum

replace = msgspec.structs.replace
EX = regional_sum()
PARTS = [msgspec.json.encode(p) for p in EX]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


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
