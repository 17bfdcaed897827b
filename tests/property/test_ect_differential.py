"""Differential: the verifier never says ``complete`` where the independent gold judge says
unsupported, and the gold judge never calls supported what the verifier refuses for a source
(SCOPE_TOOL, SCOPE_SOURCE_PATH), over all 72 tasks and mutated certificates and answers.

Bases are every benchmark snapshot of every task (static grid and V2: clean and each fault)
except the trust-boundary challenge T1, whose ledger holds two validated receipts that disagree:
ECT completes there by design (it checks support, not which receipt is true; README). Each
base's agent side is mutated - claimed values, evidence, transforms, slots, answers, digests,
the recorded responses of cited calls (re-adapted by the trusted adapter), and the source of a
cited value (a real ``get_series`` point for a metric lookup, or that point relabelled to a
path or tool that is no source) - and the
resulting certificate and answer go to both the verifier (``verify(..., answer=...)``, as the
loop calls it) and the gold judge (``judge_proposal``: oracle answer and oracle evidence plan,
sharing no code with the verifier). Mutations are drawn from a seeded RNG; the seed is printed.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pytest

from harness import ect
from harness.benchmark.build import benchmark
from harness.ect.transforms import ArgMax, ArgMin, Mean, Sort, Sum, TopK
from harness.studies.v2.judge import judge_proposal
from harness.tools.adapter import ToolCall, build_ledger, receipts_for_call, series_point_path
from harness.tools.catalog import call_tool
from harness.worlds.snapshots import Snapshot
from harness.worlds.tasks import Task
from harness.worlds.world import PERIODS, generate_world

replace = msgspec.structs.replace
SEED: Final = 20261201

Case = tuple[ect.Ledger, ect.Certificate | None, dict[str, Any]]
Mutation = Callable[[random.Random, Snapshot, Case], Case | None]


def _bases() -> list[tuple[Task, Snapshot]]:
    bench = benchmark()
    tasks = {task.task_id: task for task in bench.tasks}
    return [(tasks[s.task_id], s) for s in bench.snapshots() if s.fault != "T1"]


def _tweak(rng: random.Random, value: Any) -> Any:
    """A different value of a nearby kind (never reliably equal to ``value``)."""
    if isinstance(value, bool) or value is None:
        return rng.choice([0, "null", not value, []])
    if isinstance(value, int):
        return rng.choice(
            [value + 1, value - 1, float(value), float(value) + 0.5, -value - 1, value + 2**53]
        )
    if isinstance(value, float):
        return rng.choice([value + 1e-9, value * 1.001 + 1e-6, round(value) + 0.25, -value - 1])
    if isinstance(value, str):
        return rng.choice([value + "x", value.upper() + "!", "", value[::-1] + "?"])
    if isinstance(value, list):
        if len(value) > 1:
            return rng.choice([value[::-1], value[:-1], [*value[1:], value[0]]])
        return [*value, "extra"] if rng.random() < 0.5 else []
    if isinstance(value, dict):
        return {**value, "extra": 1} if rng.random() < 0.5 else {}
    return None


def _claims(cert: ect.Certificate) -> list[ect.Claim]:
    return list(cert.claims)


def _with_claims(cert: ect.Certificate, claims: list[ect.Claim]) -> ect.Certificate:
    return replace(cert, claims=tuple(claims))


def _claim_value(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if cert is None or not cert.claims:
        return None
    claims = _claims(cert)
    i = rng.randrange(len(claims))
    claims[i] = replace(claims[i], value=_tweak(rng, claims[i].value))
    return ledger, _with_claims(cert, claims), answer


def _answer_value(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if not answer:
        return None
    slot = rng.choice(sorted(answer))
    return ledger, cert, {**answer, slot: _tweak(rng, answer[slot])}


def _claim_and_answer_value(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if cert is None or not cert.claims:
        return None
    claims = _claims(cert)
    i = rng.randrange(len(claims))
    new = _tweak(rng, claims[i].value)
    claims[i] = replace(claims[i], value=new)
    return ledger, _with_claims(cert, claims), {**answer, claims[i].slot: new}


def _evidence(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if cert is None or not cert.claims:
        return None
    claims = _claims(cert)
    i = rng.randrange(len(claims))
    evidence = list(claims[i].evidence)
    ids = [r.receipt_id for r in ledger.receipts]
    op = rng.randrange(6)
    if op == 0 and evidence:
        evidence.pop(rng.randrange(len(evidence)))
    elif op == 1 and ids:
        evidence.append(rng.choice(ids))
    elif op == 2 and evidence and ids:
        evidence[rng.randrange(len(evidence))] = rng.choice(ids)
    elif op == 3 and evidence:
        evidence.append(rng.choice(evidence))
    elif op == 4:
        evidence.append(f"c{rng.randrange(100)}.{rng.randrange(3)}")
    else:
        rng.shuffle(evidence)
    claims[i] = replace(claims[i], evidence=tuple(evidence))
    return ledger, _with_claims(cert, claims), answer


_OTHER_TRANSFORMS: Final = (
    Sum(),
    Mean(),
    ArgMax(key="entity"),
    ArgMin(key="entity"),
    Sort(key="entity", order="desc"),
    TopK(key="entity", k=1, order="desc"),
    TopK(key="entity", k=2, order="asc"),
)


def _transform(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if cert is None or not cert.claims:
        return None
    claims = _claims(cert)
    i = rng.randrange(len(claims))
    claims[i] = replace(claims[i], transform=rng.choice(_OTHER_TRANSFORMS))
    return ledger, _with_claims(cert, claims), answer


def _slots(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if cert is None or not cert.claims:
        return None
    claims = _claims(cert)
    op = rng.randrange(5)
    i = rng.randrange(len(claims))
    if op == 0:
        claims.pop(i)
    elif op == 1:
        claims.append(claims[i])
    elif op == 2:
        claims[i] = replace(claims[i], slot=claims[i].slot + "_x")
    elif op == 3 and len(claims) > 1:
        j = (i + 1) % len(claims)
        a, b = claims[i], claims[j]
        claims[i], claims[j] = replace(a, value=b.value), replace(b, value=a.value)
        answer = {**answer, a.slot: b.value, b.slot: a.value}
    else:
        rng.shuffle(claims)
    return ledger, _with_claims(cert, claims), answer


def _answer_slots(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    answer = dict(answer)
    op = rng.randrange(3)
    if op == 0 and answer:
        answer.pop(rng.choice(sorted(answer)))
    elif op == 1:
        answer[rng.choice(["extra", "note", "gold"])] = rng.choice([1, "x", None])
    else:
        answer = {}
    return ledger, cert, answer


def _digests(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    ledger, cert, answer = case
    if cert is None:
        return None
    op = rng.randrange(3)
    if op == 0:
        return ledger, replace(cert, ledger_digest=ect.value_hash(rng.random())), answer
    if op == 1:
        return ledger, replace(cert, descriptor_digest=ect.value_hash(rng.random())), answer
    return ledger, replace(cert, task_id=cert.task_id + "-other"), answer


def _response(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    """Re-record one cited call with an error placed in its response (envelope or body, an
    error object beside ``ok`` or an error status), through the trusted adapter; the
    certificate is re-bound to the new ledger, as an agent would copy its digest."""
    _, cert, answer = case
    if cert is None or not cert.claims or not snap.trace:
        return None
    cited_calls = {rid.rsplit(".", 1)[0] for claim in cert.claims for rid in claim.evidence}
    indices = [i for i, call in enumerate(snap.trace) if call.call_id in cited_calls]
    if not indices:
        return None
    trace = list(snap.trace)
    i = rng.choice(indices)
    response = copy.deepcopy(trace[i].response)
    if not isinstance(response, dict):
        return None
    holder = (
        response
        if rng.random() < 0.5 or not isinstance(response.get("body"), dict)
        else (response["body"])
    )
    if rng.random() < 0.5:
        holder["error"] = {"code": "UPSTREAM_TIMEOUT", "message": "late"}
    else:
        holder["status"] = "error"
    trace[i] = ToolCall(
        call_id=trace[i].call_id, tool_id=trace[i].tool_id, args=trace[i].args, response=response
    )
    new_ledger = build_ledger(snap.task_id, trace)
    cert = replace(cert, ledger_digest=ect.ledger_digest(new_ledger.receipts))
    return new_ledger, cert, answer


_WORLDS: dict[str, dict[str, Any]] = {}
_SOURCE_CODES: Final = frozenset({ect.ReasonCode.SCOPE_TOOL, ect.ReasonCode.SCOPE_SOURCE_PATH})


def _source(rng: random.Random, snap: Snapshot, case: Case) -> Case | None:
    """Cite, for one cited metric lookup, the matching point of a real ``get_series`` call
    over a random range holding its period (recorded by the trusted adapter); sometimes
    relabel that point to a path no series gives it, or to a tool that is no source."""
    ledger, cert, answer = case
    if cert is None or not cert.claims:
        return None
    by_id = {r.receipt_id: r for r in ledger.receipts}
    lookups = sorted(
        {
            rid
            for claim in cert.claims
            for rid in claim.evidence
            if rid in by_id
            and by_id[rid].tool_id == "get_metric"
            and by_id[rid].scope.date in PERIODS
        }
    )
    if not lookups:
        return None
    old = by_id[rng.choice(lookups)]
    at = PERIODS.index(old.scope.date)
    start, end = rng.randint(0, at), rng.randint(at, len(PERIODS) - 1)
    args = {
        "entity": old.scope.entity,
        "metric": old.scope.attribute,
        "start": PERIODS[start],
        "end": PERIODS[end],
    }
    world_id = snap.descriptor.world_id
    if world_id not in _WORLDS:
        _WORLDS[world_id] = generate_world(world_id).to_plain()
    call_id = f"series-{len(ledger.receipts)}"
    response = call_tool(_WORLDS[world_id], "get_series", args)
    points = list(
        receipts_for_call(
            snap.task_id,
            ToolCall(call_id=call_id, tool_id="get_series", args=args, response=response),
        )
    )
    if len(points) != end - start + 1:
        return None  # the series failed (no such site or metric): nothing to substitute
    index = at - start
    kind = rng.randrange(4)
    if kind == 1:
        points[index] = replace(points[index], source_path=series_point_path(len(PERIODS)))
    elif kind == 2:
        points[index] = replace(points[index], tool_id=rng.choice(["describe_world", "get_parent"]))
    elif kind == 3:
        points[index] = replace(points[index], source_path=series_point_path(rng.randrange(8)))
    new_id = points[index].receipt_id
    receipts = (*ledger.receipts, *points)
    claims = [
        replace(c, evidence=tuple(new_id if r == old.receipt_id else r for r in c.evidence))
        for c in cert.claims
    ]
    cert = replace(_with_claims(cert, claims), ledger_digest=ect.ledger_digest(receipts))
    return replace(ledger, receipts=receipts), cert, answer


MUTATIONS: Final[tuple[Mutation, ...]] = (
    _claim_value,
    _answer_value,
    _claim_and_answer_value,
    _evidence,
    _transform,
    _slots,
    _answer_slots,
    _digests,
    _response,
    _source,
    _source,
)


def _answer_of(snap: Snapshot) -> dict[str, Any]:
    if snap.answer is not None:
        return dict(snap.answer)
    if snap.certificate is None:
        return {}
    return {c.slot: c.value for c in snap.certificate.claims}


def _run(mutants_per_base: int, seed: int) -> tuple[int, int, int]:
    """Check every base and its mutants in both directions; return (cases, verifier
    completions, refusals for a source)."""
    print(f"differential seed {seed}, {mutants_per_base} mutants per base")
    rng = random.Random(seed)
    cases = completions = source_refusals = 0
    for task, snap in _bases():
        base: Case = (snap.ledger, snap.certificate, _answer_of(snap))
        candidates = [base]
        for _ in range(mutants_per_base):
            case: Case = base
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                mutated = rng.choice(MUTATIONS)(rng, snap, case)
                case = mutated if mutated is not None else case
            candidates.append(case)
        for ledger, cert, answer in candidates:
            cases += 1
            decision = ect.verify(snap.descriptor, snap.requirements, ledger, cert, answer=answer)
            if decision:
                completions += 1
                judged = judge_proposal(task, ledger, answer, cert)
                assert judged.supported, (snap.snapshot_id, judged.problems, cert, answer)
            elif _SOURCE_CODES & set(decision.reason_codes):
                source_refusals += 1
                judged = judge_proposal(task, ledger, answer, cert)
                assert not judged.supported, (snap.snapshot_id, decision.reason_codes, cert)
    return cases, completions, source_refusals


def test_every_task_and_fault_is_a_base() -> None:
    bases = _bases()
    assert len({task.task_id for task, _ in bases}) == 72
    # Every clean snapshot completes and is supported (so the property below is not vacuous).
    for task, snap in bases:
        if snap.fault == "C0":
            answer = _answer_of(snap)
            assert ect.verify(*_inputs(snap), answer=answer), snap.snapshot_id
            assert judge_proposal(task, snap.ledger, answer, snap.certificate).supported


def _inputs(snap: Snapshot) -> tuple[Any, ...]:
    return snap.descriptor, snap.requirements, snap.ledger, snap.certificate


def test_verifier_never_completes_where_the_gold_judge_says_unsupported() -> None:
    cases, completions, source_refusals = _run(mutants_per_base=4, seed=SEED)
    assert cases >= 3000
    assert source_refusals > 50  # the reverse direction is exercised
    # The unmutated clean bases complete, and so do mutants that change nothing that matters
    # (a reordered evidence list or claim list): the property is not vacuous.
    assert completions > 72


@pytest.mark.slow
def test_verifier_never_completes_where_the_gold_judge_says_unsupported_large() -> None:
    cases, _, _ = _run(mutants_per_base=60, seed=SEED + 1)
    assert cases >= 40_000
