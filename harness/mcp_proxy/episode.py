"""One agent run behind the proxy: its gate session and its run directory (no ``mcp`` import).

An episode owns one ``EctSession`` (one ledger) and one directory, written as the run goes so
``harness verify`` can re-check it offline at any time:

- ``descriptor.json``, ``requirements.json`` (at the start);
- ``submission-NN/{ledger,certificate,answer,decision}.json``: written once per submission;
- ``record.json``: the whole ``GateRecord``, replaced atomically at the start, after every
  submission and when the run's connection closes (not after every call: that cost a
  millisecond a call);
- ``log.jsonl``: one line per event, flushed as it happens: a recorded call with its receipts
  in full, a call that failed and why, a submission and its verdict. No wall-clock time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.errors import ExportError
from harness.gate import (
    EctSession,
    GateContract,
    GateDecision,
    Observation,
    RecordedCall,
    SpecExtractor,
    ToolResult,
    contract_sources,
    submission_files,
)
from harness.safeio import write_atomic

__all__ = ["Episode", "new_episode_dir"]

_MAX_DIRS: Final = 10_000


class _ErrorFlagged:
    """The contract's extractor, except that values of an error result are never ok."""

    def __init__(self, inner: SpecExtractor) -> None:
        self._inner = inner

    def __call__(self, call: ToolResult) -> tuple[Observation, ...]:
        seen = tuple(self._inner(call))
        if isinstance(call.result, dict) and call.result.get("isError") is True:
            seen = tuple(msgspec.structs.replace(o, ok=False) for o in seen)
        return seen


def new_episode_dir(run_dir: Path, name: str | None) -> Path:
    """Create the episode's directory: ``run_dir/name``, or the first free ``run-NN``.

    Raises:
        ExportError: ``name`` was recorded before, or the directory cannot be made.
    """
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if name is not None:
            path = run_dir / name
            path.mkdir()
            return path
        for n in range(1, _MAX_DIRS):
            path = run_dir / f"run-{n:02d}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return path
    except FileExistsError:
        raise ExportError(
            f"episode {name!r} was recorded before in {run_dir}: use a new episode id"
        ) from None
    except OSError as e:
        raise ExportError(f"cannot create a run directory in {run_dir}: {e.strerror or e}") from e
    raise ExportError(f"{run_dir} holds {_MAX_DIRS} runs: use a new --run-dir")


class Episode:
    """One ledger and its files (see the module docstring). Not thread-safe: one event loop."""

    def __init__(self, contract: GateContract, directory: Path) -> None:
        sources = {
            tool: _ErrorFlagged(extractor)
            for tool, extractor in contract_sources(contract).items()
            if isinstance(extractor, SpecExtractor)
        }
        self.session = EctSession(
            contract.descriptor,
            contract.requirements,
            sources,
            max_refusals=contract.max_refusals,
        )
        self.directory = directory
        self._log = open(directory / "log.jsonl", "ab")  # noqa: SIM115 - held for the run
        self._put("descriptor.json", msgspec.json.encode(contract.descriptor))
        self._put("requirements.json", msgspec.json.encode(contract.requirements))
        self._save_record()

    def _put(self, name: str, data: bytes) -> None:
        try:
            write_atomic(self.directory / name, data + b"\n")
        except OSError as e:
            raise ExportError(f"cannot write {self.directory / name}: {e.strerror or e}") from e

    def _save_record(self) -> None:
        self._put("record.json", msgspec.json.encode(self.session.to_record()))

    def log(self, event: str, **fields: Any) -> None:
        """Append one event line to ``log.jsonl``."""
        line = msgspec.json.encode({"event": event, **fields}, order="sorted") + b"\n"
        self._log.write(line)
        self._log.flush()

    def record(
        self, tool: str, upstream: str, args: Mapping[str, Any], document: Any
    ) -> RecordedCall:
        """Record one completed upstream call and log it with its receipts."""
        recorded = self.session.record_call(tool, args, document)
        self.log("call", upstream=upstream, recorded=recorded)
        return recorded

    def submit(self, claims: Any, answer: Any) -> GateDecision:
        """Judge one submission, write its files and save the record."""
        before = len(self.session.to_record().submissions)
        decision = self.session.submit(claims, answer)
        record = self.session.to_record()
        if len(record.submissions) > before:  # a run that ended records nothing more
            files = submission_files(record, decision.submission)
            sub = self.directory / f"submission-{decision.submission:02d}"
            try:
                sub.mkdir()
            except OSError as e:
                raise ExportError(f"cannot create {sub}: {e.strerror or e}") from e
            for name in ("ledger.json", "certificate.json", "answer.json"):
                self._put(f"{sub.name}/{name}", files[name])
            self._put(f"{sub.name}/decision.json", msgspec.json.encode(decision.decision))
            self._put("record.json", msgspec.json.encode(record))
        self.log(
            "submit",
            submission=decision.submission,
            verdict=decision.verdict.value,
            reason_codes=list(decision.reason_codes),
        )
        return decision

    def close(self) -> None:
        """Save the record and close the log."""
        if not self._log.closed:
            self._save_record()
            self._log.flush()
            os.fsync(self._log.fileno())
            self._log.close()
