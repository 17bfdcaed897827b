"""The project's exception hierarchy: broken I/O or misuse, never a verdict.

A rejected certificate is a ``Decision``, not an exception. Every error a user can cause derives
from ``HarnessError``; the CLI catches it once and prints one sentence with its exit code.
Each area adds its family here (store, sandbox, provider, ...), so there is one home for them.
"""

from __future__ import annotations

__all__ = [
    "CredentialError",
    "GenerationConfigError",
    "HarnessError",
    "InfrastructureError",
    "InputError",
    "StoppedError",
    "UnsafeFileError",
    "MissingExtraError",
    "PromptBlindingError",
    "PromptTemplateError",
    "ProviderError",
    "ProviderOutageError",
    "ProviderSelectionError",
    "ResponseSchemaError",
    "SimulatedBehaviourMissingError",
    "SimulatedViewError",
    "AnchorMismatchError",
    "CommitOrderError",
    "DurabilityError",
    "FinalizeError",
    "FsyncError",
    "KeyInStoreError",
    "LockMismatchError",
    "NoSpaceError",
    "RecordInvalidError",
    "ScheduleMismatchError",
    "ShortWriteError",
    "StoreError",
    "StoreExistsError",
    "StoreFinalizedError",
    "StoreInProgressError",
    "StoreNotFoundError",
    "TamperError",
    "WriterLockedError",
    "WriterStoppedError",
    "AttemptStateError",
    "SandboxError",
    "SandboxPolicyError",
    "SandboxProbeError",
    "SandboxRequestError",
    "SbplSyntaxError",
    "SandboxUnavailableError",
    "SandboxZygoteError",
    "ToolChildKilledError",
    "AdmissionError",
    "BenchmarkError",
    "FaultNotApplicableError",
    "ManifestMismatchError",
    "CoveredFileMissingError",
    "ExportError",
    "LockStaleError",
    "EnvironmentMismatchError",
    "PreflightFailedError",
    "PrivacyError",
    "AuditFailedError",
    "NotReplayableError",
    "ReplayMismatchError",
    "StudyLockError",
    "StudyKindError",
    "StudyReportError",
    "ToolTraceError",
    "UnknownTaskError",
    "UnknownWorldError",
    "BreakerTrippedError",
    "CheckpointError",
    "RunStoppedError",
    "StoreHasCellsError",
    "V2ConfigError",
    "V2ScheduleError",
    "V2StudyError",
    "FastPathInvariantError",
    "RunRecordsError",
    "StaticStudyError",
    "GateError",
]


class HarnessError(Exception):
    """Base of every expected failure. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class InfrastructureError(HarnessError):
    """The machinery failed, not the policy under study (a dead key, a lost network, a killed tool
    child): the cell in flight is dropped uncommitted, committed cells stay, the store is not
    finalized, and ``v2 resume`` continues it. Never a study outcome, never in a denominator."""

    exit_code = 75


class StoppedError(HarnessError):
    """Ctrl-C or SIGTERM stopped the command (the conventional 128 + SIGINT)."""

    exit_code = 130


class InputError(HarnessError):
    """An input file is missing, unreadable or not what the command needs."""


class UnsafeFileError(InputError):
    """A file was refused before it was read: a symbolic link where none may be, not a regular
    file (a FIFO, a device, a directory), over its size bound, owned by another user, or (a
    store file about to be written) with more than one hard link.

    ``kind`` is ``symlink``, ``type``, ``size``, ``owner`` or ``hardlink`` (``harness.safeio``
    raises it).
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class MissingExtraError(HarnessError):
    """The command needs an optional dependency group that is not installed."""

    def __init__(self, extra: str, what: str) -> None:
        super().__init__(f"{what} needs the [{extra}] extra: pip install 'ect-harness[{extra}]'")
        self.extra = extra


class ProviderError(HarnessError):
    """A provider cannot be set up or used as asked (not a failed model call: that is a result)."""


class ProviderSelectionError(ProviderError):
    """The provider options contradict each other (e.g. a credential for the simulated provider)."""


class CredentialError(ProviderError):
    """The named credential source is missing, unreadable or empty. Never quotes the key."""


class ProviderOutageError(InfrastructureError, ProviderError):
    """Provider attempts keep failing for infrastructure reasons (authentication, permission,
    quota, connection): the circuit breaker stopped the run."""


class GenerationConfigError(ProviderError):
    """The frozen generation config is inconsistent or not decodable."""


class ResponseSchemaError(ProviderError):
    """A response schema uses a JSON Schema keyword outside the supported subset."""


class PromptTemplateError(ProviderError):
    """A versioned prompt file is missing or malformed."""


class PromptBlindingError(ProviderError):
    """A prompt view carries a field a blinded prompt must never see (split, fault, gold)."""


class SimulatedBehaviourMissingError(ProviderError):
    """The simulated provider was asked to play a role it has no behaviour for."""


# Store family (harness/store): the append-only run store.


class StoreError(HarnessError):
    """The run store cannot do what was asked; the message names the store and the cause."""


class StoreNotFoundError(StoreError):
    """No store exists at the given directory (or it is not a store directory)."""


class StoreExistsError(StoreError):
    """A new store was requested where one (or other data) already exists."""


class WriterLockedError(StoreError):
    """Another process holds the store's single-writer lock; the message names the holder."""


class StoreInProgressError(StoreError):
    """A command that reads a whole store met one a live writer holds (its tail is still being
    written): audit, replay or status it once the run has stopped."""

    exit_code = 5


class TamperError(StoreError):
    """Verification found an inconsistency no crash can produce; resume is refused."""

    exit_code = 3


class AnchorMismatchError(StoreError):
    """The store is not sealed by the manifest digest the user expects (or by none at all), or
    its manifest signature does not verify; the anchor kept elsewhere refuses it."""

    exit_code = 3


class LockMismatchError(StoreError):
    """The store is bound to a different study lock than the one given."""


class ScheduleMismatchError(StoreError):
    """The store is bound to a different canonical schedule than the one given."""


class CommitOrderError(StoreError):
    """A cell was committed out of schedule order (skipped, repeated or reordered)."""


class RecordInvalidError(StoreError):
    """A record's content cannot be committed (non-finite number, unknown field, non-JSON value)."""


class AttemptStateError(StoreError):
    """A journaled attempt was used out of order: ended twice, never begun, or open at commit."""


class StoreFinalizedError(StoreError):
    """The store carries a manifest; it takes no more records."""


class FinalizeError(StoreError):
    """The store cannot be finalized (cells missing, torn tail, attempts open)."""


class DurabilityError(StoreError, InfrastructureError):
    """A write or fsync failed; the writer has stopped and will not retry.

    An infrastructure failure (exit 75): what is committed stays, the cell in flight is not,
    the store is not finalized, and resume continues it once the disk is usable again.
    """


class FsyncError(DurabilityError):
    """fsync reported an error; what was written may not be durable."""


class ShortWriteError(DurabilityError):
    """The kernel accepted fewer bytes than a record holds."""


class NoSpaceError(DurabilityError):
    """The file system is full (ENOSPC)."""


class KeyInStoreError(DurabilityError):
    """The run's API key was about to be written into the store (a write the redaction missed):
    nothing of that write reached the disk, and the writer stops."""


class WriterStoppedError(StoreError):
    """The writer was used after a durability failure stopped it."""


class SimulatedViewError(ProviderError):
    """A simulated role behaviour was handed a view it cannot read (the request is misbuilt)."""


class SandboxError(HarnessError):
    """The tool sandbox cannot be set up or used as asked (a failed tool call is a result)."""


class SandboxUnavailableError(SandboxError):
    """No sandbox backend or tier can be proven on this machine; tools must not run unconfined."""

    exit_code = 3


class ToolChildKilledError(InfrastructureError, SandboxError):
    """A tool child died of a signal the harness did not send, twice: the host, not the agent."""


class SandboxZygoteError(InfrastructureError, SandboxError):
    """The Linux sandbox zygote died or never became ready: no tool call can run through it."""


class SandboxPolicyError(SandboxError):
    """The pinned sandbox policy or profile file is missing, unreadable or malformed."""


class SbplSyntaxError(SandboxPolicyError):
    """A Seatbelt (macOS) profile's text is not well-formed S-expressions."""


class SandboxRequestError(SandboxError):
    """A tool request is not of the required shape or cannot be encoded canonically."""


class SandboxProbeError(SandboxError):
    """The denial probes could not be set up (a probe target the parent opens is not live)."""


# Benchmark family (harness/worlds, harness/tools, harness/faults): generated worlds and tasks.


class BenchmarkError(HarnessError):
    """The generated benchmark cannot be built or used as asked."""


class UnknownWorldError(BenchmarkError):
    """A world id is not two digits, or not one of the benchmark's worlds where one is needed."""


class UnknownTaskError(BenchmarkError):
    """No task or snapshot has the given id."""


class AdmissionError(BenchmarkError):
    """No candidate task of a family was admitted: the oracles disagreed or none was well posed."""


class FaultNotApplicableError(BenchmarkError):
    """A fault operator has nothing to act on in the given task (no parameterised transform)."""


class ToolTraceError(BenchmarkError):
    """A recorded tool call cannot be turned into receipts (it holds a non-canonical value)."""


class ManifestMismatchError(BenchmarkError):
    """The pinned benchmark manifest differs from what the generator produces now."""

    exit_code = 3


# Evidence family (harness/lock.py, audit.py, studies/v2/report.py, replay.py, export.py).


class StudyLockError(HarnessError):
    """The study lock cannot be built or read (malformed lock, unreadable covered file)."""


class CoveredFileMissingError(StudyLockError):
    """A file the study lock covers does not exist; the lock is never written without it."""


class LockStaleError(StudyLockError):
    """The study lock on disk no longer matches the code and config it covers."""

    exit_code = 3


class EnvironmentMismatchError(StudyLockError):
    """``--require-environment``: this environment differs from the reference it must equal."""

    exit_code = 3


class PreflightFailedError(HarnessError):
    """A preflight check failed; the run is blocked. The message names every failed check."""

    exit_code = 3


class RunDeclinedError(HarnessError):
    """The user answered no to the cost question: nothing was written, nothing went wrong."""

    exit_code = 0


class StudyReportError(HarnessError):
    """A study report cannot be computed from the store (not that study's store, bad result)."""


class ReplayMismatchError(StudyReportError):
    """Replay recomputed something that differs from what the store or report holds.

    Raised inside a replayed cell when it asks for a provider attempt or tool call other than
    the one its store recorded; ``harness replay`` counts it as a mismatch of that cell.
    """

    exit_code = 3


class AuditFailedError(HarnessError):
    """``harness audit`` found a problem (listed in its report, printed before this line)."""

    exit_code = 3


class NotReplayableError(StudyReportError):
    """A recorded V2 cell holds something replay cannot rebuild (a sandbox failure); replay
    counts the cell as not replayable, not as a mismatch."""


class StudyKindError(StudyReportError):
    """The store's genesis identity names neither study (V2 or static), or not the one asked."""


class ExportError(HarnessError):
    """An artifact bundle cannot be written (missing input, output exists)."""


class PrivacyError(ExportError):
    """The bundle would carry a local path, a user or host name, or a credential-shaped string."""

    exit_code = 3


# Static study family (harness/studies/static*.py): the seven-policy snapshot study.


class StaticStudyError(HarnessError):
    """The static study cannot run or report as asked."""


class RunRecordsError(StaticStudyError):
    """A static store's records are not a static run's (a result or identity does not decode,
    a decision is missing or repeated), or its report cannot be written."""


class FastPathInvariantError(StaticStudyError):
    """The critic core needed its model on a static snapshot: the frozen comparison is void."""

    exit_code = 3


# V2 study family (harness/studies/v2): the closed-loop study.


class V2StudyError(HarnessError):
    """The V2 closed-loop study cannot run or resume as asked."""


class V2ConfigError(V2StudyError):
    """The frozen V2 study config is missing, unreadable or inconsistent."""


class V2ScheduleError(V2StudyError):
    """The V2 schedule file is missing, malformed or not the one the config generates."""


class CheckpointError(V2StudyError):
    """A task's checkpoint cannot be derived from its assigned fault as the study requires."""


class StoreHasCellsError(V2StudyError):
    """``v2 run`` was pointed at an existing store; such a store is continued with resume."""


class BreakerTrippedError(InfrastructureError, V2StudyError):
    """The circuit breaker refuses to begin another attempt: the cell in flight is dropped and the
    run stops unfinalized. Internal control flow; the runner catches it and reports the outage."""


class RunStoppedError(StoppedError, V2StudyError):
    """A signal stopped the run after its last committed cell; ``v2 resume`` continues it."""


# Gate family (harness/gate, harness/integrations): ECT as a stop condition in an agent loop.


class GateError(HarnessError):
    """A gate cannot be set up as asked: its trusted inputs (descriptor, contract, extractors,
    contract file) are wrong. The model's mistakes are refusals, never this."""


# MCP proxy family (harness/mcp_proxy): the proxy's own set-up failures.


class UpstreamError(HarnessError):
    """An upstream MCP server could not be started or listed when the proxy started."""
