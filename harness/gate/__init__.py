"""ECT as the stop condition of any agent loop (above the pure core; no framework imports).

- ``EctSession``: record tool results through trusted extractors, judge ``submit(claims,
  answer)``, keep everything (``session``);
- ``Extractor``, ``Observation``, ``ToolResult``: what an integrator writes for a tool
  (``extract``); ``ExtractorSpec`` and the gate contract file: the same as data (``spec``);
- ``reverify`` and ``export_record``: decide a run again offline, write ``harness verify`` files
  (``reverify``); ``catalog_sources``: the benchmark's tools (``catalog``).

The framework adapters live in ``harness.integrations`` (extras). See docs/gate.md.
"""

from harness.gate.catalog import catalog_sources
from harness.gate.extract import Extractor, Observation, ToolResult, receipts_of
from harness.gate.feedback import MAX_FEEDBACK_CHARS, feedback_text, instructions
from harness.gate.reverify import Reverified, export_record, reverify, submission_files
from harness.gate.session import (
    DEFAULT_MAX_REFUSALS,
    MAX_MODEL_INPUT_BYTES,
    EctSession,
    GateDecision,
    GateReason,
    GateRecord,
    ModelInput,
    RecordedCall,
    Submission,
)
from harness.gate.spec import (
    ExtractorSpec,
    GateContract,
    OkWhen,
    ScopeFrom,
    SpecExtractor,
    ToolSpec,
    ValueRule,
    contract_session,
    contract_sources,
    load_contract,
)

__all__ = [
    "DEFAULT_MAX_REFUSALS",
    "MAX_FEEDBACK_CHARS",
    "MAX_MODEL_INPUT_BYTES",
    "EctSession",
    "Extractor",
    "ExtractorSpec",
    "GateContract",
    "GateDecision",
    "GateReason",
    "GateRecord",
    "ModelInput",
    "Observation",
    "OkWhen",
    "RecordedCall",
    "Reverified",
    "ScopeFrom",
    "SpecExtractor",
    "Submission",
    "ToolResult",
    "ToolSpec",
    "ValueRule",
    "catalog_sources",
    "contract_session",
    "contract_sources",
    "export_record",
    "feedback_text",
    "instructions",
    "load_contract",
    "receipts_of",
    "reverify",
    "submission_files",
]
