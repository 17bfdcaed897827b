"""Properties of the policies over the static grid and arbitrary messages."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.benchmark.build import benchmark
from harness.ect import ReasonCode, Verdict
from harness.policies import (
    Ablation,
    CompletionToken,
    EctPolicy,
    PermissiveHeuristic,
    PolicyReason,
    SelfCheck,
)
from harness.policies.signals import trailing_repeats
from harness.worlds import Snapshot

STATIC = st.sampled_from(benchmark().static)
_VERIFIER = frozenset(code.value for code in ReasonCode)


def _verifier_codes(codes: tuple[str, ...]) -> set[str]:
    return {c for c in codes if c in _VERIFIER}


@settings(max_examples=200, deadline=None)
@given(snapshot=STATIC, ablation=st.sampled_from(list(Ablation)))
def test_removing_a_check_never_rejects_more(snapshot: Snapshot, ablation: Ablation) -> None:
    view = snapshot.view()
    full = EctPolicy().decide(view)
    ablated = EctPolicy(ablation).decide(view)
    if full.decision is Verdict.COMPLETE:
        assert ablated.decision is Verdict.COMPLETE
    assert _verifier_codes(ablated.reason_codes) <= _verifier_codes(full.reason_codes)
    if ablation is Ablation.RECOVERY_CHECK:
        # Only the stagnation rule differs: a recoverable stagnation becomes stuck.
        assert _verifier_codes(ablated.reason_codes) == _verifier_codes(full.reason_codes)
        if PolicyReason.RECOVERY_AVAILABLE.value in full.reason_codes:
            assert ablated.decision is Verdict.STUCK
            assert ablated.reason_codes[-1] == PolicyReason.RECOVERY_CHECK_ABLATED.value
        else:
            assert ablated == full


@settings(max_examples=100, deadline=None)
@given(snapshot=STATIC)
def test_ect_never_completes_a_fault_snapshot_and_always_the_clean_one(snapshot: Snapshot) -> None:
    decided = EctPolicy().decide(snapshot.view())
    assert (decided.decision is Verdict.COMPLETE) == (snapshot.fault == "C0")
    assert decided.decision is not Verdict.STUCK  # every stagnation in the grid is recoverable


@settings(max_examples=200, deadline=None)
@given(snapshot=STATIC, text=st.text(max_size=200))
def test_message_tokens_drive_the_weak_signals(snapshot: Snapshot, text: str) -> None:
    view = snapshot.view()
    with_done = msgspec.structs.replace(view, message=text + "\nDONE")
    assert CompletionToken().decide(with_done).decision is Verdict.COMPLETE
    without = msgspec.structs.replace(
        view, message=text.replace("DONE", "").replace("APPROVED", "")
    )
    assert CompletionToken().decide(without).decision is Verdict.CONTINUE
    assert SelfCheck().decide(without).decision is Verdict.CONTINUE
    approved = msgspec.structs.replace(view, message=text + "\nSelf-check: APPROVED")
    assert SelfCheck().decide(approved).decision is Verdict.COMPLETE


@settings(max_examples=200, deadline=None)
@given(snapshot=STATIC, extra=st.text(min_size=1, max_size=80))
def test_heuristic_is_monotone_in_message_length(snapshot: Snapshot, extra: str) -> None:
    view = snapshot.view()
    longer = msgspec.structs.replace(view, message=view.message + extra)
    if PermissiveHeuristic().decide(view).decision is Verdict.COMPLETE:
        assert PermissiveHeuristic().decide(longer).decision is Verdict.COMPLETE


@settings(max_examples=100, deadline=None)
@given(snapshot=STATIC, k=st.integers(min_value=1, max_value=5))
def test_trailing_repeats_counts_appended_copies(snapshot: Snapshot, k: int) -> None:
    trace = snapshot.trace
    repeated = (*trace, *([trace[-1]] * k))
    assert trailing_repeats(repeated) == trailing_repeats(trace) + k
