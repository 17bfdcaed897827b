"""A bundled worked example: one small task with a valid certificate.

``regional_sum()`` builds it in code (the same values the JSON files under ``regional-sum/``
hold); ``scripts/make_example.py`` writes those files and a test checks they are current.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from harness.canonical import Domain, digest
from harness.ect.model import (
    Certificate,
    Claim,
    Ledger,
    Receipt,
    Requirements,
    Scope,
    ScopeRule,
    SlotRequirement,
    Source,
    TaskDescriptor,
    descriptor_digest,
    ledger_digest,
    value_hash,
)
from harness.ect.transforms import ArgMax, Sum

__all__ = ["EXAMPLE_DIR_NAME", "Example", "regional_sum"]

EXAMPLE_DIR_NAME: Final = "regional-sum"

_VISITS: Final = {"site-a": 120, "site-b": 75, "site-c": 98}


class Example(NamedTuple):
    """The four verifier inputs of one task."""

    descriptor: TaskDescriptor
    requirements: Requirements
    ledger: Ledger
    certificate: Certificate


def _receipt(task_id: str, n: int, site: str, value: Any) -> Receipt:
    args = {"entity": site, "metric": "visits", "date": "2024-03"}
    response = {"status": "ok", "body": {"status": "ok", "value": value}}
    return Receipt(
        receipt_id=f"r{n}",
        task_id=task_id,
        call_id=f"c{n}",
        tool_id="get_metric",
        args_hash=digest(Domain.TOOL_ARGS, args),
        response_hash=digest(Domain.TOOL_RESPONSE, response),
        source_path="/body/value",
        value=value,
        value_hash=value_hash(value),
        exec_status="ok",
        validation="validated",
        scope=Scope(entity=site, attribute="visits", level="site", date="2024-03"),
    )


def regional_sum() -> Example:
    """District D1's total visits in 2024-03 and its busiest site, certified from 3 receipts."""
    descriptor = TaskDescriptor(
        task_id="example-regional-sum",
        family="aggregation",
        world_id="ex",
        params={"district": "D1", "metric": "visits", "date": "2024-03"},
        required_slots=("total_visits", "busiest_site"),
    )
    scope = ScopeRule(
        entities=tuple(_VISITS),
        attributes=("visits",),
        levels=("site",),
        dates=("2024-03",),
        sources=(Source(tool_id="get_metric", source_path="/body/value"),),
    )
    requirements = Requirements(
        task_id=descriptor.task_id,
        descriptor_digest=descriptor_digest(descriptor),
        slots=(
            SlotRequirement(
                slot="total_visits",
                transforms=(Sum(),),
                scope=scope,
                min_evidence=3,
                max_evidence=3,
                nullable=False,
                abs_tol=0.0,
                rel_tol=1e-9,
            ),
            SlotRequirement(
                slot="busiest_site",
                transforms=(ArgMax(key="entity"),),
                scope=scope,
                min_evidence=3,
                max_evidence=3,
                nullable=False,
            ),
        ),
    )
    receipts = tuple(
        _receipt(descriptor.task_id, n, site, value)
        for n, (site, value) in enumerate(_VISITS.items(), start=1)
    )
    ledger = Ledger(task_id=descriptor.task_id, receipts=receipts)
    evidence = tuple(r.receipt_id for r in receipts)
    certificate = Certificate(
        task_id=descriptor.task_id,
        descriptor_digest=descriptor_digest(descriptor),
        ledger_digest=ledger_digest(receipts),
        claims=(
            Claim(slot="total_visits", value=293, evidence=evidence, transform=Sum()),
            Claim(
                slot="busiest_site",
                value="site-a",
                evidence=evidence,
                transform=ArgMax(key="entity"),
            ),
        ),
    )
    return Example(descriptor, requirements, ledger, certificate)
