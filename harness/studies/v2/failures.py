"""Provider failures that entered the V2 results: what the report says next to Table 4.

The paper's frozen rule maps a final provider or parse failure to ``continue`` and keeps it in
the denominator; the paper also *reports* them ("324 calls included seven successful transport
retries and one final transport failure"). ``provider_failures`` counts, from the committed
cells' audit groups (each cell's own planner and critic attempts; the preflight request and
attempts bound as orphaned are not calls of the cell):

- a *call* is one request: its first attempt and the retries the frozen retry rule made of it;
- a *final failure* is a call whose last attempt did not succeed; it is classed as
  ``transport`` (no reply came), ``rate limit`` (429), ``authentication`` (401, 403, a rejected
  key), ``server error`` (5xx, 404 and any other HTTP status) or ``unusable reply`` (a 200 whose
  content the schema refuses, blocked, truncated, empty, or a plug-in's error);
- *infrastructure* final failures are those where no model answered (``INFRASTRUCTURE_FAILURES``:
  429, 401/403, 404, no connection). Five in a row stop the run (the breaker); an isolated one is
  a final failure like any other, in the denominator, and since its cell is committed ``v2
  resume`` never runs it again: the report says how many there are.

Per pipeline the counts cover Table 4's scope (primary cells); the sentence and the banner
cover every committed cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from harness.providers.attempts import AttemptRecord
from harness.providers.kinds import AttemptStatus, FailureKind, Role, infrastructure_cause
from harness.store import CellRecord
from harness.studies.v2.analysis import PIPELINE_LABELS
from harness.studies.v2.outcomes import POLICIES, CellResult

__all__ = [
    "FAILURE_CLASSES",
    "PipelineFailures",
    "ProviderFailures",
    "failure_class",
    "provider_failures",
]

FAILURE_CLASSES: Final = (
    "transport",
    "rate limit",
    "authentication",
    "server error",
    "unusable reply",
)
"""The classes a final provider failure is reported in, in Table 4's column order."""

_UNUSABLE: Final = frozenset(
    {
        FailureKind.MALFORMED_RESPONSE,
        FailureKind.BLOCKED,
        FailureKind.NO_CANDIDATES,
        FailureKind.MAX_TOKENS,
        FailureKind.UNEXPECTED_FINISH,
        FailureKind.EMPTY_OUTPUT,
        FailureKind.OUTPUT_NOT_JSON,
        FailureKind.SCHEMA_MISMATCH,
        FailureKind.PLUGIN_ERROR,
    }
)
_HTTP: Final = frozenset(
    {
        FailureKind.NOT_FOUND,
        FailureKind.HTTP_CLIENT_ERROR,
        FailureKind.HTTP_SERVER_ERROR,
        FailureKind.HTTP_UNEXPECTED_STATUS,
    }
)


def failure_class(kind: FailureKind | None) -> str:
    """The report class of a failed attempt's kind (see the module docstring); a failure the
    kinds do not name (None, or the client library's own) counts as transport."""
    if kind is FailureKind.RATE_LIMITED:
        return "rate limit"
    if kind is FailureKind.AUTHENTICATION_FAILED:
        return "authentication"
    if kind in _HTTP:
        return "server error"
    if kind in _UNUSABLE:
        return "unusable reply"
    return "transport"


class PipelineFailures(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One pipeline's final provider failures over Table 4's scope, by class."""

    policy: str
    label: str
    by_class: dict[str, int]

    @property
    def total(self) -> int:
        """Final failures of every class."""
        return sum(self.by_class.values())


class ProviderFailures(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Provider calls of the committed cells and the failures that entered the results."""

    calls: int
    attempts: int
    retries: int
    successful_retries: int
    final_failures: dict[str, int]
    infrastructure: dict[str, int]
    pipelines: tuple[PipelineFailures, ...]

    def sentence(self) -> str:
        """The paper-style sentence: calls, retries and final failures mapped to continue."""
        finals = sum(self.final_failures.values())
        kinds = ", ".join(f"{n} {name}" for name, n in self.final_failures.items() if n)
        return (
            f"Provider calls: {self.calls:,} calls ({self.attempts:,} attempts) included "
            f"{self.retries} retries ({self.successful_retries} successful) and {finals} final "
            f"provider failures{f' ({kinds})' if kinds else ''}; under the frozen rule each "
            "final failure maps to continue and stays in the denominator."
        )

    def banner(self) -> str:
        """The warning when infrastructure failures entered the denominator ("" when none)."""
        total = sum(self.infrastructure.values())
        if not total:
            return ""
        causes = ", ".join(f"{name} {n}" for name, n in self.infrastructure.items())
        if total == 1:
            return (
                "INFRASTRUCTURE FAILURES IN THE RESULTS: 1 final provider failure is one where "
                f"no model answered ({causes}); it maps to continue and stays in the "
                "denominator, and `harness v2 resume` cannot run it again (its cell is "
                "committed)."
            )
        return (
            f"INFRASTRUCTURE FAILURES IN THE RESULTS: {total} final provider failures are ones "
            f"where no model answered ({causes}); they map to continue and stay in the "
            "denominator, and `harness v2 resume` cannot run them again (their cells are "
            "committed)."
        )


def _calls(record: CellRecord) -> list[list[AttemptRecord]]:
    """The cell's own planner and critic calls, each its attempts in order."""
    cell_id = record.row.get("cell_id")
    calls: list[list[AttemptRecord]] = []
    for plain in record.audit:
        try:
            attempt = msgspec.convert(plain, AttemptRecord, strict=True)
        except msgspec.ValidationError:
            continue  # the audit reports an undecodable attempt; here it is no call
        if attempt.role is Role.PREFLIGHT or attempt.cell_id != cell_id:
            continue
        if attempt.attempt_index == 0 or not calls:
            calls.append([attempt])
        else:
            calls[-1].append(attempt)
    return calls


def provider_failures(
    records: Sequence[CellRecord], results: Sequence[CellResult]
) -> ProviderFailures:
    """Count the calls and final failures of the committed cells ``records`` (``results``:
    their decoded results, in the same order)."""
    finals = dict.fromkeys(FAILURE_CLASSES, 0)
    causes: dict[str, int] = {}
    per: dict[str, dict[str, int]] = {p: dict.fromkeys(FAILURE_CLASSES, 0) for p in POLICIES}
    calls = attempts = retries = recovered = 0
    for record, result in zip(records, results, strict=True):
        for call in _calls(record):
            calls += 1
            attempts += len(call)
            retries += len(call) - 1
            last = call[-1]
            if last.status is AttemptStatus.SUCCEEDED:
                recovered += 1 if len(call) > 1 else 0
                continue
            name = failure_class(last.failure_kind)
            finals[name] += 1
            cause = infrastructure_cause(last.failure_kind)
            if cause is not None:
                causes[cause.value] = causes.get(cause.value, 0) + 1
            if result.primary:
                per[result.policy][name] += 1
    return ProviderFailures(
        calls=calls,
        attempts=attempts,
        retries=retries,
        successful_retries=recovered,
        final_failures=finals,
        infrastructure=dict(sorted(causes.items())),
        pipelines=tuple(
            PipelineFailures(policy=p, label=PIPELINE_LABELS[p], by_class=per[p]) for p in POLICIES
        ),
    )
