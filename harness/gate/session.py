"""One gated agent run: trusted receipts in, model-authored claims judged, every step kept.

``EctSession`` is framework-neutral. The agent loop reports each finished tool call
(``record_call``): the trusted extractor for that tool reads the raw result, and the session turns
what it read into receipts (ids ``<call_id>.<n>``, every hash filled here). When the model wants
to stop it calls ``submit(claims, answer)``: the model authors only the claims and the answer;
the session builds the certificate around them (task id, descriptor digest, the *current*
ledger digest) and runs the verifier with the answer bound. The result is a ``GateDecision``:
the verdict, the verifier's decision, and feedback text for the model. After ``max_refusals``
refusals the verdict is ``stuck``.

Nothing the model sends raises: claims or an answer that are not JSON, not of the schema or too
large are a refusal with an ``ADAPTER_*`` code. A result the extractor cannot read yields no
receipt and a note; the call still returns to the model. ``record_call()`` and ``submit()`` are
thread-safe; ``arecord_call()`` and ``asubmit()`` serve async loops (the work is a few
milliseconds of CPU with no I/O, so they run it inline).

Every call and submission is kept (``to_record()``: a ``GateRecord``, JSON):
``harness.gate.reverify`` decides a record again from its bytes alone, and
``harness.gate.export_record`` writes the files ``harness verify`` reads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest, ensure_finite
from harness.ect.boundary import BoundaryError, check_json
from harness.ect.model import (
    Certificate,
    Claim,
    Decision,
    Finding,
    Ledger,
    Receipt,
    Requirements,
    TaskDescriptor,
    Verdict,
    descriptor_digest,
)
from harness.ect.reasons import ReasonCode
from harness.ect.verifier import verify
from harness.errors import GateError
from harness.gate.extract import Extractor, ToolResult, receipts_of
from harness.gate.feedback import feedback_text

__all__ = [
    "DEFAULT_MAX_REFUSALS",
    "MAX_MODEL_INPUT_BYTES",
    "EctSession",
    "GateDecision",
    "GateReason",
    "GateRecord",
    "ModelInput",
    "RecordedCall",
    "Submission",
]

DEFAULT_MAX_REFUSALS: Final = 3
MAX_MODEL_INPUT_BYTES: Final = 1024 * 1024
"""The most bytes of claims (or of an answer) one submission may carry; more is a refusal."""

_MAX_NOTE: Final = 200
_KEPT_HEAD: Final = 4096
# Built once: a decoder for a generic type is costly to set up on every call.
_CLAIMS: Final = msgspec.json.Decoder(tuple[Claim, ...])
_ANSWER: Final = msgspec.json.Decoder(dict[str, Any])

ModelInput = str | bytes | Sequence[Any] | Mapping[str, Any] | None
"""What a model hands ``submit``: JSON text, or the value its framework already parsed."""


class GateReason(StrEnum):
    """The gate's own reason codes (the verifier's are ``harness.ect.ReasonCode``)."""

    GATE_REFUSAL_BUDGET_SPENT = "GATE_REFUSAL_BUDGET_SPENT"
    """``max_refusals`` submissions were refused: the run stops as stuck."""
    GATE_RUN_ENDED_UNCERTIFIED = "GATE_RUN_ENDED_UNCERTIFIED"
    """An adapter's loop ended without a ``complete`` or ``stuck`` decision (the model stopped
    in plain text, or the framework's turn limit): the run's outcome is ``continue``."""


class RecordedCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool call as the session recorded it: its receipts, or why it has none."""

    call_id: str
    tool_id: str
    receipts: tuple[Receipt, ...]
    note: str | None = None


class Submission(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``submit``: what the model sent, the certificate built around it, the decision.

    ``calls`` is how many recorded calls formed the ledger. ``claims``/``answer`` are the model's
    input as text (its JSON, cut at the size bound when over it), so a refused submission
    re-verifies to the same refusal.
    """

    index: int
    calls: int
    claims: str
    answer: str
    certificate: Certificate | None
    decision: Decision
    verdict: Verdict
    refusals: int


class GateRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Everything one gated run decided, enough to decide it again offline."""

    schema_version: Literal[1] = 1
    descriptor: TaskDescriptor
    requirements: Requirements
    max_refusals: int
    calls: tuple[RecordedCall, ...]
    submissions: tuple[Submission, ...]


class GateDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The gate's answer to one ``submit``.

    ``verdict`` is ``complete`` (stop: the answer is certified), ``continue`` (refused; tell the
    model ``feedback``) or ``stuck`` (refused and the refusal budget is spent: stop, not done).
    ``decision`` is the verifier's own; ``answer`` the certified answer when complete.
    """

    verdict: Verdict
    decision: Decision
    feedback: str
    submission: int
    refusals: int
    max_refusals: int
    answer: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        """True only for a certified answer."""
        return self.verdict is Verdict.COMPLETE

    @property
    def reason_codes(self) -> tuple[str, ...]:
        """The verifier's codes, then the gate's (``GATE_REFUSAL_BUDGET_SPENT`` when stuck)."""
        codes = tuple(code.value for code in self.decision.reason_codes)
        if self.verdict is Verdict.STUCK:
            codes = (*codes, GateReason.GATE_REFUSAL_BUDGET_SPENT.value)
        return codes


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:_MAX_NOTE]


class _Input(msgspec.Struct, frozen=True, kw_only=True):
    """A model input as bytes for the decoder (None when refused before decoding), and its
    text as the record keeps it."""

    data: bytes | None
    text: str
    problem: str | None


def _model_input(value: ModelInput) -> _Input:
    """Bound and normalise one model input; never raises. Nothing is parsed here."""
    if isinstance(value, str | bytes | bytearray):
        data = value.encode("utf-8", "replace") if isinstance(value, str) else bytes(value)
    else:
        try:
            ensure_finite(value)
            data = msgspec.json.encode(value)
        except (TypeError, ValueError, OverflowError, RecursionError) as e:
            text = repr(value)[:MAX_MODEL_INPUT_BYTES]
            return _Input(data=None, text=text, problem=f"not JSON: {_one_line(e)}")
    # The text kept for a refused input never parses as JSON, so re-verification refuses it too.
    if len(data) > MAX_MODEL_INPUT_BYTES:
        head = data[:_KEPT_HEAD].decode("utf-8", "replace")
        text = f"[refused: {len(data)} bytes] {head}"
        return _Input(data=None, text=text, problem=f"larger than {MAX_MODEL_INPUT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return _Input(data=None, text=repr(data[:_KEPT_HEAD]), problem=f"not UTF-8: {e.reason}")
    return _Input(data=data, text=text, problem=None)


_SCALARS: Final = (str, int, float, bool, type(None))


def _check_plain(value: Any) -> None:
    """Refuse a value that is not plain JSON data (a set, bytes, an object): its bytes, and so
    its hashes, would not be the same from one run to the next.

    Raises:
        TypeError: naming the first such type.
    """
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a {type(key).__name__} key is not JSON")
            _check_plain(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_plain(item)
    else:
        raise TypeError(f"a {type(value).__name__} is not JSON")


class EctSession:
    """ECT as the stop condition of one agent run (see the module docstring).

    Args:
        descriptor: the trusted task descriptor.
        requirements: the trusted contract for that task.
        sources: the trusted receipt source of each evidence tool: tool id -> extractor. A call
            of a tool not named here is recorded with no receipt.
        max_refusals: refusals after which the verdict is ``stuck`` (at least 1).

    Raises:
        GateError: the contract is not the descriptor's, or ``max_refusals`` is below 1.
    """

    def __init__(
        self,
        descriptor: TaskDescriptor,
        requirements: Requirements,
        sources: Mapping[str, Extractor],
        *,
        max_refusals: int = DEFAULT_MAX_REFUSALS,
    ) -> None:
        if max_refusals < 1:
            raise GateError(f"max_refusals must be at least 1, not {max_refusals}")
        if requirements.task_id != descriptor.task_id:
            raise GateError(
                f"the contract is for task {requirements.task_id!r}, "
                f"the descriptor for {descriptor.task_id!r}"
            )
        self._descriptor_digest = descriptor_digest(descriptor)
        if requirements.descriptor_digest != self._descriptor_digest:
            raise GateError("the contract's descriptor digest is not the descriptor's")
        slots = [s.slot for s in requirements.slots]
        if sorted(slots) != sorted(descriptor.required_slots):
            raise GateError("the contract's slots are not the descriptor's required slots")
        self._descriptor = descriptor
        self._requirements = requirements
        self._sources = dict(sources)
        self._max_refusals = max_refusals
        self._lock = threading.Lock()
        self._calls: list[RecordedCall] = []
        self._receipts: list[Receipt] = []
        self._receipt_digests: list[str] = []
        # The ledger and its digest as of the last record: a submit reads them, never rebuilds.
        self._ledger = Ledger(task_id=descriptor.task_id, receipts=())
        self._current_digest = digest(Domain.LEDGER, [])
        self._call_ids: set[str] = set()
        self._submissions: list[Submission] = []
        self._terminal: GateDecision | None = None
        self._refusals = 0

    # -- what the loop reads ---------------------------------------------------------------

    @property
    def descriptor(self) -> TaskDescriptor:
        """The trusted descriptor."""
        return self._descriptor

    @property
    def requirements(self) -> Requirements:
        """The trusted contract."""
        return self._requirements

    @property
    def max_refusals(self) -> int:
        """Refusals after which the verdict is ``stuck``."""
        return self._max_refusals

    @property
    def receipts(self) -> tuple[Receipt, ...]:
        """The ledger so far, in record order."""
        with self._lock:
            return tuple(self._receipts)

    @property
    def terminal(self) -> GateDecision | None:
        """The ``complete`` or ``stuck`` decision that ended the run, or None while it runs."""
        return self._terminal

    def ledger(self) -> Ledger:
        """The current ledger."""
        with self._lock:
            return self._ledger

    def ledger_digest(self) -> str:
        """The current ledger's digest (what a certificate submitted now is bound to)."""
        with self._lock:
            return self._ledger_digest()

    def _ledger_digest(self) -> str:
        # Equal to harness.ect.ledger_digest(receipts): computed at record time.
        return self._current_digest

    def to_record(self) -> GateRecord:
        """Everything decided so far, as one JSON-serialisable record."""
        with self._lock:
            return GateRecord(
                descriptor=self._descriptor,
                requirements=self._requirements,
                max_refusals=self._max_refusals,
                calls=tuple(self._calls),
                submissions=tuple(self._submissions),
            )

    # -- tool calls ------------------------------------------------------------------------

    def record_call(
        self, tool_id: str, args: Mapping[str, Any], result: Any, *, call_id: str | None = None
    ) -> RecordedCall:
        """Record one finished tool call through its tool's trusted extractor.

        ``call_id`` is the framework's id for the call (a fresh ``cNN`` when None; a repeated id
        gets a ``#n`` suffix so receipt ids stay unique). Never raises for a result the extractor
        cannot read: the call is recorded with no receipt and a one-line ``note``.
        """
        with self._lock:
            cid = call_id if call_id is not None else f"c{len(self._calls) + 1:02d}"
            base, n = cid, 1
            while cid in self._call_ids:
                n += 1
                cid = f"{base}#{n}"
            self._call_ids.add(cid)
            recorded = self._extract(cid, tool_id, args, result)
            self._calls.append(recorded)
            self._receipts.extend(recorded.receipts)
            if recorded.receipts:
                self._receipt_digests.extend(
                    digest(Domain.RECEIPT, receipt) for receipt in recorded.receipts
                )
                self._ledger = Ledger(
                    task_id=self._descriptor.task_id, receipts=tuple(self._receipts)
                )
                self._current_digest = digest(Domain.LEDGER, sorted(self._receipt_digests))
            return recorded

    async def arecord_call(
        self, tool_id: str, args: Mapping[str, Any], result: Any, *, call_id: str | None = None
    ) -> RecordedCall:
        """``record_call`` for async loops."""
        return self.record_call(tool_id, args, result, call_id=call_id)

    def _extract(
        self, call_id: str, tool_id: str, args: Mapping[str, Any], result: Any
    ) -> RecordedCall:
        extractor = self._sources.get(tool_id)
        if extractor is None:
            return RecordedCall(
                call_id=call_id, tool_id=tool_id, receipts=(), note="not an evidence tool"
            )
        call = ToolResult(call_id=call_id, tool_id=tool_id, args=dict(args), result=result)
        try:
            _check_plain(call.args)
            _check_plain(result)
            receipts = receipts_of(self._descriptor.task_id, call, extractor(call))
        except Exception as e:  # noqa: BLE001 - an unreadable result is no evidence, never a crash
            note = f"result not read ({type(e).__name__}: {_one_line(e)})"
            return RecordedCall(call_id=call_id, tool_id=tool_id, receipts=(), note=note)
        return RecordedCall(call_id=call_id, tool_id=tool_id, receipts=receipts)

    # -- submissions -----------------------------------------------------------------------

    def submit(self, claims: ModelInput, answer: ModelInput) -> GateDecision:
        """Judge the model's claims and answer against the current ledger. Never raises.

        After the run ended (``complete`` or ``stuck``) the terminal decision is returned again
        and nothing is recorded.
        """
        with self._lock:
            if self._terminal is not None:
                return self._terminal
            return self._submit(claims, answer)

    async def asubmit(self, claims: ModelInput, answer: ModelInput) -> GateDecision:
        """``submit`` for async loops."""
        return self.submit(claims, answer)

    def _submit(self, claims: ModelInput, answer: ModelInput) -> GateDecision:
        claims_in = _model_input(claims)
        answer_in = _model_input(answer)
        findings: list[Finding] = []
        decoded_claims: tuple[Claim, ...] | None = None
        decoded_answer: dict[str, Any] | None = None
        for what, given, code in (
            ("claims", claims_in, ReasonCode.ADAPTER_CERTIFICATE_MALFORMED),
            ("answer", answer_in, ReasonCode.ADAPTER_ANSWER_MALFORMED),
        ):
            if given.data is None:
                findings.append(Finding(code=code, path=what, got=given.problem))
                continue
            try:
                check_json(given.data, code)
                if what == "claims":
                    decoded_claims = _CLAIMS.decode(given.data)
                else:
                    decoded_answer = _ANSWER.decode(given.data)
            except BoundaryError as e:
                findings.append(Finding(code=code, path=what, got=_one_line(e)))
            except (ValueError, RecursionError, msgspec.DecodeError) as e:
                findings.append(Finding(code=code, path=what, got=_one_line(e)))
        certificate = (
            None
            if decoded_claims is None
            else Certificate(
                task_id=self._descriptor.task_id,
                descriptor_digest=self._descriptor_digest,
                ledger_digest=self._ledger_digest(),
                claims=decoded_claims,
            )
        )
        if findings or certificate is None:
            codes = tuple(sorted({f.code for f in findings}, key=list(ReasonCode).index))
            decision = Decision(
                decision=Verdict.CONTINUE, reason_codes=codes, findings=tuple(findings)
            )
        else:
            decision = verify(
                self._descriptor,
                self._requirements,
                self._ledger,
                certificate,
                answer=decoded_answer,
            )
        verdict = decision.decision
        if verdict is not Verdict.COMPLETE:
            self._refusals += 1
            verdict = Verdict.STUCK if self._refusals >= self._max_refusals else Verdict.CONTINUE
        index = len(self._submissions) + 1
        self._submissions.append(
            Submission(
                index=index,
                calls=len(self._calls),
                claims=claims_in.text,
                answer=answer_in.text,
                certificate=certificate,
                decision=decision,
                verdict=verdict,
                refusals=self._refusals,
            )
        )
        result = GateDecision(
            verdict=verdict,
            decision=decision,
            feedback=feedback_text(
                decision,
                self._requirements,
                self._receipts,
                verdict=verdict,
                refusals=self._refusals,
                max_refusals=self._max_refusals,
            ),
            submission=index,
            refusals=self._refusals,
            max_refusals=self._max_refusals,
            answer=decoded_answer if verdict is Verdict.COMPLETE else None,
        )
        if verdict is not Verdict.CONTINUE:
            self._terminal = result
        return result
