"""The study lock: digests of everything that shapes a run, written once and checked before it.

``harness lock`` writes ``schedules/study-lock.json``. It covers, explicitly:

- the source trees ``harness/`` and ``preflight/``: every file's exact bytes under its sorted
  POSIX path relative to the project root (``__pycache__`` directories and ``*.pyc`` files are
  left out: they are derived from the sources and rewritten by every interpreter);
- every prompt file in ``harness/prompts/``;
- the files in ``COVERED_FILES``: the V2 study config and canonical schedule, the sandbox
  policy and profile, and the benchmark's task/snapshot manifest;
- the frozen generation config the study config holds (model, temperature, token limits,
  thinking budgets, timeouts, price tables, simulated-provider parameters), both its canonical
  digest and its body, plus the fixed full-trace-critic seed. The cell seeds are part of the
  schedule.

A covered file that does not exist is an error naming it; the lock is never written over a
partial set. The lock holds relative paths and digests only: no absolute path, host, user or
clock, so the same tree gives the same bytes anywhere. Digests: file bytes under
``study.locked-file.v1``, except the sandbox policy and profile, which are digested under
``sandbox.profile.v1`` exactly as the sandbox backend reports them; a tree under
``study.source-tree.v1`` over its ``{path: digest}`` map; the generation config under
``study.config.v1``.

It also records the environment it was written in (``harness.environment``: interpreter,
platform, runtime dependency versions) as the *reference* ``--require-environment`` holds a run
to. That environment is provenance, not part of what the lock binds: a different interpreter,
platform or dependency version never makes the lock stale, never blocks preflight and never
changes the lock a run binds (a run reads the lock file's bytes; it does not rewrite them).
``check_lock`` names each environment difference apart from the stale lines. The exact
transitive set the project is tested with is ``requirements.lock``.

This module reads files and installed-distribution metadata and writes the lock; it does not
judge a run (``preflight`` does) and does not read environment variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import msgspec

from harness.canonical import Domain, canonical_bytes, decode_strict, digest, digest_bytes
from harness.environment import Environment, current_environment, differences
from harness.errors import CoveredFileMissingError, LockStaleError, StudyLockError
from harness.providers.config import (
    FULL_TRACE_CRITIC_SEED,
    GenerationConfig,
    config_digest,
)
from harness.resources import code_root, data_path
from harness.safeio import MAX_READ, read_input, write_atomic

__all__ = [
    "COVERED_FILES",
    "DEFAULT_LOCK_PATH",
    "LOCK_SCHEMA",
    "PROMPTS_DIR",
    "SOURCE_TREES",
    "FileRole",
    "LockCheck",
    "LockedConfig",
    "LockedFile",
    "LockedTree",
    "WHEN_LOCKED",
    "StudyLock",
    "build_lock",
    "check_lock",
    "compare_locks",
    "decode_lock",
    "encode_lock",
    "environment_lines",
    "file_digest",
    "project_root",
    "read_lock",
    "read_lock_bytes",
    "require_current",
    "study_generation_config",
    "tree_digest",
    "write_lock",
]

LOCK_SCHEMA: Final = "harness.study-lock.v1"
DEFAULT_LOCK_PATH: Final = "schedules/study-lock.json"
SOURCE_TREES: Final = ("harness", "preflight")
PROMPTS_DIR: Final = "harness/prompts"
# harness/_data holds links to (in a wheel: copies of) files the lock covers one by one.
_SKIP_DIRS: Final = frozenset({"__pycache__", "_data"})
_SKIP_SUFFIXES: Final = (".pyc", ".pyo")

Digest = Annotated[str, msgspec.Meta(pattern="^blake3:[0-9a-f]{64}$")]
RelPath = Annotated[str, msgspec.Meta(pattern=r"^[^/].*[^/]$")]


class FileRole(StrEnum):
    """What a covered file is. Wire strings are stable."""

    PROMPT = "prompt"
    STUDY_CONFIG = "study_config"
    SCHEDULE = "schedule"
    SANDBOX_POLICY = "sandbox_policy"
    SANDBOX_PROFILE = "sandbox_profile"
    TASK_MANIFEST = "task_manifest"


COVERED_FILES: Final[tuple[tuple[FileRole, str], ...]] = (
    (FileRole.STUDY_CONFIG, "schedules/v2-config.json"),
    (FileRole.SCHEDULE, "schedules/v2-schedule.json"),
    (FileRole.SANDBOX_POLICY, "sandbox_profiles/linux-tool-worker.json"),
    (FileRole.SANDBOX_PROFILE, "sandbox_profiles/tool-worker.sb"),
    (FileRole.TASK_MANIFEST, "schedules/benchmark-manifest.json"),
)
"""Every single file the lock covers besides the source trees and prompts, in lock order."""

_SANDBOX_ROLES: Final = frozenset({FileRole.SANDBOX_POLICY, FileRole.SANDBOX_PROFILE})


class _Lock(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the lock's parts: immutable, unknown fields refused."""


class LockedTree(_Lock, frozen=True, kw_only=True):
    """A source tree: its root path, its digest and every file's digest."""

    path: RelPath
    digest: Digest
    files: dict[str, Digest]


class LockedFile(_Lock, frozen=True, kw_only=True):
    """One covered file: its role, relative path, size and digest."""

    role: FileRole
    path: RelPath
    size: Annotated[int, msgspec.Meta(ge=0)]
    digest: Digest


class LockedConfig(_Lock, frozen=True, kw_only=True):
    """The frozen generation config: digest and body, and the fixed full-trace-critic seed.

    The body is kept as plain JSON, not decoded into ``GenerationConfig``: a lock written
    before the config type changed must still read, and then differ, rather than fail to read.
    """

    digest: Digest
    full_trace_critic_seed: int
    config: dict[str, Any]


class StudyLock(_Lock, frozen=True, kw_only=True):
    """The whole lock. ``trees`` and ``files`` list exactly what it covers.

    ``environment`` is the reference environment (where the lock was written): provenance for
    ``--require-environment``, not covered (``compare_locks`` ignores it).
    """

    schema: Literal["harness.study-lock.v1"]
    trees: tuple[LockedTree, ...]
    files: tuple[LockedFile, ...]
    generation_config: LockedConfig
    environment: Environment

    def file(self, role: FileRole) -> LockedFile:
        """The covered file with ``role`` (the first, for prompts).

        Raises:
            StudyLockError: the lock covers no file with that role.
        """
        for item in self.files:
            if item.role is role:
                return item
        raise StudyLockError(f"the study lock covers no {role.value} file")


class _StudyConfigGeneration(msgspec.Struct, frozen=True, kw_only=True):
    """The one part of the study config the lock reads (the rest is the study's to judge)."""

    generation_config: GenerationConfig


def project_root() -> Path:
    """The directory holding the ``harness`` package this process imported."""
    return code_root()


def file_digest(role: FileRole | None, data: bytes) -> str:
    """Digest of a covered file's bytes (sandbox files under ``sandbox.profile.v1``)."""
    domain = Domain.SANDBOX_PROFILE if role in _SANDBOX_ROLES else Domain.LOCKED_FILE
    return digest_bytes(domain, data)


def _read(path: Path, what: str) -> bytes:
    try:
        return read_input(path, MAX_READ, what)
    except FileNotFoundError as e:
        raise CoveredFileMissingError(
            f"the study lock covers {what}, which does not exist at {path}"
        ) from e
    except OSError as e:
        raise StudyLockError(f"cannot read {what} ({path}): {e.strerror}") from e


def _tree_files(root: Path, top: str) -> dict[str, str]:
    base = root / top
    if not base.is_dir():
        raise CoveredFileMissingError(
            f"the study lock covers the source tree {top}/, which does not exist under {root}"
        )
    found: dict[str, str] = {}
    for directory, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            if name.endswith(_SKIP_SUFFIXES):
                continue
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            found[rel] = file_digest(None, _read(path, rel))
    if not found:
        raise CoveredFileMissingError(f"the source tree {top}/ under {root} holds no files")
    return dict(sorted(found.items()))


def tree_digest(files: dict[str, str]) -> str:
    """Digest of a tree's ``{relative path: file digest}`` map."""
    return digest(Domain.SOURCE_TREE, dict(sorted(files.items())))


def _covered_path(root: Path | None, rel: str) -> Path:
    # An explicit root is a checkout; otherwise this installation's data (checkout or wheel).
    return root / rel if root is not None else data_path(rel)


def _locked_file(root: Path | None, role: FileRole, rel: str) -> LockedFile:
    data = _read(_covered_path(root, rel), f"{role.value} {rel}")
    return LockedFile(role=role, path=rel, size=len(data), digest=file_digest(role, data))


def _prompt_files(root: Path) -> list[LockedFile]:
    directory = root / PROMPTS_DIR
    if not directory.is_dir():
        raise CoveredFileMissingError(
            f"the study lock covers the prompts in {PROMPTS_DIR}/, which does not exist"
        )
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    if not names:
        raise CoveredFileMissingError(f"{PROMPTS_DIR}/ holds no prompt file")
    return [_locked_file(root, FileRole.PROMPT, f"{PROMPTS_DIR}/{name}") for name in names]


def build_lock(root: Path | None = None) -> StudyLock:
    """Build the lock of the project at ``root`` (default: this process's project).

    Raises:
        CoveredFileMissingError: a covered tree, prompt directory or file does not exist.
        StudyLockError: a covered file cannot be read, or the study config is unusable.
    """
    base = (root if root is not None else project_root()).resolve()
    trees = []
    for top in SOURCE_TREES:
        files = _tree_files(base, top)
        trees.append(LockedTree(path=top, digest=tree_digest(files), files=files))
    data_root = None if root is None else base
    covered = _prompt_files(base) + [
        _locked_file(data_root, role, rel) for role, rel in COVERED_FILES
    ]
    generation = study_generation_config(root)
    return StudyLock(
        schema=LOCK_SCHEMA,
        trees=tuple(trees),
        files=tuple(covered),
        generation_config=LockedConfig(
            digest=config_digest(generation),
            full_trace_critic_seed=FULL_TRACE_CRITIC_SEED,
            config=msgspec.to_builtins(generation),
        ),
        environment=current_environment(),
    )


def study_generation_config(root: Path | None = None) -> GenerationConfig:
    """The generation config the study config (``COVERED_FILES``' study_config) freezes.

    Read as the config file's ``generation_config`` object, decoded strictly; this module does
    not interpret the rest of the study config (the study does).

    Raises:
        CoveredFileMissingError: the lock covers no study config, or it does not exist.
        StudyLockError: the study config is not strict JSON or holds no valid generation config.
    """
    base = None if root is None else root.resolve()
    rel = next((path for role, path in COVERED_FILES if role is FileRole.STUDY_CONFIG), None)
    if rel is None:
        raise CoveredFileMissingError("the study lock covers no study config")
    data = _read(_covered_path(base, rel), f"{FileRole.STUDY_CONFIG.value} {rel}")
    study = decode_strict(data, _StudyConfigGeneration, StudyLockError, f"the study config {rel}")
    return study.generation_config


def encode_lock(lock: StudyLock) -> bytes:
    """The lock's file bytes: canonical JSON, indented for reading, with a final newline."""
    return msgspec.json.format(canonical_bytes(lock), indent=2) + b"\n"


def decode_lock(data: bytes, *, origin: str) -> StudyLock:
    """Decode a lock file's bytes.

    Raises:
        StudyLockError: the bytes are not a lock of this schema (unknown fields refused).
    """
    return decode_strict(data, StudyLock, StudyLockError, f"study lock {origin}")


def read_lock_bytes(path: Path) -> bytes:
    """The exact bytes of the lock file at ``path`` (a run binds these, not a re-encoding).

    Raises:
        StudyLockError: the file is missing or unreadable (the message says how to write one).
        UnsafeFileError: not a regular file, or over the read bound.
    """
    try:
        return read_input(path, MAX_READ, "study lock")
    except OSError as e:
        raise StudyLockError(
            f"cannot read the study lock {path}: {e.strerror}; write it with `harness lock`"
        ) from e


def read_lock(path: Path) -> tuple[StudyLock, bytes]:
    """Read and decode the lock at ``path``; return it and its exact bytes.

    Raises:
        StudyLockError: the file is missing, unreadable or malformed.
    """
    data = read_lock_bytes(path)
    return decode_lock(data, origin=str(path)), data


def write_lock(path: Path, root: Path | None = None) -> tuple[StudyLock, bytes]:
    """Build the lock of ``root`` and write it to ``path`` atomically; return it and its bytes.

    Raises:
        CoveredFileMissingError, StudyLockError: as ``build_lock``, or the write failed.
    """
    lock = build_lock(root)
    data = encode_lock(lock)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    except OSError as e:
        raise StudyLockError(f"cannot write the study lock {path}: {e.strerror}") from e
    return lock, data


def _diff_map(what: str, expected: dict[str, str], found: dict[str, str]) -> list[str]:
    lines = []
    for key in sorted(expected.keys() | found.keys()):
        if key not in found:
            lines.append(f"{what} {key} is on disk but not in the lock")
        elif key not in expected:
            lines.append(f"{what} {key} is in the lock but not on disk")
        elif expected[key] != found[key]:
            lines.append(f"{what} {key} changed")
    return lines


def compare_locks(expected: StudyLock, found: StudyLock) -> list[str]:
    """What differs between the lock of the tree on disk (``expected``) and a lock file, in
    what the lock covers (the recorded environment is provenance: ``environment_lines``).

    Returns:
        One line per differing entry (a changed, added or removed file, the generation
        config); empty when they are equal.
    """
    if _covered(expected) == _covered(found):
        return []
    lines: list[str] = []
    got_trees = {t.path: t for t in found.trees}
    for tree in expected.trees:
        other = got_trees.pop(tree.path, None)
        if other is None:
            lines.append(f"source tree {tree.path}/ is not in the lock")
        elif other.digest != tree.digest or other.files != tree.files:
            lines.extend(_diff_map("source", tree.files, other.files))
            if other.files == tree.files:
                lines.append(f"source tree {tree.path}/ digest does not match its files")
    lines.extend(f"source tree {path}/ is in the lock but not covered" for path in got_trees)
    lines.extend(
        _diff_map(
            "covered file",
            {f"{f.role.value} {f.path}": f.digest for f in expected.files},
            {f"{f.role.value} {f.path}": f.digest for f in found.files},
        )
    )
    if expected.generation_config != found.generation_config:
        lines.append(
            f"generation config is {expected.generation_config.digest} on disk, "
            f"{found.generation_config.digest} in the lock"
        )
    if not lines:
        lines.append("the lock differs from the tree in its layout")
    return lines


def _covered(lock: StudyLock) -> StudyLock:
    # The lock with its environment replaced by a fixed one: what the lock binds, nothing else.
    return msgspec.structs.replace(lock, environment=_NO_ENVIRONMENT)


_NO_ENVIRONMENT: Final = Environment(
    implementation="", python="", system="", machine="", dependencies={}
)
WHEN_LOCKED: Final = "when locked"


def environment_lines(lock: StudyLock, here: Environment) -> list[str]:
    """One line per difference between this environment and the lock's reference, e.g.
    ``interpreter 3.11.2 here, 3.11.7 when locked``. Provenance: never a stale line."""
    return differences(lock.environment, here, WHEN_LOCKED)


@dataclass(frozen=True)
class LockCheck:
    """What ``check_lock`` found: ``stale`` lines block a run; ``environment`` lines never do."""

    stale: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)


def check_lock(path: Path, root: Path | None = None) -> LockCheck:
    """Compare the lock file at ``path`` with the lock of ``root``.

    Returns:
        ``stale``: one line per difference in what the lock covers; empty when the file's bytes
        are exactly what ``harness lock`` would write in the environment it records.
        ``environment``: one line per difference between this environment and that one.

    Raises:
        StudyLockError: the lock file is unreadable or malformed, or a covered file is missing.
    """
    found, data = read_lock(path)
    expected = build_lock(root)
    env = environment_lines(found, expected.environment)
    if encode_lock(msgspec.structs.replace(expected, environment=found.environment)) == data:
        return LockCheck(environment=env)
    stale = compare_locks(expected, found)
    if not stale:
        stale = ["the lock's content matches but its bytes are not in canonical form"]
    return LockCheck(stale=stale, environment=env)


def require_current(path: Path, root: Path | None = None) -> None:
    """Raise ``LockStaleError`` naming the first differences when the lock at ``path`` is stale
    (a different environment is not)."""
    lines = check_lock(path, root).stale
    if lines:
        more = f" (and {len(lines) - 3} more)" if len(lines) > 3 else ""
        raise LockStaleError(
            f"study lock {path} is stale: {'; '.join(lines[:3])}{more}; run `harness lock`"
        )
