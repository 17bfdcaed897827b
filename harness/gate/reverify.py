"""A gated run decided again from its record alone, and written out as ``harness verify`` files.

``reverify`` rebuilds each submission's four inputs as bytes (descriptor, contract, the ledger of
the calls recorded before it, the certificate, the answer) and runs the verifier's byte entry
point on them, then replays the refusal count: it needs nothing but the ``GateRecord`` (which an
Inspect log or any other transcript can carry). ``export_record`` is the gate's only I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from harness.ect.boundary import BoundaryError, check_json, verify_json
from harness.ect.model import Ledger, Verdict, ledger_digest
from harness.ect.reasons import ReasonCode
from harness.errors import ExportError
from harness.gate.session import GateReason, GateRecord, Submission
from harness.safeio import write_atomic

__all__ = ["Reverified", "export_record", "reverify", "submission_files"]

_FILES: Final = ("ledger.json", "certificate.json", "answer.json")


class Reverified(msgspec.Struct, frozen=True, kw_only=True):
    """One submission decided again, beside what the live gate decided."""

    index: int
    verdict: Verdict
    reason_codes: tuple[str, ...]
    recorded_verdict: Verdict
    recorded_codes: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        """True when the offline decision is the live one (verdict and every reason code)."""
        return (self.verdict, self.reason_codes) == (self.recorded_verdict, self.recorded_codes)


def _as_sent(text: str) -> Any:
    """The model's input as the JSON it was, or as a JSON string when it was not strict JSON."""
    data = text.encode("utf-8")
    try:
        check_json(data, ReasonCode.ADAPTER_CERTIFICATE_MALFORMED)
        return msgspec.json.decode(data)
    except (BoundaryError, msgspec.DecodeError, ValueError, RecursionError):
        return text


def _certificate_bytes(record: GateRecord, submission: Submission, ledger: Ledger) -> bytes:
    if submission.certificate is not None:
        return msgspec.json.encode(submission.certificate)
    # The claims were refused before a certificate existed: wrap them as the model sent them,
    # so the verifier refuses the file for the same reason.
    return msgspec.json.encode(
        {
            "schema_version": 1,
            "task_id": record.descriptor.task_id,
            "descriptor_digest": record.requirements.descriptor_digest,
            "ledger_digest": ledger_digest(ledger.receipts),
            "claims": _as_sent(submission.claims),
        }
    )


def submission_files(record: GateRecord, index: int) -> dict[str, bytes]:
    """The ``harness verify`` inputs of submission ``index`` (1-based), by file name.

    Raises:
        IndexError: no such submission.
    """
    if not 1 <= index <= len(record.submissions):
        raise IndexError(f"no submission {index} (the record has {len(record.submissions)})")
    submission = record.submissions[index - 1]
    receipts = tuple(r for call in record.calls[: submission.calls] for r in call.receipts)
    ledger = Ledger(task_id=record.descriptor.task_id, receipts=receipts)
    return {
        "descriptor.json": msgspec.json.encode(record.descriptor),
        "requirements.json": msgspec.json.encode(record.requirements),
        "ledger.json": msgspec.json.encode(ledger),
        "certificate.json": _certificate_bytes(record, submission, ledger),
        "answer.json": msgspec.json.encode(_as_sent(submission.answer)),
    }


def _codes(submission: Submission) -> tuple[str, ...]:
    codes = tuple(code.value for code in submission.decision.reason_codes)
    if submission.verdict is Verdict.STUCK:
        codes = (*codes, GateReason.GATE_REFUSAL_BUDGET_SPENT.value)
    return codes


def reverify(record: GateRecord) -> tuple[Reverified, ...]:
    """Every submission of ``record`` decided again from bytes (see the module docstring)."""
    out: list[Reverified] = []
    refusals = 0
    for submission in record.submissions:
        files = submission_files(record, submission.index)
        decision = verify_json(
            files["descriptor.json"],
            files["requirements.json"],
            files["ledger.json"],
            files["certificate.json"],
            answer=files["answer.json"],
        )
        verdict = decision.decision
        codes = tuple(code.value for code in decision.reason_codes)
        if verdict is not Verdict.COMPLETE:
            refusals += 1
            verdict = Verdict.STUCK if refusals >= record.max_refusals else Verdict.CONTINUE
            if verdict is Verdict.STUCK:
                codes = (*codes, GateReason.GATE_REFUSAL_BUDGET_SPENT.value)
        out.append(
            Reverified(
                index=submission.index,
                verdict=verdict,
                reason_codes=codes,
                recorded_verdict=submission.verdict,
                recorded_codes=_codes(submission),
            )
        )
    return tuple(out)


def export_record(record: GateRecord, directory: Path) -> tuple[Path, ...]:
    """Write ``record`` as files ``harness verify`` reads; returns the files written.

    Layout: ``record.json`` (the whole record), ``descriptor.json``, ``requirements.json``, and
    per submission ``submission-NN/`` with ``ledger.json``, ``certificate.json``, ``answer.json``
    and ``decision.json`` (the live verifier decision). Re-verify one with
    ``harness verify --descriptor descriptor.json --requirements requirements.json
    --ledger submission-01/ledger.json --certificate submission-01/certificate.json
    --answer submission-01/answer.json``.

    Raises:
        ExportError: ``directory`` exists already, or a file cannot be written.
    """
    try:
        directory.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise ExportError(f"{directory} exists already: export into a new directory") from None
    except OSError as e:
        raise ExportError(f"cannot create {directory}: {e.strerror or e}") from e
    written: list[Path] = []

    def put(path: Path, data: bytes) -> None:
        try:
            write_atomic(path, data + b"\n")
        except OSError as e:
            raise ExportError(f"cannot write {path}: {e.strerror or e}") from e
        written.append(path)

    put(directory / "record.json", msgspec.json.encode(record))
    for submission in record.submissions:
        files = submission_files(record, submission.index)
        if submission.index == 1:
            put(directory / "descriptor.json", files["descriptor.json"])
            put(directory / "requirements.json", files["requirements.json"])
        sub = directory / f"submission-{submission.index:02d}"
        try:
            sub.mkdir()
        except OSError as e:
            raise ExportError(f"cannot create {sub}: {e.strerror or e}") from e
        for name in _FILES:
            put(sub / name, files[name])
        put(sub / "decision.json", msgspec.json.encode(submission.decision))
    if not record.submissions:
        put(directory / "descriptor.json", msgspec.json.encode(record.descriptor))
        put(directory / "requirements.json", msgspec.json.encode(record.requirements))
    return tuple(written)
