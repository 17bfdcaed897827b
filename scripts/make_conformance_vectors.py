"""Write the conformance vectors of ``docs/canonical.md`` to ``tests/data/conformance/``.

Three files: ``digests.json`` (input JSON text -> canonical bytes -> digest), ``transforms.json``
(op + items -> result or reason code) and ``decisions.json`` (descriptor, contract, ledger,
certificate, answer -> decision, reason codes, answer_checked). Deterministic: the same code
writes the same bytes. ``tests/unit/test_conformance_vectors.py`` re-derives every vector.

Run: .venv/bin/python scripts/make_conformance_vectors.py [--check]
(``--check`` writes nothing and exits 1 when the files differ from what would be written.)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from harness import ect
from harness.canonical import Domain, canonical_bytes, digest, digest_bytes
from harness.ect.transforms import (
    AllNull,
    ArgMax,
    ArgMin,
    Collect,
    Count,
    Difference,
    GroupedSumTopK,
    Identity,
    Item,
    Max,
    Mean,
    Min,
    Ratio,
    ReplayError,
    Sort,
    Sum,
    TopK,
    Transform,
    Union,
    WindowSumDifference,
    replay,
)
from harness.examples import regional_sum

OUT: Final = Path(__file__).resolve().parents[1] / "tests" / "data" / "conformance"
replace = msgspec.structs.replace

# ---------------------------------------------------------------------------------------------
# Digests

_NUMBER_TEXTS: Final = (
    "0",
    "-0",
    "7",
    "-7",
    "9007199254740993",
    "18446744073709551616",
    "-9223372036854775809",
    "1" + "0" * 400,
    "-" + "9" * 4299,
    "0.0",
    "-0.0",
    "3.0",
    "3.50",
    "0.1",
    "0.10",
    "1E2",
    "1e2",
    "-2.5",
    "12345.678",
    "1e15",
    "1e16",
    "123456789012345678",
    "123456789012345678.0",
    "1.2345678901234567e17",
    "9007199254741168.0",
    "0.0001",
    "0.00001",
    "0.000001",
    "0.0000001",
    "9.999e-5",
    "1.5e300",
    "5e-324",
    "1.7976931348623157e308",
    "2.2250738585072014e-308",
    "0.30000000000000004",
    "100000000000000000000.0",
    "1e-400",
)
_STRING_TEXTS: Final = (
    '""',
    '"plain"',
    '"quote \\" backslash \\\\ slash \\/"',
    '"\\b\\f\\n\\r\\t"',
    '"\\u0000\\u0001\\u001f"',
    '"\\u007f del"',
    '"caf\\u00e9 caf\u00e9"',
    '"\\u20ac \u20ac"',
    '"\\u2028 line separator"',
    '"\\ud83d\\ude00 \U0001f600"',
    '"</script>"',
    '"\\uffff"',
)
_COMPOSITE_TEXTS: Final = (
    "true",
    "false",
    "null",
    "[]",
    "{}",
    '[1, 2.0, "3", true, null]',
    '{"b": 1, "a": 2}',
    '{"Z": 1, "a": 2, "_": 3, "A": 4, "0": 5}',
    '{"\\u00e9": 1, "z": 2, "\\ud83d\\ude00": 3, "\\uffff": 4, "": 5}',
    '{"aa": 1, "a": 2, "ab": 3, "a\\u0000": 4}',
    '{"outer": {"b": [3, {"d": 4, "c": 5}], "a": null}}',
    "[[[[[[[[[[0]]]]]]]]]]",
    '{"entity": "site-a", "metric": "visits", "period": "2024-03"}',
    '{"status": "ok", "tool_id": "get_metric", "error": null, "body": {"status": "ok", '
    '"error": null, "entity": "site-a", "level": "site", "metric": "visits", '
    '"period": "2024-03", "value": 120}}',
)


def digest_vectors() -> list[dict[str, Any]]:
    """Plain JSON texts under every verifier domain, then the example's records."""
    out: list[dict[str, Any]] = []

    def add(domain: Domain, text: str) -> None:
        data = canonical_bytes(msgspec.json.decode(text.encode()))
        out.append(
            {
                "id": f"digest-{len(out):03d}",
                "domain": domain.value,
                "input": text,
                "canonical": data.decode(),
                "digest": digest_bytes(domain, data),
            }
        )

    for text in (*_NUMBER_TEXTS, *_STRING_TEXTS, *_COMPOSITE_TEXTS):
        add(Domain.VALUE, text)  # "1e-400" reads as its nearest binary64, 0.0
    for domain in (Domain.TOOL_ARGS, Domain.TOOL_RESPONSE):
        add(domain, _COMPOSITE_TEXTS[-2] if domain is Domain.TOOL_ARGS else _COMPOSITE_TEXTS[-1])
    ex = regional_sum()
    # Typed records, written with whitespace and out of order: the canonical bytes sort them.
    add(Domain.DESCRIPTOR, json.dumps(msgspec.to_builtins(ex.descriptor), indent=2))
    for receipt in ex.ledger.receipts:
        add(Domain.RECEIPT, json.dumps(msgspec.to_builtins(receipt), indent=1))
    add(Domain.REQUIREMENTS, json.dumps(msgspec.to_builtins(ex.requirements)))
    add(Domain.CERTIFICATE, json.dumps(msgspec.to_builtins(ex.certificate)))
    # The ledger digest: the sorted receipt digests, as a JSON array of strings.
    receipt_digests = sorted(digest(Domain.RECEIPT, r) for r in ex.ledger.receipts)
    add(Domain.LEDGER, json.dumps(receipt_digests))
    add(Domain.LEDGER, "[]")
    return out


# ---------------------------------------------------------------------------------------------
# Transforms

_ENTITIES: Final = ("a", "b", "c", "d")
_DATES: Final = ("2024-01", "2024-02", "2024-03", "2024-04")


def _items(values: Sequence[Any], *, by_date: bool = False) -> list[Item]:
    if by_date:
        return [
            Item(v, "site-a", "visits", "site", d) for d, v in zip(_DATES, values, strict=False)
        ]
    return [
        Item(v, e, "visits", "site", "2024-03") for e, v in zip(_ENTITIES, values, strict=False)
    ]


_VALUE_SETS: Final[tuple[tuple[Any, ...], ...]] = (
    (10, 30, 20, 30),
    (5, 5.0, 3, 4),
    (5.0, 5, 3, 4),
    (0.1, 0.2, 0.3, 0.4),
    (10**400, 10**399, 1, 2),
    (2**53 + 1, 75, 99, 0),
    (1, 9007199254741168.0, 0, 0),
    (-0.0, 0, 0.0, -0),
    (1e308, 1e308, 1, 1),
    (2, 3, 5, 7),
    (None, 1, 2, 3),
    (True, 1, 2, 3),
    ("3", 1, 2, 3),
)
_ENTITY_OPS: Final[tuple[Transform, ...]] = (
    Sum(),
    Mean(),
    Count(),
    Min(),
    Max(),
    ArgMax(key="entity"),
    ArgMin(key="entity"),
    Sort(key="entity", order="desc"),
    Sort(key="entity", order="asc"),
    TopK(key="entity", k=2, order="desc"),
    Difference(key="entity", minuend="a", subtrahend="b"),
    Ratio(key="entity", numerator="a", denominator="c"),
    GroupedSumTopK(groups={"x": ("a", "b"), "y": ("c", "d")}, k=1, order="desc"),
)


def _outcome(op: Transform, items: list[Item]) -> dict[str, Any]:
    try:
        result = replay(op, items)
    except ReplayError as e:
        return {"error": e.code.value}
    return {"result": result, "result_type": type(result).__name__}


def transform_vectors() -> list[dict[str, Any]]:
    """Every numeric and ranking op over value sets that probe exactness, ties and types."""
    cases: list[tuple[Transform, list[Item]]] = []
    for values in _VALUE_SETS:
        for op in _ENTITY_OPS:
            cases.append((op, _items(values)))
        cases.append(
            (
                WindowSumDifference(window_a=_DATES[:2], window_b=_DATES[2:]),
                _items(values, by_date=True),
            )
        )
    cases += [
        (Identity(), _items([{"x": [1, 2.0]}])),
        (Identity(), _items([1, 2])),
        (Collect(key="entity"), _items([1, None, "x"])),
        (Union(), _items([["b", "a"], "c", ["a"]])),
        (Union(), _items([["b", None]])),
        (AllNull(), _items([None, None])),
        (AllNull(), _items([None, 0])),
        (Sum(), []),
        (Ratio(key="entity", numerator="a", denominator="b"), _items([1, 0])),
        (Ratio(key="entity", numerator="a", denominator="b"), _items([10**400 + 1, 3])),
        (Ratio(key="entity", numerator="a", denominator="b"), _items([1, 3])),
        (Mean(), _items([1, 2, 2])),
        (TopK(key="entity", k=5, order="asc"), _items([1, 2, 3])),
    ]
    out = []
    for index, (op, items) in enumerate(cases):
        out.append(
            {
                "id": f"transform-{index:03d}",
                "op": msgspec.to_builtins(op),
                "items": [list(item) for item in items],
                **_outcome(op, items),
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# Decisions

_TASK: Final = "conformance"
_SOURCES: Final = (
    ect.Source(tool_id="get_metric", source_path="/body/value"),
    ect.Source(tool_id="get_series", source_path="/body/points/0/value"),
    ect.Source(tool_id="get_series", source_path="/body/points/1/value"),
)


def _receipt(n: int, entity: str, value: Any, **changes: Any) -> ect.Receipt:
    args = {"entity": entity, "metric": "visits", "period": "2024-03"}
    receipt = ect.Receipt(
        receipt_id=f"r{n}",
        task_id=_TASK,
        call_id=f"c{n}",
        tool_id="get_metric",
        args_hash=digest(Domain.TOOL_ARGS, args),
        response_hash=digest(Domain.TOOL_RESPONSE, {"call": n, "value": value}),
        source_path="/body/value",
        value=value,
        value_hash=ect.value_hash(value),
        exec_status="ok",
        validation="validated",
        scope=ect.Scope(entity=entity, attribute="visits", level="site", date="2024-03"),
    )
    return replace(receipt, **changes)


class _Task:
    """One small task: values per entity, one slot per op, and its contract."""

    def __init__(
        self,
        values: Sequence[Any],
        ops: dict[str, Transform],
        *,
        abs_tol: float = 0.0,
        rel_tol: float = 0.0,
    ) -> None:
        entities = _ENTITIES[: len(values)]
        self.descriptor = ect.TaskDescriptor(
            task_id=_TASK,
            family="conformance",
            world_id="conformance",
            params={},
            required_slots=tuple(ops),
        )
        rule = ect.ScopeRule(
            entities=entities,
            attributes=("visits",),
            levels=("site",),
            dates=("2024-03",),
            sources=_SOURCES,
        )
        self.requirements = ect.Requirements(
            task_id=_TASK,
            descriptor_digest=ect.descriptor_digest(self.descriptor),
            slots=tuple(
                ect.SlotRequirement(
                    slot=slot,
                    transforms=(op,),
                    scope=rule,
                    min_evidence=len(values),
                    max_evidence=len(values),
                    nullable=True,
                    abs_tol=abs_tol,
                    rel_tol=rel_tol,
                )
                for slot, op in ops.items()
            ),
        )
        self.receipts = [
            _receipt(i, e, v) for i, (e, v) in enumerate(zip(entities, values, strict=True))
        ]
        self.ops = ops

    def certificate(
        self, receipts: Sequence[ect.Receipt], claimed: dict[str, Any] | None = None
    ) -> ect.Certificate:
        """Claims citing every receipt of an entity once; values replayed unless ``claimed``."""
        cited = [r for r in receipts if r.receipt_id in {x.receipt_id for x in self.receipts}]
        ids = tuple(r.receipt_id for r in cited)
        items = [
            Item(r.value, r.scope.entity, r.scope.attribute, r.scope.level, r.scope.date)
            for r in cited
        ]
        claims = []
        for slot, op in self.ops.items():
            if claimed is not None and slot in claimed:
                value = claimed[slot]
            else:
                try:
                    value = replay(op, items)
                except ReplayError:
                    value = None
            claims.append(ect.Claim(slot=slot, value=value, evidence=ids, transform=op))
        return ect.Certificate(
            task_id=_TASK,
            descriptor_digest=ect.descriptor_digest(self.descriptor),
            ledger_digest=ect.ledger_digest(receipts),
            claims=tuple(claims),
        )


Inputs = tuple[ect.TaskDescriptor, ect.Requirements, ect.Ledger, ect.Certificate | None]


def _inputs(task: _Task, receipts: Sequence[ect.Receipt], cert: ect.Certificate | None) -> Inputs:
    return (
        task.descriptor,
        task.requirements,
        ect.Ledger(task_id=_TASK, receipts=tuple(receipts)),
        cert,
    )


_DECISION_OPS: Final[tuple[Transform, ...]] = (
    Sum(),
    Mean(),
    Min(),
    Max(),
    ArgMax(key="entity"),
    Difference(key="entity", minuend="a", subtrahend="b"),
    Ratio(key="entity", numerator="a", denominator="c"),
)


def _numeric_variants(value: Any) -> list[tuple[str, Any]]:
    """Claims to try for a replayed value: itself, other JSON spellings, and near misses."""
    out: list[tuple[str, Any]] = [("replayed", value)]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return out
    if isinstance(value, int):
        if abs(value) < 2**1024:  # a double exists near it
            out.append(("as-float", float(value)))
        out += [("plus-one", value + 1), ("as-string", str(value))]
        if value in (0, 1):
            out.append(("as-bool", bool(value)))
    else:
        out += [("negated", -value if value else 1.0), ("as-string", repr(value))]
        if value.is_integer():
            out.append(("as-int", int(value)))
    return out


def _reason_cases() -> list[tuple[str, Inputs, dict[str, Any] | None]]:
    """One case per reason code the verifier raises on decodable input (and the clean ones)."""
    ex = regional_sum()
    answer = {"total_visits": 293, "busiest_site": "site-a"}
    d, req, led, cert = ex
    r1, r2, r3 = led.receipts

    def rebound(receipts: Sequence[ect.Receipt], certificate: ect.Certificate = cert) -> Inputs:
        return (
            d,
            req,
            replace(led, receipts=tuple(receipts)),
            replace(certificate, ledger_digest=ect.ledger_digest(receipts)),
        )

    def claim(index: int, **changes: Any) -> ect.Certificate:
        claims = list(cert.claims)
        claims[index] = replace(claims[index], **changes)
        return replace(cert, claims=tuple(claims))

    def slot(index: int, **changes: Any) -> ect.Requirements:
        slots = list(req.slots)
        slots[index] = replace(slots[index], **changes)
        return replace(req, slots=tuple(slots))

    forged = replace(r1, receipt_id="r1b", value=500, value_hash=ect.value_hash(500))
    cite_forged = replace(
        cert,
        claims=(
            replace(cert.claims[0], evidence=("r1b", "r2", "r3"), value=500 + 75 + 98),
            replace(cert.claims[1], evidence=("r1b", "r2", "r3")),
        ),
    )
    cases: list[tuple[str, Inputs, dict[str, Any] | None]] = [
        ("clean-no-answer", ex, None),
        ("clean-answer", ex, answer),
        ("answer-float", ex, {**answer, "total_visits": 293.0}),
        ("answer-bool", ex, {**answer, "total_visits": True}),
        ("answer-string", ex, {**answer, "total_visits": "293"}),
        ("answer-off-by-one", ex, {**answer, "total_visits": 294}),
        ("answer-within-rel-tol", ex, {**answer, "total_visits": 293 + 293e-9 * 0.5}),
        ("answer-beyond-rel-tol", ex, {**answer, "total_visits": 293 + 293e-9 * 2}),
        ("answer-missing-slot", ex, {"total_visits": 293}),
        ("answer-extra-slot", ex, {**answer, "other": 1}),
        ("claim-float", (d, req, led, claim(0, value=293.0)), answer),
        (
            "claim-negative-zero-for-zero",
            rebound(
                [replace(r, value=0, value_hash=ect.value_hash(0)) for r in led.receipts],
                claim(0, value=-0.0),
            ),
            None,
        ),
        ("no-certificate", (d, req, led, None), None),
        ("contract-task", (d, replace(req, task_id="other"), led, cert), None),
        (
            "descriptor-digest",
            (d, req, led, replace(cert, descriptor_digest=digest(Domain.VALUE, 1))),
            None,
        ),
        ("task-id", (d, req, led, replace(cert, task_id="other")), None),
        ("ledger-task", (d, req, replace(led, task_id="other"), cert), None),
        (
            "ledger-digest",
            (d, req, led, replace(cert, ledger_digest=digest(Domain.LEDGER, []))),
            None,
        ),
        ("duplicate-receipt", rebound([r1, r2, r3, r3]), None),
        ("conflicting-receipt-id", rebound([r1, r2, r3, replace(r3, call_id="c9")]), None),
        ("conflicting-receipts-cited", rebound([r1, r2, r3, forged], cite_forged), None),
        ("conflicting-receipts-uncited", rebound([r1, r2, r3, forged]), None),
        ("forged-copy-alone", rebound([forged, r2, r3], cite_forged), None),
        ("agreeing-copy", rebound([r1, r2, r3, replace(r1, receipt_id="r1b")]), None),
        ("no-claims", (d, req, led, replace(cert, claims=())), None),
        ("missing-slot", (d, req, led, replace(cert, claims=cert.claims[:1])), None),
        (
            "extra-slot",
            (d, req, led, replace(cert, claims=(*cert.claims, replace(cert.claims[1], slot="x")))),
            None,
        ),
        (
            "duplicate-slot",
            (d, req, led, replace(cert, claims=(*cert.claims, cert.claims[1]))),
            None,
        ),
        ("evidence-empty", (d, req, led, claim(0, evidence=())), None),
        ("duplicate-citation", (d, req, led, claim(0, evidence=("r1", "r2", "r3", "r1"))), None),
        ("receipt-absent", (d, req, led, claim(0, evidence=("r1", "r2", "r404"))), None),
        ("foreign-task", rebound([r1, r2, replace(r3, task_id="other")]), None),
        ("value-hash", rebound([r1, r2, replace(r3, value_hash=ect.value_hash(97))]), None),
        ("value-hash-float-copy", rebound([r1, r2, replace(r3, value=98.0)]), None),
        ("unsuccessful", rebound([r1, r2, replace(r3, exec_status="error")]), None),
        ("unvalidated", rebound([r1, r2, replace(r3, validation="unvalidated")]), None),
        ("cardinality", (d, slot(0, min_evidence=4, max_evidence=4), led, cert), None),
        ("entity", rebound([r1, r2, replace(r3, scope=replace(r3.scope, entity="site-z"))]), None),
        ("attribute", rebound([r1, r2, replace(r3, scope=replace(r3.scope, attribute="x"))]), None),
        ("level", rebound([r1, r2, replace(r3, scope=replace(r3.scope, level="district"))]), None),
        ("date", rebound([r1, r2, replace(r3, scope=replace(r3.scope, date="2024-02"))]), None),
        (
            "scope-duplicate",
            rebound(
                [r1, r2, r3, replace(r3, receipt_id="r4", call_id="c4")],
                claim(0, evidence=("r1", "r3", "r4"), value=120 + 98 + 98),
            ),
            None,
        ),
        ("source-tool", rebound([r1, r2, replace(r3, tool_id="get_series")]), None),
        ("source-path", rebound([r1, r2, replace(r3, source_path="/body/other")]), None),
        ("transform-not-allowed", (d, req, led, claim(0, transform=Max(), value=120)), None),
        ("transform-params", (d, slot(1, transforms=(ArgMax(key="date"),)), led, cert), None),
        (
            "replay-type",
            rebound([r1, r2, replace(r3, value="98", value_hash=ect.value_hash("98"))]),
            None,
        ),
        (
            "replay-null",
            rebound([r1, r2, replace(r3, value=None, value_hash=ect.value_hash(None))]),
            None,
        ),
        (
            "replay-bool",
            rebound([r1, r2, replace(r3, value=True, value_hash=ect.value_hash(True))]),
            None,
        ),
        ("value-mismatch", (d, req, led, claim(0, value=294)), None),
        ("value-null-not-allowed", (d, req, led, claim(0, value=None)), None),
        ("value-within-rel-tol", (d, req, led, claim(0, value=293 * (1 + 5e-10))), None),
        ("value-beyond-rel-tol", (d, req, led, claim(0, value=293 * (1 + 2e-9))), None),
        (
            "transform-all-null",
            (d, slot(0, transforms=(AllNull(),)), led, claim(0, transform=AllNull(), value=None)),
            None,
        ),
    ]
    ratio = _Task([1, 0], {"x": Ratio(key="entity", numerator="a", denominator="b")})
    cases.append(
        (
            "replay-undefined",
            _inputs(ratio, ratio.receipts, ratio.certificate(ratio.receipts, {"x": None})),
            None,
        )
    )
    return cases


def decision_vectors() -> list[dict[str, Any]]:
    """Reason-code cases on the worked example, then number cases over every op."""
    cases = _reason_cases()
    for set_index, values in enumerate(_VALUE_SETS[1:9], start=1):
        for op in _DECISION_OPS:
            task = _Task(values, {"x": op}, rel_tol=0.0)
            try:
                replayed = replay(op, _items(values))
            except ReplayError:
                continue
            for label, claimed in _numeric_variants(replayed):
                cert = task.certificate(task.receipts, {"x": claimed})
                name = f"values{set_index}-{msgspec.to_builtins(op)['op']}-{label}"
                cases.append((name, _inputs(task, task.receipts, cert), {"x": claimed}))
    plain: list[tuple[str, list[Any], Any]] = [
        (name, [None if part is None else msgspec.to_builtins(part) for part in inputs], answer)
        for name, inputs, answer in cases
    ]
    # Inputs that do not decode as their type: judged at the boundary (docs/verify.md).
    clean = plain[0][1]
    plain += [
        ("certificate-extra-field", [*clean[:3], {**clean[3], "extra": 1}], None),
        ("certificate-wrong-type", [*clean[:3], {**clean[3], "claims": "all"}], None),
        ("answer-not-an-object", clean, [293, "site-a"]),
        ("descriptor-not-a-descriptor", [clean[3], *clean[1:]], None),
        ("requirements-not-a-contract", [clean[0], clean[0], *clean[2:]], None),
        ("ledger-not-a-ledger", [*clean[:2], {"receipts": []}, clean[3]], None),
    ]
    out = []
    for index, (name, parts, answer) in enumerate(plain):
        wire = [None if part is None else _wire(part) for part in parts]
        decision = ect.verify_json(
            *wire,  # type: ignore[arg-type]
            answer=None if answer is None else _wire(answer),
        )
        out.append(
            {
                "id": f"decision-{index:03d}-{name}",
                "descriptor": parts[0],
                "requirements": parts[1],
                "ledger": parts[2],
                "certificate": parts[3],
                "answer": answer,
                "decision": decision.decision.value,
                "reason_codes": [code.value for code in decision.reason_codes],
                "answer_checked": decision.answer_checked,
            }
        )
    return out


def _wire(part: Any) -> bytes:
    """The bytes an input is verified from: Python's JSON writer, exact for ints and floats."""
    return json.dumps(part, allow_nan=False).encode()


FILES: Final[dict[str, Callable[[], list[dict[str, Any]]]]] = {
    "digests.json": digest_vectors,
    "transforms.json": transform_vectors,
    "decisions.json": decision_vectors,
}


def render(vectors: list[dict[str, Any]]) -> bytes:
    """The file bytes: a JSON array, one vector per line, by Python's JSON writer (exact for
    every int and float), keys sorted, ASCII only."""
    lines = [
        json.dumps(v, sort_keys=True, ensure_ascii=True, separators=(",", ":")) for v in vectors
    ]
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode()


def main(argv: list[str]) -> int:
    """Write (or, with --check, compare) every vector file."""
    sys.set_int_max_str_digits(0)  # the 4300-digit integer vector is written as text
    check = "--check" in argv
    stale = []
    for name, build in FILES.items():
        data = render(build())
        path = OUT / name
        if check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"{path}: {len(json.loads(data))} vectors")
    if stale:
        print(f"stale: {', '.join(stale)} (run scripts/make_conformance_vectors.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
