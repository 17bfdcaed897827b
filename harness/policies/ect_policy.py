"""ECT as a termination policy: the verifier, then a recovery check; and its ablated variants.

Decision rule:

1. Run the verifier (paper Algorithm 1) on the view's descriptor, contract, ledger and
   certificate, and the answer the agent reports (when the view has one): ``complete`` iff every
   enabled check passes and the answer is the certified one (no certificate is ``continue``).
2. Otherwise apply the recovery check. When the trace ends with the same failing request
   issued ``STAGNATION_REPEATS`` or more times in a row, the agent is stagnating:
   - a recovery is available (``view.recovery``): ``continue`` with ``RECOVERY_AVAILABLE`` -
     verifier failure alone never proves that recovery is impossible;
   - no recovery is known: ``stuck`` with ``RECOVERY_UNAVAILABLE``.
3. Otherwise ``continue`` with every verifier reason code.

Single-check ablations (``Ablation``) switch one check family off at a time. The mapping from
the paper's check names to the verifier's switchable ``Check`` values:

======================  =====================  ==============================================
ablation                verifier check(s) off  what stops being checked
======================  =====================  ==============================================
claim coverage          ``COVERAGE``           every required slot claimed once, no extras,
                                               no duplicate or conflicting receipt ids
task/scope              ``SCOPE``              cited receipts' entity, attribute, level, date
                                               and evidence cardinality
outcome/validation      ``OUTCOME``            cited receipts succeeded and were validated
ledger/reference        ``REFERENCE``          cited receipts exist in the ledger, belong to
                                               the task, are intact, are not cited twice
value replay            ``REPLAY``             the closed transform reproduces the value
exact transform         ``TRANSFORM``          the declared transform and exact parameters
                                               are allowed by the contract
recovery check          (none)                 step 2 above: stagnation is ``stuck`` whether
                                               or not a recovery is available
======================  =====================  ==============================================

The adapter and binding checks are never ablated. Nothing here reads gold, fault or split.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from harness.ect.model import Verdict
from harness.ect.verifier import Check, verify
from harness.policies.decision import DecisionSource, PolicyDecision
from harness.policies.reasons import PolicyReason
from harness.policies.signals import trailing_repeats
from harness.policies.view import SnapshotView

__all__ = ["ABLATION_CHECKS", "STAGNATION_REPEATS", "Ablation", "EctPolicy"]

STAGNATION_REPEATS: Final = 2
"""A trace ending with this many identical failing requests in a row is stagnating."""


class Ablation(StrEnum):
    """One check family removed from ECT (the paper's Table 3 rows, in order)."""

    CLAIM_COVERAGE = "claim_coverage"
    TASK_SCOPE = "task_scope"
    OUTCOME_VALIDATION = "outcome_validation"
    LEDGER_REFERENCE = "ledger_reference"
    VALUE_REPLAY = "value_replay"
    EXACT_TRANSFORM = "exact_transform"
    RECOVERY_CHECK = "recovery_check"


ABLATION_CHECKS: Final[Mapping[Ablation, frozenset[Check]]] = MappingProxyType(
    {
        Ablation.CLAIM_COVERAGE: frozenset({Check.COVERAGE}),
        Ablation.TASK_SCOPE: frozenset({Check.SCOPE}),
        Ablation.OUTCOME_VALIDATION: frozenset({Check.OUTCOME}),
        Ablation.LEDGER_REFERENCE: frozenset({Check.REFERENCE}),
        Ablation.VALUE_REPLAY: frozenset({Check.REPLAY}),
        Ablation.EXACT_TRANSFORM: frozenset({Check.TRANSFORM}),
        Ablation.RECOVERY_CHECK: frozenset(),
    }
)
"""The verifier checks each ablation switches off (the recovery check is the policy's own)."""


def _feedback(codes: tuple[str, ...]) -> str:
    return "The certificate does not license complete: " + ", ".join(codes) + "."


class EctPolicy:
    """ECT, or ECT with one check family removed.

    Args:
        ablation: the check family to remove; None for full ECT.
    """

    def __init__(self, ablation: Ablation | None = None) -> None:
        self._ablation = ablation
        self._disabled = frozenset() if ablation is None else ABLATION_CHECKS[ablation]
        self._recovery_check = ablation is not Ablation.RECOVERY_CHECK

    @property
    def ablation(self) -> Ablation | None:
        """The removed check family (None for full ECT)."""
        return self._ablation

    @property
    def name(self) -> str:
        """``ect`` or ``ect-no-<ablation>``."""
        return "ect" if self._ablation is None else f"ect-no-{self._ablation.value}"

    def decide(self, view: SnapshotView) -> PolicyDecision:
        """Verify the certificate, then apply the recovery check (see the module docstring)."""
        verdict = verify(
            view.descriptor,
            view.requirements,
            view.ledger,
            view.certificate,
            answer=view.answer,
            disabled=self._disabled,
        )
        codes = tuple(code.value for code in verdict.reason_codes)
        if verdict.decision is Verdict.COMPLETE:
            return PolicyDecision(
                decision=Verdict.COMPLETE, reason_codes=codes, source=DecisionSource.VERIFIER
            )
        if trailing_repeats(view.trace, failing_only=True) >= STAGNATION_REPEATS:
            if not self._recovery_check:
                return PolicyDecision(
                    decision=Verdict.STUCK,
                    reason_codes=(*codes, PolicyReason.RECOVERY_CHECK_ABLATED.value),
                    source=DecisionSource.VERIFIER,
                )
            if view.recovery.recovery_available:
                return PolicyDecision(
                    decision=Verdict.CONTINUE,
                    reason_codes=(*codes, PolicyReason.RECOVERY_AVAILABLE.value),
                    source=DecisionSource.VERIFIER,
                    feedback=_feedback(codes)
                    + " The same request keeps failing; a different request can obtain the "
                    "missing evidence.",
                )
            return PolicyDecision(
                decision=Verdict.STUCK,
                reason_codes=(*codes, PolicyReason.RECOVERY_UNAVAILABLE.value),
                source=DecisionSource.VERIFIER,
            )
        return PolicyDecision(
            decision=Verdict.CONTINUE,
            reason_codes=codes,
            source=DecisionSource.VERIFIER,
            feedback=_feedback(codes),
        )
