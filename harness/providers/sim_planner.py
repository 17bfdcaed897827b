"""The simulated planner: a fallible agent, deterministic from its stream (not a language model).

It reads the planner view (``harness.providers.planner.PlannerView``) and acts the way a
capable but careless tool-using agent does. What it knows: the trusted contract tells it, per
slot, the transform and the exact evidence scopes (every scope of the slot's scope rule), and it
maps a scope to the catalog call that observes it (``children`` -> ``list_children(entity)``; a
dated metric -> ``get_metric(entity, metric, period)``). It computes claimed values with the
closed transform over the receipts it cites. What makes it fallible, each a probability from
``config.simulated.planner`` (``PlannerBehaviour``), drawn per decision from its stream:

1. After a failed call, with evidence still missing: declare ``stuck`` (``stuck_rate``), or
   repeat the failing call unchanged (``repeat_failed_rate``, not when it heeds feedback).
2. With evidence missing: without feedback, propose completion anyway (``premature_rate``),
   re-proposing its checkpoint draft if it has one that was never rejected, else certifying
   from what it has - an exact-scope receipt where one succeeded, otherwise a near miss (the
   same attribute, a failed call or another entity or period), and fewer receipts where there
   is none. After feedback it addresses the gap with ``heed_codes_rate`` (verifier reason
   codes) or ``heed_text_rate`` (a critic's text only), else proposes completion again.
   Addressing the gap is the correct call for the first missing scope, or ``stuck`` when no
   tool call is left.
3. With every scope covered: a completion citing exactly the covered scopes, where it may cite
   a wrong receipt for one slot (``wrong_citation_rate``), miscompute one value
   (``miscompute_rate``) or, after a tool call, copy the ledger digest shown before it
   (``stale_digest_rate``). After feedback on a rejected completion each rate is scaled by
   (1 - heed rate): told why it may not stop, it usually fixes the error.

A completion message ends with the DONE token with ``done_token_rate``. The output is the plain
``PlannerAction`` object; the provider validates it against the planner's response schema like a
model's. The behaviour never reads ``request.cell_id`` or anything but the view, the config and
the stream.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from harness.ect.model import Requirements, SlotRequirement
from harness.ect.transforms import Item, ReplayError, Transform, replay
from harness.errors import SimulatedViewError
from harness.perturb import perturb
from harness.providers.config import PlannerBehaviour
from harness.providers.planner import (
    PlannerFeedback,
    PlannerReceipt,
    PlannerScope,
    PlannerView,
)
from harness.providers.protocol import ProviderRequest
from harness.streams import KeyedStream

__all__ = ["FalliblePlanner"]

_CHILDREN: Final = "children"
ScopeKey = tuple[str, str, str, str | None]


def _key(scope: PlannerScope) -> ScopeKey:
    return (scope.entity, scope.attribute, scope.level, scope.date)


def _usable(receipt: PlannerReceipt) -> bool:
    return receipt.exec_status == "ok" and receipt.validation == "validated"


def _scopes(slot: SlotRequirement) -> list[ScopeKey]:
    """Every scope the slot's rule allows: exactly the evidence the contract requires."""
    rule = slot.scope
    return list(itertools.product(rule.entities, rule.attributes, rule.levels, rule.dates))


def _call_for(scope: ScopeKey) -> dict[str, Any] | None:
    entity, attribute, _level, date = scope
    if attribute == _CHILDREN:
        return {"tool_id": "list_children", "args": {"entity": entity}}
    if date is None:
        return None
    return {
        "tool_id": "get_metric",
        "args": {"entity": entity, "metric": attribute, "period": date},
    }


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


class _Claim(msgspec.Struct, kw_only=True):
    slot: str
    evidence: list[str]
    transform: Transform
    value: Any


class _Turn:
    """One decision: the view digested into what the planner needs, and its draws."""

    def __init__(self, view: PlannerView, params: PlannerBehaviour, stream: KeyedStream) -> None:
        self.view = view
        self.params = params
        self.stream = stream
        self.index = view.budget.decision
        try:
            self.contract = msgspec.convert(view.task.contract, Requirements)
        except msgspec.ValidationError as e:
            raise SimulatedViewError(f"the planner view's contract is unreadable: {e}") from e
        self.by_id = {r.receipt_id: r for r in view.receipts}
        self.usable: dict[ScopeKey, str] = {}
        for receipt in view.receipts:
            if _usable(receipt):
                self.usable.setdefault(_key(receipt.scope), receipt.receipt_id)
        self.missing: list[ScopeKey] = []
        for slot in self.contract.slots:
            for scope in _scopes(slot):
                if scope not in self.usable and scope not in self.missing:
                    self.missing.append(scope)
        last = view.history[-1] if view.history else None
        self.feedback: PlannerFeedback | None = None if last is None else last.feedback
        self.rejected_completion = any(
            turn.action == "complete" and turn.feedback is not None for turn in view.history
        )

    # --- draws ---------------------------------------------------------------------------

    def below(self, label: str, probability: float) -> bool:
        return self.stream.below(label, probability, self.index)

    def heed_rate(self) -> float:
        if self.feedback is None:
            return 0.0
        if self.feedback.reason_codes:
            return self.params.heed_codes_rate
        return self.params.heed_text_rate

    def error_rate(self, rate: float) -> float:
        """An error rate, scaled down once a completion was rejected with feedback."""
        if self.rejected_completion and self.feedback is not None:
            return rate * (1.0 - self.heed_rate())
        return rate

    # --- actions -------------------------------------------------------------------------

    def act(self) -> dict[str, Any]:
        heeds = self.feedback is not None and self.below("heed", self.heed_rate())
        calls = self.view.calls
        left = self.view.budget.tool_calls_left
        if self.missing and calls and calls[-1].status == "error":
            if self.below("stuck", self.params.stuck_rate):
                last = calls[-1]
                return self.stuck(
                    f"{last.tool_id} keeps failing ({last.error_code or 'error'}); "
                    "I see no way to obtain the missing value."
                )
            if left > 0 and not heeds and self.below("repeat", self.params.repeat_failed_rate):
                last = calls[-1]
                return self.call(
                    {"tool_id": last.tool_id, "args": dict(last.args)},
                    f"Retrying {last.tool_id} with the same arguments.",
                )
        if self.missing:
            if self.feedback is not None:
                address = heeds
            else:
                address = not self.below("premature", self.params.premature_rate)
            if not address:
                return self.complete(premature=True)
            wanted = next((c for c in map(_call_for, self.missing) if c is not None), None)
            if wanted is None or left <= 0:
                return self.stuck(
                    "Required evidence is still missing and no tool call is left to fetch it."
                )
            return self.call(wanted, f"The contract needs {_show(wanted['args'])}; fetching it.")
        return self.complete(premature=False)

    def call(self, request: dict[str, Any], message: str) -> dict[str, Any]:
        return {
            "action": "call_tool",
            "tool_call": request,
            "answer": None,
            "certificate": None,
            "message": message,
        }

    def stuck(self, message: str) -> dict[str, Any]:
        return {
            "action": "stuck",
            "tool_call": None,
            "answer": None,
            "certificate": None,
            "message": message,
        }

    def complete(self, *, premature: bool) -> dict[str, Any]:
        draft = self.view.draft
        if (
            premature
            and draft is not None
            and draft.claims is not None
            and not self.rejected_completion
        ):
            claims = [dict(c) for c in draft.claims]
            answer = (
                dict(draft.answer)
                if draft.answer is not None
                else {c["slot"]: c["value"] for c in claims}
            )
            return self.finish(claims, answer)
        built = self.build(careless=premature)
        if not premature:
            self.slip(built)
        claims = [msgspec.to_builtins(c) for c in built]
        return self.finish(claims, {c.slot: c.value for c in built})

    def finish(self, claims: list[dict[str, Any]], answer: dict[str, Any]) -> dict[str, Any]:
        view = self.view
        certificate = {
            "task_id": view.task.task_id,
            "descriptor_digest": view.descriptor_digest,
            "ledger_digest": self.copied_digest(),
            "claims": claims,
        }
        lines = [f"Task {view.task.task_id}: the answer is ready."]
        lines += [f"- {slot}: {_show(answer[slot])}" for slot in answer]
        if self.below("done", self.params.done_token_rate):
            lines.append("DONE")
        return {
            "action": "complete",
            "tool_call": None,
            "answer": answer,
            "certificate": certificate,
            "message": "\n".join(lines),
        }

    def copied_digest(self) -> str:
        """The current ledger digest, or (a slip) the one shown before the latest call."""
        current = self.view.ledger_digest
        earlier = [t.ledger_digest for t in self.view.history if t.ledger_digest != current]
        if earlier and self.below("stale", self.error_rate(self.params.stale_digest_rate)):
            return earlier[-1]
        return current

    # --- certificates --------------------------------------------------------------------

    def build(self, *, careless: bool) -> list[_Claim]:
        claims = []
        for slot in self.contract.slots:
            evidence = [self.usable[s] for s in _scopes(slot) if s in self.usable]
            if careless:
                for scope in _scopes(slot):
                    if scope not in self.usable:
                        near = self.near_miss(scope, evidence)
                        if near is not None:
                            evidence.append(near)
            if not evidence:
                continue
            transform = slot.transforms[0]
            value = self.replay(transform, evidence)
            if isinstance(value, ReplayError):
                continue
            claims.append(
                _Claim(
                    slot=slot.slot,
                    evidence=evidence,
                    transform=transform,
                    value=value,
                )
            )
        return claims

    def near_miss(self, scope: ScopeKey, taken: Sequence[str]) -> str | None:
        """A receipt a careless agent takes for ``scope``: the same scope from a failed call,
        else the same attribute and level with another entity or date."""
        _entity, attribute, level, _date = scope
        exact = [r for r in self.view.receipts if _key(r.scope) == scope]
        similar = [
            r
            for r in self.view.receipts
            if r.scope.attribute == attribute and r.scope.level == level and _key(r.scope) != scope
        ]
        for receipt in (*exact, *similar):
            if receipt.receipt_id not in taken:
                return receipt.receipt_id
        return None

    def replay(self, transform: Transform, evidence: Sequence[str]) -> Any:
        items = []
        for rid in evidence:
            s = self.by_id[rid].scope
            items.append(Item(self.by_id[rid].value, s.entity, s.attribute, s.level, s.date))
        try:
            return replay(transform, items)
        except ReplayError as e:
            return e

    def slip(self, claims: list[_Claim]) -> None:
        """The careful agent's occasional errors (see the module docstring, item 3)."""
        if not claims:
            return
        slots = {s.slot: s for s in self.contract.slots}
        if self.below("wrong-citation", self.error_rate(self.params.wrong_citation_rate)):
            claim = self.stream.choice("wrong-citation-claim", claims, self.index)
            wrong = [
                r.receipt_id
                for r in self.view.receipts
                if r.receipt_id not in claim.evidence
                and r.scope.attribute in slots[claim.slot].scope.attributes
            ] or [r.receipt_id for r in self.view.receipts if r.receipt_id not in claim.evidence]
            if wrong:
                position = self.stream.choice(
                    "wrong-citation-position", range(len(claim.evidence)), self.index
                )
                claim.evidence[position] = self.stream.choice(
                    "wrong-citation-receipt", wrong, self.index
                )
                value = self.replay(claim.transform, claim.evidence)
                if not isinstance(value, ReplayError):
                    claim.value = value
        if self.below("miscompute", self.error_rate(self.params.miscompute_rate)):
            claim = self.stream.choice("miscompute-claim", claims, self.index)
            claim.value = perturb(claim.value, slots[claim.slot], strict=False)


class FalliblePlanner:
    """Role behaviour for ``planner`` (see the module docstring)."""

    @property
    def name(self) -> str:
        """``fallible-planner.v1``."""
        return "fallible-planner.v1"

    def respond(self, request: ProviderRequest, stream: KeyedStream) -> dict[str, Any]:
        """Choose the next action for the view in ``request``.

        Raises:
            SimulatedViewError: when the view is not a planner view.
        """
        try:
            view = msgspec.convert(request.view, PlannerView)
        except msgspec.ValidationError as e:
            raise SimulatedViewError(f"{self.name} cannot read the view: {e}") from e
        output = _Turn(view, request.config.simulated.planner, stream).act()
        # Plain JSON, as a model's reply would decode (lists, never tuples).
        plain: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(output))
        return plain
