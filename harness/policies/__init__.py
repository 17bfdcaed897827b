"""Termination policies: who may say an agent is done, stuck, or must continue.

Every policy decides on the same blinded ``SnapshotView`` (``harness.policies.view``: task
identity, question, descriptor, contract, trace, ledger, certificate, answer, message, recovery
state; no benchmark import) and returns a
``PolicyDecision``: complete | continue | stuck, its reason codes, the kind of rule that
decided, and the provider attempts it spent.

======================  ==========================  ===========================================
policy (``name``)       class                       decides by
======================  ==========================  ===========================================
completion_token        ``CompletionToken``         the message carries DONE
self_check              ``SelfCheck``               its checklist line says APPROVED
heuristic               ``PermissiveHeuristic``     final response of >= 40 chars after >= 1 call
critic_core             ``CriticCore`` (async)      fast paths (repeated calls -> stuck; final
                                                    response + DONE -> complete), else model
controller              ``Controller`` (async)      critic core + one-attempt stuck recovery
full_trace_critic       ``FullTraceCritic`` (async) model with the whole trace, seed 2705
postcondition_oracle    ``PostconditionOracle``     answer == gold (NON-DEPLOYABLE reference)
ect / ect-no-<check>    ``EctPolicy``               verifier + recovery check (or an ablation)
======================  ==========================  ===========================================

Only the postcondition oracle sees gold, handed to it separately at construction. No policy
sees split or fault. Provider and parse failures map to ``continue``. This package runs no
study and writes nothing; ``harness.studies`` does.
"""

from harness.policies.completion_token import CompletionToken
from harness.policies.controller import RECOVERY_ATTEMPTS, Controller
from harness.policies.critic_core import STUCK_REPEATS, CriticCore, fast_path
from harness.policies.decision import (
    DecisionSource,
    ModelPolicy,
    Policy,
    PolicyDecision,
    attempt_id,
    view_digest,
)
from harness.policies.ect_policy import ABLATION_CHECKS, STAGNATION_REPEATS, Ablation, EctPolicy
from harness.policies.full_trace_critic import FullTraceCritic
from harness.policies.heuristic import MIN_PRIOR_CALLS, MIN_RESPONSE_CHARS, PermissiveHeuristic
from harness.policies.postcondition import PostconditionOracle
from harness.policies.reasons import PolicyReason
from harness.policies.self_check import SelfCheck
from harness.policies.view import RecoveryState, SnapshotView

__all__ = [
    "ABLATION_CHECKS",
    "MIN_PRIOR_CALLS",
    "MIN_RESPONSE_CHARS",
    "RECOVERY_ATTEMPTS",
    "STAGNATION_REPEATS",
    "STUCK_REPEATS",
    "Ablation",
    "CompletionToken",
    "Controller",
    "CriticCore",
    "DecisionSource",
    "EctPolicy",
    "FullTraceCritic",
    "ModelPolicy",
    "PermissiveHeuristic",
    "Policy",
    "PolicyDecision",
    "PolicyReason",
    "PostconditionOracle",
    "RecoveryState",
    "SelfCheck",
    "SnapshotView",
    "attempt_id",
    "fast_path",
    "view_digest",
]
