"""The environment of a writer session: checked on request, then recorded in the store.

Both studies call ``session_environment`` before they create or open a store. By default the
environment is provenance only: whatever it is, the run goes on and the store records it (the
genesis record for the first session, the session journal entry for each resume). With
``--require-environment`` a run refuses to start, writing nothing, when this environment differs
from the study lock's reference or, on resume, from any session the store recorded before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from harness.canonical import canonical_bytes
from harness.environment import (
    Environment,
    current_environment,
    differences,
    require_same,
    session_environments,
)
from harness.lock import WHEN_LOCKED, decode_lock
from harness.log import get_logger
from harness.store import read_store

__all__ = ["REQUIRE_ENVIRONMENT_HELP", "session_environment", "with_environment_header"]

REQUIRE_ENVIRONMENT_HELP: Final = (
    "Refuse to start (exit 3, nothing written) when the interpreter, platform or a dependency "
    "version differs from the lock's reference or, on resume, an earlier session's."
)

_log = get_logger(__name__)


def session_environment(
    lock_bytes: bytes, lock_origin: str, *, resume_of: Path | None, require: bool
) -> dict[str, Any]:
    """This session's environment as the plain object the store records.

    Args:
        lock_bytes: the study lock the run binds (its ``environment`` is the reference).
        lock_origin: where the lock was read from (named in a decode error).
        resume_of: the store a resume continues (its earlier sessions are references too).
        require: ``--require-environment``: refuse on any difference.

    Raises:
        EnvironmentMismatchError: ``require`` and this environment differs (exit 3).
        StudyLockError: ``require`` and the lock does not decode.
    """
    here = current_environment()
    earlier: list[tuple[Environment, str]] = []
    if resume_of is not None:
        view = read_store(resume_of)
        earlier = [
            (s.environment, f"in the session at record {s.records}")
            for s in session_environments(view.genesis, view.journal)
        ]
    if require:
        reference = decode_lock(lock_bytes, origin=lock_origin).environment
        require_same([(reference, WHEN_LOCKED), *earlier], here)
    else:
        for reference, there in earlier:
            for line in differences(reference, here, there):
                _log.warning("run.environment_differs", difference=line)
    return msgspec.to_builtins(here)  # type: ignore[no-any-return]


def with_environment_header(files: dict[str, bytes], line: str) -> dict[str, bytes]:
    """Every report file that can carry a header line, with ``line`` (``describe_store``'s
    ``Environment: ...``) as its first line: Markdown as a paragraph, LaTeX as a ``%`` comment,
    a JSON object as its ``environment`` member. A file that already names it is left as it is;
    CSV files (data a reader parses row by row) and figures are left as they are.

    The line names the store's recorded environment, not the one rendering the report, so a
    replay elsewhere recomputes the same bytes. It holds only the characters
    ``harness.environment`` lets through, so it needs no escaping in any of these formats.
    """
    out = {}
    for name, data in files.items():
        if line.encode() in data:
            out[name] = data
        elif name.endswith(".md"):
            out[name] = f"{line}.\n\n".encode() + data
        elif name.endswith(".tex"):
            out[name] = f"% {line}\n".encode() + data
        elif name.endswith(".json") and data.lstrip().startswith(b"{"):
            document = msgspec.json.decode(data)
            document["environment"] = line
            out[name] = msgspec.json.format(canonical_bytes(document), indent=2) + b"\n"
        else:
            out[name] = data
    return out
