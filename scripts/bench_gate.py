"""Benchmark: what one gated ``submit`` costs beyond the verifier it runs.

Two inputs: the verifier benchmark's certificate (3 claims x 12 receipts, from
``bench_verifier.build``) recorded through a trusted extractor, and one benchmark task (world 00,
aggregation: 4 claims x 4 receipts) recorded through the catalog's extractors. For each, the
model's claims and answer arrive as JSON text, as a framework hands them over.

- verifier: ``harness.ect.verify`` on the typed inputs with the answer bound (what the gate
  itself calls);
- gate: ``EctSession.submit(claims_text, answer_text)``: bound and decode the model's text
  (duplicate keys refused), build the certificate (digests filled from the kept receipt
  digests), verify, write the feedback, keep the submission. Each submission, accepted or
  refused (the answer altered), is the first of a fresh session (recording is not timed).

Target: gate <= verifier + 20 %. Fastest of several interleaved rounds, in thread CPU time
(the machine is shared: wall time would measure the neighbours).
Run: .venv/bin/python scripts/bench_gate.py
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_verifier import build

from harness import ect
from harness.gate import EctSession, Observation, ToolResult, catalog_sources
from harness.tools.catalog import call_tool
from harness.worlds import build_tasks, generate_world

ROUNDS = 15
BATCH = 200


def read_site(call: ToolResult) -> list[Observation]:
    """The bench's trusted extractor: one site value per result."""
    result = call.result
    scope = ect.Scope(entity=result["site"], attribute="visits", level="site", date="2024-03")
    return [
        Observation(
            source_path="/body/value",
            value=result["value"],
            scope=scope,
            ok=True,
            validated=True,
        )
    ]


class Case:
    """One input: a way to open a recorded session, the claims and answers as text."""

    def __init__(
        self,
        name: str,
        opener: Callable[[int], EctSession],
        claims: str,
        answer: dict[str, Any],
        altered: dict[str, Any],
    ) -> None:
        self.name = name
        self.opener = opener
        self.claims = claims
        self.answer = json.dumps(answer)
        self.altered = json.dumps(altered)
        self.answer_value = answer
        self.altered_value = altered


def verifier_case() -> Case:
    descriptor, requirements, ledger, certificate = build()
    results = [{"site": r.scope.entity, "value": r.value} for r in ledger.receipts]

    def opener(refusals: int) -> EctSession:
        session = EctSession(
            descriptor, requirements, {"get_metric": read_site}, max_refusals=refusals
        )
        for n, result in enumerate(results, start=1):
            session.record_call("get_metric", {"entity": result["site"]}, result, call_id=f"c{n}")
        return session

    ids = [f"c{n}.0" for n in range(1, len(results) + 1)]
    claims = [{**msgspec.to_builtins(c), "evidence": ids} for c in certificate.claims]
    answer = {c.slot: c.value for c in certificate.claims}
    altered = {**answer, "total": answer["total"] + 1}
    return Case("3 claims x 12 receipts", opener, json.dumps(claims), answer, altered)


def benchmark_case() -> Case:
    world = generate_world("00")
    task = build_tasks(world)[1]  # aggregation
    plain = world.to_plain()
    specs = [*task.discovery, *(i.call for p in task.plan for i in p.evidence)]
    unique = list({json.dumps([s.tool_id, s.args], sort_keys=True): s for s in specs}.values())
    results = [call_tool(plain, s.tool_id, s.args) for s in unique]

    def opener(refusals: int) -> EctSession:
        session = EctSession(
            task.descriptor, task.requirements, catalog_sources(), max_refusals=refusals
        )
        for n, (spec, result) in enumerate(zip(unique, results, strict=True), start=1):
            session.record_call(spec.tool_id, spec.args, result, call_id=f"c{n}")
        return session

    probe = opener(1)
    by_scope = {
        (r.scope.entity, r.scope.date): r.receipt_id
        for r in probe.receipts
        if r.tool_id == "get_metric"
    }
    claims = [
        {
            "slot": p.slot,
            "value": task.gold[p.slot],
            "evidence": [by_scope[(i.scope.entity, i.scope.date)] for i in p.evidence],
            "transform": msgspec.to_builtins(p.transform),
        }
        for p in task.plan
    ]
    altered = {**task.gold, task.plan[0].slot: 10**6}
    name = f"{task.task_id}: {len(claims)} claims x {len(by_scope)} receipts"
    return Case(name, opener, json.dumps(claims), dict(task.gold), altered)


def measure(case: Case) -> dict[str, float]:  # noqa: C901 - one interleaved timing loop over every measure
    """Microseconds per call of each measure, the fastest of ``ROUNDS`` interleaved rounds."""
    probe = case.opener(1)
    assert probe.submit(case.claims, case.answer).complete, "the case must be accepted"
    descriptor, requirements = probe.descriptor, probe.requirements
    ledger = probe.ledger()
    certificate = ect.Certificate(
        task_id=descriptor.task_id,
        descriptor_digest=ect.descriptor_digest(descriptor),
        ledger_digest=ect.ledger_digest(ledger.receipts),
        claims=msgspec.json.decode(case.claims, type=tuple[ect.Claim, ...]),
    )
    certificate_bytes = msgspec.json.encode(certificate)

    def typed(answer: dict[str, Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(BATCH):
                ect.verify(descriptor, requirements, ledger, certificate, answer=answer)

        return run

    def from_bytes(answer_text: str) -> Callable[[], None]:
        # The verifier judging the untrusted inputs from their bytes (strict decoding, as
        # ``harness verify`` does), the trusted ones typed.
        answer_bytes = answer_text.encode()
        malformed = ect.ReasonCode.ADAPTER_CERTIFICATE_MALFORMED

        def run() -> None:
            for _ in range(BATCH):
                cert = ect.decode(certificate_bytes, ect.Certificate, malformed)
                plain = ect.decode(
                    answer_bytes, dict[str, Any], ect.ReasonCode.ADAPTER_ANSWER_MALFORMED
                )
                ect.verify(descriptor, requirements, ledger, cert, answer=plain)

        return run

    def gate_accept() -> Callable[[], None]:
        sessions: list[EctSession] = []

        def run() -> None:
            for session in sessions:
                session.submit(case.claims, case.answer)

        def prepare() -> None:  # opening and recording are not a submit's cost
            sessions[:] = [case.opener(1) for _ in range(BATCH)]

        run.prepare = prepare  # type: ignore[attr-defined]
        return run

    def gate_refuse() -> Callable[[], None]:
        sessions: list[EctSession] = []

        def run() -> None:
            for session in sessions:
                session.submit(case.claims, case.altered)

        def prepare() -> None:
            sessions[:] = [case.opener(10**9) for _ in range(BATCH)]

        run.prepare = prepare  # type: ignore[attr-defined]
        return run

    runs: dict[str, Callable[[], None]] = {
        "verify complete": typed(case.answer_value),
        "bytes complete": from_bytes(case.answer),
        "gate complete": gate_accept(),
        "verify continue": typed(case.altered_value),
        "bytes continue": from_bytes(case.altered),
        "gate continue": gate_refuse(),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(ROUNDS):
        for name, run in runs.items():
            prepare = getattr(run, "prepare", None)
            if prepare is not None:
                prepare()
            # CPU time of this thread: on a shared machine, wall time measures the neighbours.
            # The collector is off while timing, as timeit does, for every measure alike.
            gc.collect()
            gc.disable()
            start = time.thread_time()
            run()
            elapsed = time.thread_time() - start
            gc.enable()
            best[name] = min(best[name], elapsed / BATCH)
    return {name: seconds * 1e6 for name, seconds in best.items()}


def main() -> None:
    """Print the figures."""
    print("gate benchmark: one submit (claims and answer as JSON text) vs the verifier it runs")
    print("  (a) verify on typed inputs; (b) verify after strictly decoding the certificate and")
    print("  answer bytes; overhead = gate / baseline - 1; target <= 20 %")
    for case in (verifier_case(), benchmark_case()):
        got = measure(case)
        print(f"  {case.name}")
        for verdict in ("complete", "continue"):
            v, b, g = (got[f"{k} {verdict}"] for k in ("verify", "bytes", "gate"))
            print(
                f"    {verdict:>8}: (a) {v:6.1f} us  (b) {b:6.1f} us  gate {g:6.1f} us  "
                f"overhead vs (a) {(g - v) / v * 100:+5.1f} %  vs (b) {(g - b) / b * 100:+5.1f} %"
            )


if __name__ == "__main__":
    main()
