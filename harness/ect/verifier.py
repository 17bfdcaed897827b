"""The ECT verifier: paper Algorithm 1, reporting every failing check, failing closed.

``verify`` maps a trusted descriptor and contract, a ledger and an untrusted certificate to a
``Decision``. It never raises: any exception becomes ``continue`` with INTERNAL_ERROR. Unlike the
paper's pseudo-code, which returns at the first failing line, it runs every check whose inputs
exist and reports them all, so a fault that trips several families shows all of them.

Beyond the paper's lines it checks three things the paper's guarantee needs: no two receipts
of one call, response and value path disagree (the paper's "conflicting records", which an id
check alone misses), each cited receipt's tool and value path are ones the contract allows for
the slot (the receipt check includes the value path), and, when the agent's reported answer is
given, that answer is the certified one slot for slot (docs/design.md section 4), so ``complete``
covers what the run reports; without it the decision says ``answer_checked=False``. Numbers
compare by exact value whatever their JSON type (``docs/canonical.md``). Every claim goes
through one path; there is no fast path that repeats a check.

Checks can be disabled one at a time (``Check``) for the single-check ablations; the default runs
all. Reading files and decoding bytes is the caller's job (see ``boundary``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any, Final

import msgspec

from harness.canonical import Domain, canonical_bytes, digest, digest_each
from harness.ect.model import (
    Certificate,
    Claim,
    ClaimResult,
    Decision,
    Finding,
    Ledger,
    Receipt,
    Requirements,
    ScopeRule,
    SlotRequirement,
    TaskDescriptor,
    Verdict,
)
from harness.ect.reasons import ReasonCode as R
from harness.ect.transforms import Item, ReplayError, replay, values_match

__all__ = ["ALL_CHECKS", "Check", "check_of", "verify"]


class Check(StrEnum):
    """Switchable checks. EVIDENCE splits into reference (the cited receipt exists, is this
    task's and is intact) and outcome (it succeeded and was validated), as the ablations do."""

    ADAPTER = "adapter"
    BINDING = "binding"
    COVERAGE = "coverage"
    REFERENCE = "reference"
    OUTCOME = "outcome"
    SCOPE = "scope"
    TRANSFORM = "transform"
    REPLAY = "replay"


ALL_CHECKS: Final = frozenset(Check)

_EVIDENCE_CHECK: Final = {
    R.EVIDENCE_EMPTY: Check.REFERENCE,
    R.EVIDENCE_DUPLICATE_CITATION: Check.REFERENCE,
    R.EVIDENCE_RECEIPT_ABSENT: Check.REFERENCE,
    R.EVIDENCE_FOREIGN_TASK: Check.REFERENCE,
    R.EVIDENCE_VALUE_HASH_MISMATCH: Check.REFERENCE,
    R.EVIDENCE_UNSUCCESSFUL: Check.OUTCOME,
    R.EVIDENCE_UNVALIDATED: Check.OUTCOME,
}


def check_of(code: R) -> Check | None:
    """The switchable check that emits ``code`` (None for INTERNAL_ERROR)."""
    if code in _EVIDENCE_CHECK:
        return _EVIDENCE_CHECK[code]
    family = code.family.value
    return None if family == "INTERNAL" else Check(family.lower())


class _Report:
    """Accumulates findings, dropping those of disabled checks."""

    def __init__(self, enabled: frozenset[Check]) -> None:
        self.enabled = enabled
        self.findings: list[Finding] = []

    def add(self, code: R, path: str, expected: object = None, got: object = None) -> None:
        if check_of(code) in self.enabled:
            self.findings.append(
                Finding(
                    code=code,
                    path=path,
                    expected=None if expected is None else str(expected),
                    got=None if got is None else str(got),
                )
            )


def verify(
    descriptor: TaskDescriptor,
    requirements: Requirements,
    ledger: Ledger,
    certificate: Certificate | None,
    *,
    answer: Mapping[str, Any] | None = None,
    disabled: Collection[Check] = (),
) -> Decision:
    """Decide whether ``certificate`` licenses ``complete`` under the trusted contract.

    Args:
        descriptor: the trusted task descriptor.
        requirements: the trusted contract R_t for that task.
        ledger: the evidence ledger E_t built by the trusted adapter.
        certificate: the candidate certificate C_t, or None when the agent offered none.
        answer: the answer the agent reports (slot -> value), or None to judge the certificate
            alone (the decision then says ``answer_checked=False``). When given, it must name
            exactly the certified slots, each with the certified value under the slot's
            comparison, or the decision is ``continue``
            (COVERAGE_ANSWER_SLOT, REPLAY_ANSWER_MISMATCH; ADAPTER_ANSWER_MALFORMED when it is
            not an object keyed by slot names).
        disabled: checks to switch off (ablations only).

    Returns:
        ``complete`` iff every enabled check passes; otherwise ``continue`` with every failing
        reason code. Never raises.
    """
    try:
        enabled = ALL_CHECKS - frozenset(disabled)
        report = _Report(enabled)
        claims = _verify(descriptor, requirements, ledger, certificate, answer, report)
        return _decision(report.findings, claims, answer_checked=answer is not None)
    except Exception as e:  # noqa: BLE001 - fail closed is the contract.
        return Decision(
            decision=Verdict.CONTINUE,
            reason_codes=(R.INTERNAL_ERROR,),
            findings=(Finding(code=R.INTERNAL_ERROR, path="$", got=type(e).__name__),),
            answer_checked=answer is not None,
        )


def _decision(
    findings: list[Finding], claims: list[ClaimResult], *, answer_checked: bool
) -> Decision:
    codes = tuple(sorted({f.code for f in findings}, key=_CODE_ORDER.__getitem__))
    return Decision(
        decision=Verdict.CONTINUE if codes else Verdict.COMPLETE,
        reason_codes=codes,
        findings=tuple(findings),
        claims=tuple(claims),
        answer_checked=answer_checked,
    )


_CODE_ORDER: Final = {code: index for index, code in enumerate(R)}


def _verify(
    descriptor: TaskDescriptor,
    requirements: Requirements,
    ledger: Ledger,
    certificate: Certificate | None,
    answer: Mapping[str, Any] | None,
    report: _Report,
) -> list[ClaimResult]:
    # Algorithm 1, lines 1-2: the trusted inputs agree, and the certificate copies the
    # descriptor digest.
    trusted_digest = digest(Domain.DESCRIPTOR, descriptor)
    _check_contract(descriptor, requirements, trusted_digest, report)
    if certificate is None:
        report.add(R.ADAPTER_CERTIFICATE_MISSING, "$")
        # Without a certificate nothing else can be checked; this must never pass, even with
        # the adapter check ablated.
        report.findings.append(Finding(code=R.COVERAGE_NO_CLAIMS, path="$.claims"))
        return []
    if answer is not None and not _is_answer(answer):
        report.add(R.ADAPTER_ANSWER_MALFORMED, "answer", "an object of slot -> value")
        answer = None
    if certificate.descriptor_digest != trusted_digest:
        report.add(
            R.ADAPTER_DESCRIPTOR_DIGEST_MISMATCH,
            "$.descriptor_digest",
            trusted_digest,
            certificate.descriptor_digest,
        )

    # Lines 4-5: task and ledger binding.
    receipt_digests = digest_each(Domain.RECEIPT, ledger.receipts)
    trusted_ledger = digest(Domain.LEDGER, sorted(receipt_digests))
    if certificate.task_id != descriptor.task_id:
        report.add(R.BINDING_TASK_ID_MISMATCH, "$.task_id", descriptor.task_id, certificate.task_id)
    if ledger.task_id != descriptor.task_id:
        report.add(R.BINDING_LEDGER_TASK_MISMATCH, "ledger.task_id", descriptor.task_id)
    if certificate.ledger_digest != trusted_ledger:
        report.add(
            R.BINDING_LEDGER_DIGEST_MISMATCH,
            "$.ledger_digest",
            trusted_ledger,
            certificate.ledger_digest,
        )

    # Lines 7-8: duplicate or conflicting receipt ids; missing, extra, duplicate slots.
    by_id = _index_receipts(ledger, receipt_digests, report)
    slots = {s.slot: s for s in requirements.slots}
    _check_coverage(certificate, slots, report)

    # Lines 10-22: per claim.
    results = []
    memo = _facts_of_cited(certificate, by_id, descriptor.task_id)
    rules: dict[int, _Rule] = {}
    answered: set[str] = set()
    for index, claim in enumerate(certificate.claims):
        before = len(report.findings)
        slot = slots.get(claim.slot)
        replayed: Any = _UNSET
        if slot is not None:
            # Slots often share one rule object; build its sets once.
            rule = rules.get(id(slot.scope))
            if rule is None:
                rule = rules[id(slot.scope)] = _Rule(slot.scope)
            replayed = _check_claim(
                index, claim, slot, rule, by_id, descriptor.task_id, report, memo
            )
        if answer is not None and claim.slot not in answered:
            answered.add(claim.slot)
            _check_answer(index, claim, slot, replayed, answer, report)
        codes: tuple[R, ...] = ()
        if len(report.findings) > before:
            codes = tuple(
                sorted({f.code for f in report.findings[before:]}, key=_CODE_ORDER.__getitem__)
            )
        results.append(ClaimResult(index=index, slot=claim.slot, passed=not codes, codes=codes))
    if answer is not None:
        for name in answer:
            if name not in answered:
                report.add(R.COVERAGE_ANSWER_SLOT, f"answer.{name}", "a certified slot", name)
    return results


def _is_answer(answer: object) -> bool:
    return isinstance(answer, Mapping) and all(isinstance(k, str) for k in answer)


def _check_answer(
    index: int,
    claim: Claim,
    slot: SlotRequirement | None,
    replayed: Any,
    answer: Mapping[str, Any],
    report: _Report,
) -> None:
    """The reported answer for ``claim.slot`` is the certified one (docs/design.md section 4).

    It must equal the claimed value and, when replay produced one, the replayed value, each
    under the slot's comparison (a slot the contract lacks compares exactly).
    """
    path = f"answer.{claim.slot}"
    if claim.slot not in answer:
        report.add(R.COVERAGE_ANSWER_SLOT, path, claim.slot, "no answer")
        return
    reported = answer[claim.slot]
    abs_tol, rel_tol = (0.0, 0.0) if slot is None else (slot.abs_tol, slot.rel_tol)
    if not values_match(reported, claim.value, abs_tol, rel_tol) or (
        replayed is not _UNSET and not values_match(reported, replayed, abs_tol, rel_tol)
    ):
        report.add(R.REPLAY_ANSWER_MISMATCH, path, _show(claim.value), _show(reported))


def _check_contract(
    descriptor: TaskDescriptor, requirements: Requirements, trusted_digest: str, report: _Report
) -> None:
    if requirements.task_id != descriptor.task_id:
        report.add(
            R.ADAPTER_CONTRACT_MISMATCH,
            "requirements.task_id",
            descriptor.task_id,
            requirements.task_id,
        )
    if requirements.descriptor_digest != trusted_digest:
        report.add(
            R.ADAPTER_CONTRACT_MISMATCH,
            "requirements.descriptor_digest",
            trusted_digest,
            requirements.descriptor_digest,
        )
    contract_slots = {s.slot for s in requirements.slots}
    if contract_slots != set(descriptor.required_slots):
        report.add(
            R.ADAPTER_CONTRACT_MISMATCH,
            "requirements.slots",
            sorted(descriptor.required_slots),
            sorted(contract_slots),
        )


def _index_receipts(
    ledger: Ledger, receipt_digests: list[str], report: _Report
) -> dict[str, Receipt | None]:
    """Map receipt id -> receipt; a receipt that is ambiguous maps to None (unusable).

    Ambiguous: its id has copies of different content (COVERAGE_CONFLICTING_RECEIPT_ID), or
    another receipt of the same call, response and value path says something else
    (COVERAGE_CONFLICTING_RECEIPTS): one response holds one value at one path, so two different
    records of it mean the ledger contradicts itself, whether or not either is cited.
    """
    by_id: dict[str, Receipt | None] = {}
    digest_of: dict[str, str] = {}
    for index, (receipt, rdigest) in enumerate(zip(ledger.receipts, receipt_digests, strict=True)):
        rid = receipt.receipt_id
        if rid not in digest_of:
            by_id[rid] = receipt
            digest_of[rid] = rdigest
        elif digest_of[rid] == rdigest:
            report.add(R.COVERAGE_DUPLICATE_RECEIPT_ID, f"ledger.receipts[{index}]", got=rid)
        else:
            report.add(R.COVERAGE_CONFLICTING_RECEIPT_ID, f"ledger.receipts[{index}]", got=rid)
            by_id[rid] = None
    sites = [(r.call_id, r.response_hash, r.source_path) for r in ledger.receipts]
    if len(set(sites)) != len(sites):  # rare: only then look for records that disagree
        _find_conflicts(ledger, sites, receipt_digests, by_id, report)
    return by_id


def _find_conflicts(
    ledger: Ledger,
    sites: list[tuple[str, str, str]],
    receipt_digests: list[str],
    by_id: dict[str, Receipt | None],
    report: _Report,
) -> None:
    """Report each receipt that records a (call, response, path) differently from the first
    record of it (COVERAGE_CONFLICTING_RECEIPTS); both become unusable."""
    first_at: dict[tuple[str, str, str], Receipt] = {}
    seen: set[str] = set()
    for index, (receipt, site, rdigest) in enumerate(
        zip(ledger.receipts, sites, receipt_digests, strict=True)
    ):
        if rdigest in seen:
            continue  # an identical copy (COVERAGE_DUPLICATE_RECEIPT_ID when the id repeats)
        seen.add(rdigest)
        first = first_at.setdefault(site, receipt)
        if first is not receipt and _content(first) != _content(receipt):
            report.add(
                R.COVERAGE_CONFLICTING_RECEIPTS,
                f"ledger.receipts[{index}]",
                first.receipt_id,
                receipt.receipt_id,
            )
            by_id[first.receipt_id] = None
            by_id[receipt.receipt_id] = None


def _content(receipt: Receipt) -> bytes:
    """A receipt's canonical bytes without its id: what two records of one value must share.

    Canonical bytes, not ``==``: Python's ``120 == 120.0`` would hide a rewritten value.
    """
    return canonical_bytes(msgspec.structs.replace(receipt, receipt_id=""))


def _check_coverage(
    certificate: Certificate, slots: dict[str, SlotRequirement], report: _Report
) -> None:
    if not certificate.claims:
        report.add(R.COVERAGE_NO_CLAIMS, "$.claims")
    seen: set[str] = set()
    for index, claim in enumerate(certificate.claims):
        path = f"$.claims[{index}].slot"
        if claim.slot not in slots:
            report.add(R.COVERAGE_EXTRA_SLOT, path, sorted(slots), claim.slot)
        elif claim.slot in seen:
            report.add(R.COVERAGE_DUPLICATE_SLOT, path, got=claim.slot)
        seen.add(claim.slot)
    for name in slots:
        if name not in seen:
            report.add(R.COVERAGE_MISSING_SLOT, "$.claims", name)


_new_item: Final = tuple.__new__


def _facts_of_cited(
    certificate: Certificate, by_id: dict[str, Receipt | None], task_id: str
) -> dict[str, _Facts]:
    """Facts of every distinct receipt the certificate cites that exists unambiguously.

    Value hashes are recomputed in one batch; receipts nobody cites are never hashed twice.
    """
    cited = {rid for claim in certificate.claims for rid in claim.evidence}
    receipts = [r for rid in cited if (r := by_id.get(rid)) is not None]
    hashes = digest_each(Domain.VALUE, [r.value for r in receipts])
    return {r.receipt_id: _Facts(r, task_id, h) for r, h in zip(receipts, hashes, strict=True)}


class _Facts:
    """What one receipt's evidence checks conclude, computed once per verification.

    A receipt cited by several claims is hashed and judged once; only scope depends on the slot.
    """

    __slots__ = ("intact", "item", "ok", "scope_key", "sound", "source", "task_ok", "validated")

    def __init__(self, receipt: Receipt, task_id: str, recomputed_value_hash: str) -> None:
        self.task_ok = receipt.task_id == task_id
        self.intact = receipt.value_hash == recomputed_value_hash
        self.ok = receipt.exec_status == "ok"
        self.validated = receipt.validation == "validated"
        self.sound = self.task_ok and self.intact and self.ok and self.validated
        scope = receipt.scope
        # tuple.__new__ skips NamedTuple's Python-level constructor (this is the hot path).
        self.item = _new_item(
            Item, (receipt.value, scope.entity, scope.attribute, scope.level, scope.date)
        )
        # The scope alone, so two receipts for the same scope collide.
        self.scope_key = (scope.entity, scope.attribute, scope.level, scope.date)
        self.source = (receipt.tool_id, receipt.source_path)


class _Rule:
    """A slot's scope rule as sets, built once per rule per verification.

    ``admits`` remembers its answer per receipt, so a receipt cited by several claims under the
    same rule is judged once (the answer depends only on the receipt and the rule).
    """

    __slots__ = ("attributes", "dates", "entities", "judged", "levels", "sources", "tools")

    def __init__(self, rule: ScopeRule) -> None:
        self.entities = frozenset(rule.entities)
        self.attributes = frozenset(rule.attributes)
        self.levels = frozenset(rule.levels)
        self.dates = frozenset(rule.dates)
        self.sources = frozenset((s.tool_id, s.source_path) for s in rule.sources)
        self.tools = frozenset(s.tool_id for s in rule.sources)
        self.judged: dict[_Facts, bool] = {}

    def admits(self, facts: _Facts) -> bool:
        """The receipt's entity, attribute, level, date and (tool, path) are all allowed."""
        known = self.judged.get(facts)
        if known is None:
            item = facts.item
            known = self.judged[facts] = (
                item.entity in self.entities
                and item.attribute in self.attributes
                and item.level in self.levels
                and item.date in self.dates
                and facts.source in self.sources
            )
        return known


def _evidence_findings(
    path: str, receipt: Receipt, facts: _Facts, task_id: str, report: _Report
) -> None:
    if not facts.task_ok:
        report.add(R.EVIDENCE_FOREIGN_TASK, path, task_id, receipt.task_id)
    if not facts.intact:
        report.add(R.EVIDENCE_VALUE_HASH_MISMATCH, path, got=receipt.receipt_id)
    if not facts.ok:
        report.add(R.EVIDENCE_UNSUCCESSFUL, path, "ok", receipt.exec_status)
    if not facts.validated:
        report.add(R.EVIDENCE_UNVALIDATED, path, "validated", receipt.validation)


def _scope_findings(
    path: str, facts: _Facts, slot: SlotRequirement, rule: _Rule, report: _Report
) -> None:
    item = facts.item
    scope = slot.scope
    if item.entity not in rule.entities:
        report.add(R.SCOPE_ENTITY, path, list(scope.entities), item.entity)
    if item.attribute not in rule.attributes:
        report.add(R.SCOPE_ATTRIBUTE, path, list(scope.attributes), item.attribute)
    if item.level not in rule.levels:
        report.add(R.SCOPE_LEVEL, path, list(scope.levels), item.level)
    if item.date not in rule.dates:
        report.add(R.SCOPE_DATE, path, list(scope.dates), item.date)
    tool_id, source_path = facts.source
    if tool_id not in rule.tools:
        report.add(R.SCOPE_TOOL, path, sorted(rule.tools), tool_id)
    elif facts.source not in rule.sources:
        allowed = sorted(p for t, p in rule.sources if t == tool_id)
        report.add(R.SCOPE_SOURCE_PATH, path, allowed, source_path)


_UNSET: Final = object()
"""Replay produced no value (it failed, or evidence was unavailable)."""


def _check_claim(
    index: int,
    claim: Claim,
    slot: SlotRequirement,
    rule: _Rule,
    by_id: dict[str, Receipt | None],
    task_id: str,
    report: _Report,
    memo: dict[str, _Facts],
) -> Any:
    """Lines 11-21 for one claim; returns the replayed value when it equals the claimed one
    (``_UNSET`` when replay failed, could not run, or disagrees with the claim).

    One path for every claim: the loop tests each citation against precomputed sets and builds
    a finding (and its path string) only for what fails.
    """
    cited: list[_Facts] = []
    unavailable = False
    evidence = claim.evidence

    # Lines 11-15, one pass over the citations: evidence exists, is this task's, intact,
    # successful and validated (11-12); it comes from an allowed tool at an allowed value path
    # and matches the slot's entity, attribute, level and date scope, and no two cited receipts
    # share a scope (14-15).
    if not evidence:
        report.add(R.EVIDENCE_EMPTY, f"$.claims[{index}].evidence")
    elif len(set(evidence)) != len(evidence):
        report.add(R.EVIDENCE_DUPLICATE_CITATION, f"$.claims[{index}].evidence")
    cited_ids: set[str] = set()
    scopes_seen: set[tuple[str, str, str, str | None]] = set()
    for position, rid in enumerate(evidence):
        facts = memo.get(rid)
        if facts is None:
            # Absent, or an id whose copies conflict (COVERAGE_CONFLICTING_RECEIPT_ID).
            unavailable = True
            if rid not in by_id:
                report.add(
                    R.EVIDENCE_RECEIPT_ABSENT, f"$.claims[{index}].evidence[{position}]", got=rid
                )
            continue
        if rid in cited_ids:
            continue  # already judged; the repeat is EVIDENCE_DUPLICATE_CITATION
        cited_ids.add(rid)
        cited.append(facts)
        if not facts.sound:
            receipt = by_id[rid]
            assert receipt is not None
            path = f"$.claims[{index}].evidence[{position}]"
            _evidence_findings(path, receipt, facts, task_id, report)
        key = facts.scope_key
        if rule.admits(facts) and key not in scopes_seen:
            scopes_seen.add(key)
            continue
        path = f"$.claims[{index}].evidence[{position}]"
        _scope_findings(path, facts, slot, rule, report)
        if key in scopes_seen:
            report.add(R.SCOPE_DUPLICATE, path, got=rid)
        scopes_seen.add(key)
    count = len(evidence)
    if not slot.min_evidence <= count <= slot.max_evidence:
        report.add(
            R.SCOPE_CARDINALITY,
            f"$.claims[{index}].evidence",
            f"{slot.min_evidence}..{slot.max_evidence}",
            count,
        )

    base = f"$.claims[{index}]"
    _check_transform(base, claim, slot, report)
    # Lines 20-21: replay the declared transform over the cited values.
    return _check_replay(base, claim, slot, cited, unavailable, report)


def _check_transform(base: str, claim: Claim, slot: SlotRequirement, report: _Report) -> None:
    # Lines 17-18: the declared transform and its exact parameters are allowed.
    if claim.transform not in slot.transforms:
        allowed_ops = {type(t) for t in slot.transforms}
        code = (
            R.TRANSFORM_PARAMS_MISMATCH
            if type(claim.transform) in allowed_ops
            else R.TRANSFORM_NOT_ALLOWED
        )
        report.add(
            code,
            f"{base}.transform",
            _show(slot.transforms),
            _show(claim.transform),
        )


def _check_replay(
    base: str,
    claim: Claim,
    slot: SlotRequirement,
    cited: list[_Facts],
    unavailable: bool,
    report: _Report,
) -> Any:
    path = f"{base}.value"
    if claim.value is None and not slot.nullable:
        report.add(R.REPLAY_NULL_NOT_ALLOWED, path, "non-null", "null")
    if unavailable:
        report.add(R.REPLAY_EVIDENCE_UNAVAILABLE, f"{base}.evidence")
        return _UNSET
    items = [facts.item for facts in cited]
    try:
        result = replay(claim.transform, items)
    except ReplayError as e:
        report.add(e.code, path, got=e.detail)
        return _UNSET
    if result is None and not slot.nullable:
        report.add(R.REPLAY_NULL_NOT_ALLOWED, path, "non-null", "null")
    if not values_match(claim.value, result, slot.abs_tol, slot.rel_tol):
        report.add(R.REPLAY_VALUE_MISMATCH, path, _show(result), _show(claim.value))
        return _UNSET  # the claim is already refused; the answer is held to the claim alone
    return result


def _show(value: Any) -> str:
    """Compact JSON for a finding; falls back to repr for values that cannot be encoded."""
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)
