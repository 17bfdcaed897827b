"""Prove that a change between two git revisions changed no output of the offline studies.

``scripts/same_outputs.py BASE [NEW]`` (NEW defaults to HEAD) checks out each revision as a
detached worktree in a temporary directory (removed at the end, also on failure), and runs in
each, with this checkout's ``.venv`` interpreter but that worktree's own code first on the import
path (checked: ``harness.__file__`` must lie inside the worktree), the offline simulated outputs:

- ``harness lock`` (the revision's own study lock) and ``harness lock --check``;
- the full V2 study (``v2 run``), ``store verify --json``, ``audit --json``, ``v2 report`` and the
  ``export`` bundle;
- the static study (``static run``), ``store verify --json``, ``audit --json``, ``static
  report`` and the ``static export`` snapshot folders;
- ``tasks list --json``, ``worlds show 01 --json`` and the benchmark manifest: the pinned
  ``schedules/benchmark-manifest.json`` and its regeneration by ``scripts/pin_benchmark.py``
  (which must equal the pinned bytes).

Then it compares the two output trees file by file, byte for byte, after one normalisation, and
exits 0 only when they are identical after it.

What differs by design, and how it is normalised:

- The study lock digests the source tree (``harness/``, ``preflight/``), so a moved or edited
  module changes it. The two locks are compared as JSON: only each tree's file map and digest may
  differ (reported as files changed, only in base, only in new, and moved unchanged); every other
  field (prompts, configs, schedule, sandbox profiles, benchmark manifest, generation config,
  environment) must be equal. Byte copies of the lock (in each store and bundle) count as it;
  ``harness lock``'s summary line per tree has its file count blanked (a field of the lock).
- Everything that binds the lock's digest differs with it: the genesis record, so every record
  hash of the chain, HEAD and the manifest digest; the preflight report kept as a blob, so its
  content address; the report files naming the lock, head or manifest, so the report manifest's
  and the export bundle manifest's file digests. The comparison splits every file into
  64-hex-digit tokens and the bytes between them: the bytes between must be identical, and the
  tokens must correspond one to one (a base token always maps to the same new token and no two
  base tokens to one). A content-addressed file found in one tree only is paired with the file
  of the other tree whose bytes it equals under the correspondence. Every pair of differing
  tokens is then re-derived, not assumed: it is the two locks' digest (``study.lock.v1`` over the
  lock bytes) or one of their source-tree digests, or it is the digest, under one of the
  project's domain tags, of a base file or line (or the body after a line's leading hash) and of
  the corresponding new file or line. A token that differs for any other reason (a changed
  request, response or decision digest) is a failure.
- Renamed blobs move in what is sorted by their names: where a file does not align as bytes, it
  is compared as JSON (or JSON lines after a leading hash), a listing of ``path`` objects paired
  by the renamed path and a sorted list of digests compared as a set under the correspondence.
- A byte count that holds the lock (a file's size in a listing, the audit's bytes scanned, an
  export's total) may differ by exactly the lock's change in size, and by nothing else.
- The files that are not evidence carry the wall clock or the process: ``run.log`` (its
  ``started_utc`` values are blanked) and ``writer.lock`` (the holder's pid and host; left out).
- Console output is compared too, with the side's temporary path and the elapsed-time clauses
  (``in 1.2 s (480.0 cells/s)``) blanked; stderr (the progress display) is kept, not compared.

Anything else that differs is a failure, printed as the first differing file and line (or JSON
path), exit 1; a revision that cannot be checked out or a step that fails is exit 2. The output
trees are kept with ``--keep DIR``; ``--compare DIR/base DIR/new`` compares kept trees again
without building them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from harness.canonical import Domain, domain_prefix

TOKEN = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
LEADING_HASH = re.compile(rb"^[0-9a-f]{64} ")
# Console only: the elapsed time and rate of a run.
CONSOLE_CLOCK = re.compile(rb"in \d+(?:\.\d+)? s \(\d+(?:\.\d+)? (?:cells|snapshots)/s\)")
RUN_LOG_CLOCK = re.compile(rb'"started_utc":"[^"]*"')
# `harness lock`'s summary names each source tree's file count, a field of the lock itself.
LOCK_TREE_COUNT = re.compile(rb"^(  source  \S+ )\(\d+ files\)", re.MULTILINE)
LEFT_OUT = frozenset({"writer.lock"})
LOCK_TREE_FIELDS = frozenset({"digest", "files"})


class DiffError(Exception):
    """The two output trees differ after normalisation; the message names the first place."""


class SetupError(Exception):
    """A revision could not be checked out or a step failed: nothing was compared."""


# --- the pure part: token alignment, the mapping and its justification ----------------------


@dataclass
class Mapping:
    """Base token -> new token, one to one, with the first place each pair was seen."""

    forward: dict[bytes, bytes] = field(default_factory=dict)
    backward: dict[bytes, bytes] = field(default_factory=dict)
    seen_at: dict[bytes, str] = field(default_factory=dict)

    def add(self, a: bytes, b: bytes, where: str) -> None:
        """Record that base token ``a`` stands where new token ``b`` stands.

        Raises:
            DiffError: when ``a`` already maps to another token, or another token to ``b``.
        """
        if self.forward.get(a, b) != b:
            raise DiffError(
                f"{where}: {a.decode()} stands for {b.decode()} here but for "
                f"{self.forward[a].decode()} at {self.seen_at[a]}"
            )
        if self.backward.get(b, a) != a:
            raise DiffError(
                f"{where}: {b.decode()} stands for two base tokens, {a.decode()} and "
                f"{self.backward[b].decode()}"
            )
        if a not in self.forward:
            self.forward[a], self.backward[b], self.seen_at[a] = b, a, where

    def apply(self, data: bytes) -> bytes:
        """``data`` with every mapped token replaced by its new token."""
        return TOKEN.sub(lambda m: self.forward.get(m.group(0), m.group(0)), data)

    def differing(self) -> dict[bytes, bytes]:
        """The pairs whose tokens are not equal."""
        return {a: b for a, b in self.forward.items() if a != b}


def first_difference(where: str, a: bytes, b: bytes) -> str:
    """Name the first differing line (1-based) of two byte strings, both sides shown."""
    lines_a, lines_b = a.split(b"\n"), b.split(b"\n")
    for number, (x, y) in enumerate(zip(lines_a, lines_b, strict=False), start=1):
        if x != y:
            at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), None)
            at = min(len(x), len(y)) if at is None else at
            lo = max(0, at - 60)
            return (
                f"{where}, line {number}, byte {at + 1}:\n"
                f"  base: {x[lo : at + 80]!r}\n  new:  {y[lo : at + 80]!r}"
            )
    return f"{where}: {len(lines_a)} lines in base, {len(lines_b)} in new"


NUMBER = re.compile(rb"\d+")
DIGEST_STRING = re.compile(r"(?:blake3:)?[0-9a-f]{64}")


@dataclass(frozen=True)
class LockSizes:
    """The byte sizes of the base and the new study lock."""

    base: int
    new: int

    def explains(self, x: bytes, y: bytes) -> bool:
        """Whether byte counts ``x`` (base) and ``y`` (new) differ by one copy of the lock's
        growth, as a count that includes the lock (a file size, a total) does."""
        a, b = int(x), int(y)
        return a != b and b - a == self.new - self.base and a >= self.base and b >= self.new


def align(where: str, a: bytes, b: bytes, mapping: Mapping, sizes: LockSizes) -> int:
    """Require ``a`` and ``b`` equal outside their hex tokens and pair the tokens in order.

    Between the tokens, a pair of differing numbers is allowed when it is a byte count holding
    one copy of the lock (``sizes.explains``). Returns how many such numbers there were.

    Raises:
        DiffError: naming the first differing line when anything else between the tokens
            differs, or a token pair contradicts the mapping.
    """
    if a == b:
        for token in TOKEN.findall(a):
            mapping.add(token, token, where)
        return 0
    parts_a, parts_b = TOKEN.split(a), TOKEN.split(b)
    counts = 0
    if len(parts_a) != len(parts_b):
        raise DiffError(first_difference(where, mapping.apply(a), b))
    for x, y in zip(parts_a, parts_b, strict=True):
        if x == y:
            continue
        if NUMBER.split(x) != NUMBER.split(y):
            raise DiffError(first_difference(where, mapping.apply(a), b))
        for p, q in zip(NUMBER.findall(x), NUMBER.findall(y), strict=True):
            if p != q and not sizes.explains(p, q):
                raise DiffError(first_difference(where, mapping.apply(a), b))
            counts += p != q
    for x, y in zip(TOKEN.findall(a), TOKEN.findall(b), strict=True):
        mapping.add(x, y, where)
    return counts


def preimages(a: bytes, b: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Corresponding pieces of two files that a digest may cover: each file whole, each
    differing line whole, and each differing line's body after its leading hash."""
    yield a, b
    for x, y in zip(a.split(b"\n"), b.split(b"\n"), strict=False):
        if x == y:
            continue
        yield x, y
        if LEADING_HASH.match(x) and LEADING_HASH.match(y):
            yield x[65:], y[65:]


def _hex(domain: Domain, data: bytes) -> bytes:
    return blake3.blake3(domain_prefix(domain) + data).hexdigest().encode()


def justify(
    differing: dict[bytes, bytes],
    roots: dict[bytes, str],
    pieces: Sequence[tuple[str, bytes, bytes]],
) -> dict[bytes, str]:
    """Explain every differing token pair; return ``{base token: why}``.

    A pair is explained when its base token is a root (the lock's digest or a source tree's), or
    when, for some corresponding pieces (``where``, base bytes, new bytes) that are equal under
    the mapping, the base token is a domain-tagged digest of the base piece and the new token the
    digest of the new piece under the same tag.

    Raises:
        DiffError: naming a pair no root or piece explains, and the first place it was seen.
    """
    why: dict[bytes, str] = {a: roots[a] for a in differing if a in roots}
    wanted = {a for a in differing if a not in why}
    for where, x, y in pieces:
        if not wanted:
            break
        for domain in Domain:
            token = _hex(domain, x)
            if token in wanted and _hex(domain, y) == differing[token]:
                why[token] = f"{domain.value} of {where}"
                wanted.discard(token)
    if wanted:
        token = min(wanted)
        raise DiffError(
            f"digest {token.decode()} -> {differing[token].decode()} is not derived from the "
            f"lock: no domain-tagged digest of a compared file or line gives it"
        )
    return why


# --- the revisions: worktrees, the import path, the steps ------------------------------------


@dataclass(frozen=True)
class Side:
    """One revision's worktree and its output directory (siblings, so relative paths match)."""

    label: str
    revision: str
    commit: str
    tree: Path
    out: Path


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SetupError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def _env(tree: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GOOGLE_", "GEMINI_", "OPENAI_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1", TZ="UTC", COLUMNS="100")
    return env


def _run(side: Side, python: Path, name: str, args: Sequence[str]) -> None:
    """Run one step in ``side``'s worktree; keep its stdout as an output, its stderr aside."""
    console = side.out / "console"
    console.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(python), *args], cwd=side.tree, env=_env(side.tree), capture_output=True, check=False
    )
    stdout = done.stdout.replace(str(side.tree.parent).encode(), b"<side>")
    (console / f"{name}.stdout").write_bytes(CONSOLE_CLOCK.sub(b"in <elapsed>", stdout))
    (side.out.parent / "stderr").mkdir(exist_ok=True)
    (side.out.parent / "stderr" / f"{name}.stderr").write_bytes(done.stderr)
    (console / f"{name}.exit").write_text(f"{done.returncode}\n")
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise SetupError(
            f"{side.label} ({side.commit[:12]}): step {name} exited {done.returncode}: "
            + " | ".join(tail)
        )


def _check_import(side: Side, python: Path) -> str:
    done = subprocess.run(
        [
            str(python),
            "-c",
            "import harness, preflight; print(harness.__file__, preflight.__file__)",
        ],
        cwd=side.tree,
        env=_env(side.tree),
        capture_output=True,
        text=True,
        check=False,
    )
    files = done.stdout.split()
    if done.returncode != 0 or not all(Path(f).is_relative_to(side.tree) for f in files):
        raise SetupError(f"{side.label}: harness is not imported from {side.tree}: {done.stdout}")
    return files[0]


STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lock", ("-m", "harness", "lock")),
    ("lock-check", ("-m", "harness", "lock", "--check")),
    ("tasks", ("-m", "harness", "tasks", "list", "--json")),
    ("world-01", ("-m", "harness", "worlds", "show", "01", "--json")),
    ("v2-run", ("-m", "harness", "v2", "run", "--store", "../out/v2")),
    ("v2-verify", ("-m", "harness", "store", "verify", "../out/v2", "--json")),
    ("v2-audit", ("-m", "harness", "audit", "../out/v2", "--json")),
    ("v2-report", ("-m", "harness", "v2", "report", "../out/v2")),
    ("v2-export", ("-m", "harness", "export", "../out/v2", "../out/v2-export")),
    ("static-run", ("-m", "harness", "static", "run", "--out", "../out/static")),
    ("static-verify", ("-m", "harness", "store", "verify", "../out/static", "--json")),
    ("static-audit", ("-m", "harness", "audit", "../out/static", "--json")),
    ("static-report", ("-m", "harness", "static", "report", "../out/static")),
    ("static-export", ("-m", "harness", "static", "export", "--out", "../out/snapshots")),
    ("pin-benchmark", ("scripts/pin_benchmark.py", "../out/benchmark/regenerated.json")),
)


def produce(side: Side, python: Path) -> None:
    """Run every step in ``side`` and copy the lock and pinned manifest into its outputs."""
    side.out.mkdir(parents=True)
    for name, args in STEPS:
        print(f"  {side.label}: {name}", file=sys.stderr, flush=True)
        _run(side, python, name, args)
        if name == "lock":
            (side.out / "lock").mkdir()
            shutil.copyfile(
                side.tree / "schedules" / "study-lock.json", side.out / "lock" / "study-lock.json"
            )
    pinned = side.tree / "schedules" / "benchmark-manifest.json"
    shutil.copyfile(pinned, side.out / "benchmark" / "pinned.json")
    if pinned.read_bytes() != (side.out / "benchmark" / "regenerated.json").read_bytes():
        raise SetupError(f"{side.label}: the benchmark manifest differs from its regeneration")


# --- comparing two output trees ----------------------------------------------------------------


@dataclass
class Tally:
    """What the comparison saw."""

    files: int = 0
    bytes_base: int = 0
    bytes_new: int = 0
    identical: int = 0
    normalised: int = 0
    lock_copies: int = 0
    left_out: int = 0
    sizes: int = 0
    lock_growth: int = 0
    clocks: int = 0
    changed: list[str] = field(default_factory=list)


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def compare_locks(a: bytes, b: bytes) -> tuple[dict[bytes, str], list[str]]:
    """Compare two study locks; return the root token pairs and a description of what differs.

    Raises:
        DiffError: when anything but a source tree's file map and digest differs.
    """
    la: dict[str, Any] = json.loads(a)
    lb: dict[str, Any] = json.loads(b)
    trees_a, trees_b = la.pop("trees"), lb.pop("trees")
    if la != lb:
        keys = sorted(k for k in la.keys() | lb.keys() if la.get(k) != lb.get(k))
        raise DiffError(f"lock/study-lock.json: fields other than the source trees differ: {keys}")
    if [t["path"] for t in trees_a] != [t["path"] for t in trees_b]:
        raise DiffError("lock/study-lock.json: the locked source trees differ")
    roots = {
        _hex(Domain.LOCK, a): "the study lock's digest",
    }
    described = []
    for ta, tb in zip(trees_a, trees_b, strict=True):
        other = {k for k in ta.keys() | tb.keys() if ta.get(k) != tb.get(k)} - LOCK_TREE_FIELDS
        if other:
            raise DiffError(f"lock/study-lock.json: tree {ta['path']} differs in {sorted(other)}")
        fa, fb = ta["files"], tb["files"]
        only_a, only_b = sorted(fa.keys() - fb.keys()), sorted(fb.keys() - fa.keys())
        changed = sorted(k for k in fa.keys() & fb.keys() if fa[k] != fb[k])
        by_digest = {v: k for k, v in fa.items()}
        moved = sorted(f"{by_digest[fb[k]]} -> {k}" for k in only_b if fb[k] in by_digest)
        described.append(
            f"{ta['path']}/: {len(fa)} -> {len(fb)} files; {len(changed)} changed, "
            f"{len(only_a)} only in base, {len(only_b)} only in new ({len(moved)} of them "
            "byte-identical moves)"
        )
        if ta["digest"] != tb["digest"]:
            key = ta["digest"].removeprefix("blake3:").encode()
            roots[key] = f"the lock's {ta['path']}/ tree digest"
    return roots, described


def _new_path(rel: str, mapping: Mapping) -> str:
    return TOKEN.sub(lambda m: mapping.forward.get(m.group(0), m.group(0)), rel.encode()).decode()


def normalise(rel: str, a: bytes, b: bytes) -> tuple[bytes, bytes]:
    """Blank what differs by design in a pair of files (see the module's docstring)."""
    if rel.endswith("run.log"):
        return RUN_LOG_CLOCK.sub(b'"started_utc":"<clock>"', a), RUN_LOG_CLOCK.sub(
            b'"started_utc":"<clock>"', b
        )
    if rel == "console/lock.stdout":
        return LOCK_TREE_COUNT.sub(rb"\1(<count> files)", a), LOCK_TREE_COUNT.sub(
            rb"\1(<count> files)", b
        )
    return a, b


def align_json(where: str, x: Any, y: Any, mapping: Mapping, sizes: LockSizes) -> int:
    """``align`` over decoded JSON, for a listing sorted by lock-derived names.

    Content-addressed names reorder what is sorted by them: a list of objects with a ``path``
    (sorted in both trees) is paired by the base path under the mapping, a sorted list of digests
    is compared as a set under the mapping; everything else is compared in place. Returns the
    byte counts explained by the lock.

    Raises:
        DiffError: at the first value that differs, or a path found in one listing only.
    """
    if isinstance(x, dict) and isinstance(y, dict):
        if x.keys() != y.keys():
            raise DiffError(f"{where}: keys {sorted(x)} in base, {sorted(y)} in new")
        return sum(align_json(f"{where}.{k}", x[k], y[k], mapping, sizes) for k in sorted(x))
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        paths_a: list[Any] = [e.get("path") if isinstance(e, dict) else None for e in x]
        paths_b: list[Any] = [e.get("path") if isinstance(e, dict) else None for e in y]
        listing = all(isinstance(p, str) for p in paths_a + paths_b)
        if listing and paths_a == sorted(paths_a) and paths_b == sorted(paths_b):
            by_path = {e["path"]: e for e in y}
            pairs = []
            for e in x:
                other = _new_path(e["path"], mapping)
                if other not in by_path:
                    raise DiffError(f"{where}: {e['path']} listed in base only")
                pairs.append((e, by_path.pop(other)))
            return sum(align_json(f"{where}[{a['path']}]", a, b, mapping, sizes) for a, b in pairs)
        tokens = all(isinstance(e, str) and DIGEST_STRING.fullmatch(e) for e in x + y)
        if tokens and x == sorted(x) and y == sorted(y):
            # A set of digests kept sorted: renamed members move; compare it as a set.
            if sorted(mapping.apply(e.encode()).decode() for e in x) != y:
                raise DiffError(f"{where}: the digest sets differ under the mapping")
            return 0
        return sum(
            align_json(f"{where}[{i}]", a, b, mapping, sizes)
            for i, (a, b) in enumerate(zip(x, y, strict=True))
        )
    ex, ey = json.dumps(x).encode(), json.dumps(y).encode()
    try:
        return align(where, ex, ey, mapping, sizes)
    except DiffError as e:
        if str(e).startswith(f"{where}, line"):  # the value differs, not a token pairing
            raise DiffError(
                f"{where}: {mapping.apply(ex).decode()} in base, {ey.decode()} in new"
            ) from None
        raise


def compare_trees(base: Path, new: Path) -> tuple[Tally, dict[bytes, str], list[str]]:
    """Compare two output trees; return the tally, each differing token's reason, the lock notes.

    Raises:
        DiffError: at the first file that differs after normalisation, or a file in one tree
            only.
        SetupError: when either directory is not an output tree of this script.
    """
    files_a, files_b = _files(base), _files(new)
    for root, files in ((base, files_a), (new, files_b)):
        if "lock/study-lock.json" not in files:
            raise SetupError(f"{root} is not an output tree of this script (no lock/)")
    lock_a = files_a["lock/study-lock.json"].read_bytes()
    lock_b = files_b["lock/study-lock.json"].read_bytes()
    roots, lock_notes = compare_locks(lock_a, lock_b)
    tally, mapping, sizes = Tally(), Mapping(), LockSizes(len(lock_a), len(lock_b))
    for a, why_root in roots.items():
        mapping.add(a, _root_new(a, lock_a, lock_b, why_root), "the study locks")
    _pair_renamed(files_a, files_b, mapping)
    pieces: list[tuple[str, bytes, bytes]] = []
    # Files whose names hold no token first: they establish the names of content-addressed ones.
    pending = sorted(files_a, key=lambda rel: (TOKEN.search(rel.encode()) is not None, rel))
    matched: set[str] = set()
    deferred: dict[str, tuple[bytes, bytes, DiffError]] = {}
    for rel in pending:
        if rel.rsplit("/", 1)[-1] in LEFT_OUT:
            tally.left_out += 1
            matched.add(_new_path(rel, mapping))
            continue
        other = _new_path(rel, mapping)
        if other not in files_b:
            raise DiffError(f"{rel}: in base only (no {other} in new)")
        matched.add(other)
        a, b = files_a[rel].read_bytes(), files_b[other].read_bytes()
        tally.files += 1
        tally.bytes_base += len(a)
        tally.bytes_new += len(b)
        if a == b:
            tally.identical += 1
        elif a == lock_a and b == lock_b:
            tally.lock_copies += 1
            pieces.append((rel, a, b))
            continue
        else:
            tally.normalised += 1
            tally.changed.append(rel)
        a, b = normalise(rel, a, b)
        tally.clocks += rel.endswith("run.log")
        pieces.extend((rel, x, y) for x, y in preimages(a, b) if x != y)
        try:
            tally.sizes += align(rel, a, b, mapping, sizes)
        except DiffError as failure:
            deferred[rel] = (a, b, failure)  # perhaps a listing ordered by names learnt later
    for rel, (a, b, first) in deferred.items():
        tally.sizes += _align_structured(rel, a, b, mapping, sizes, first)
    extra = sorted(set(files_b) - matched)
    if extra:
        raise DiffError(f"{extra[0]}: in new only ({len(extra)} such files)")
    # Name a digest by the evidence it covers rather than by a console echo of the same bytes.
    pieces.sort(key=lambda piece: piece[0].startswith("console/"))
    tally.lock_growth = len(lock_b) - len(lock_a)
    why = justify(mapping.differing(), roots, pieces)
    return tally, why, lock_notes


def _align_structured(
    rel: str, a: bytes, b: bytes, mapping: Mapping, sizes: LockSizes, failure: DiffError
) -> int:
    """Align a file that failed byte alignment as JSON, or line by line as JSON lines."""
    try:
        return align_json(rel, json.loads(a), json.loads(b), mapping, sizes)
    except ValueError:
        pass
    lines_a, lines_b = a.split(b"\n"), b.split(b"\n")
    if len(lines_a) != len(lines_b):
        raise failure
    counts = 0
    for number, (x, y) in enumerate(zip(lines_a, lines_b, strict=True), start=1):
        where = f"{rel}, line {number}"
        try:
            counts += align(where, x, y, mapping, sizes)
            continue
        except DiffError:
            if not (LEADING_HASH.match(x) and LEADING_HASH.match(y)):
                raise failure from None
        mapping.add(x[:64], y[:64], where)
        try:
            counts += align_json(where, json.loads(x[65:]), json.loads(y[65:]), mapping, sizes)
        except ValueError:
            raise DiffError(first_difference(where, mapping.apply(x), y)) from None
    return counts


def _root_new(a: bytes, lock_a: bytes, lock_b: bytes, why: str) -> bytes:
    """The new token of root ``a`` (the lock's digest, or one of its source-tree digests)."""
    if a == _hex(Domain.LOCK, lock_a):
        return _hex(Domain.LOCK, lock_b)
    trees_a, trees_b = json.loads(lock_a)["trees"], json.loads(lock_b)["trees"]
    for ta, tb in zip(trees_a, trees_b, strict=True):
        if ta["digest"].removeprefix("blake3:").encode() == a:
            return str(tb["digest"]).removeprefix("blake3:").encode()
    raise DiffError(f"no new counterpart of {why}")


def _pair_renamed(files_a: dict[str, Path], files_b: dict[str, Path], mapping: Mapping) -> None:
    """Pair content-addressed files (named by a digest) found in one tree only, by content.

    A base file whose bytes, under the mapping so far, equal a new file's in the same folder is
    its counterpart (the pair is re-derived from the bytes later, by ``justify``); repeated
    until nothing more pairs, as a file may name another.
    """
    while True:
        only_a = [r for r in files_a if r not in files_b and TOKEN.search(r.encode())]
        only_b = [r for r in files_b if r not in files_a and TOKEN.search(r.encode())]
        unpaired_b = {r for r in only_b if TOKEN.findall(r.encode())[-1] not in mapping.backward}
        by_content = {(r.rsplit("/", 1)[0], files_b[r].read_bytes()): r for r in unpaired_b}
        progress = False
        for rel in only_a:
            name = TOKEN.findall(rel.encode())[-1]
            if name in mapping.forward:
                continue
            key = (rel.rsplit("/", 1)[0], mapping.apply(files_a[rel].read_bytes()))
            other = by_content.get(key)
            if other is not None:
                mapping.add(name, TOKEN.findall(other.encode())[-1], f"{rel} (by content)")
                progress = True
        if not progress:
            return


# --- the command ---------------------------------------------------------------------------------


def _summary(why: dict[bytes, str]) -> list[str]:
    kinds: dict[str, int] = {}
    for reason in why.values():
        kind = re.sub(r" of .*/blobs/.*", " of a blob", reason)
        kind = re.sub(r"(of [\w./-]+?)(\.log|/HEAD|/MANIFEST)?$", r"\1\2", kind)
        kinds[kind] = kinds.get(kind, 0) + 1
    return [f"{n:6d}  {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))]


def main(argv: Sequence[str] | None = None) -> int:
    """Build both revisions' outputs, compare them, print the figures; 0 only when identical."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "base", nargs="?", help="the revision before the change (e.g. main before a refactor)"
    )
    parser.add_argument("new", nargs="?", default="HEAD", help="the revision after (default HEAD)")
    parser.add_argument("--keep", type=Path, help="copy both output trees here")
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("BASE_DIR", "NEW_DIR"),
        help="compare two output trees kept with --keep; build nothing (base and new unused)",
    )
    args = parser.parse_args(argv)
    if args.compare is not None:
        try:
            return _report(*compare_trees(*args.compare))
        except SetupError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except DiffError as e:
            print(f"DIFFERENT: {e}")
            return 1
    if args.keep is not None and args.keep.exists():
        print(f"error: --keep {args.keep} exists; name a new directory", file=sys.stderr)
        return 2
    if args.base is None:
        parser.error("give the base revision (or --compare BASE_DIR NEW_DIR)")
    repo = Path(__file__).resolve().parent.parent
    python = repo / ".venv" / "bin" / "python"
    if not python.is_file():
        print(f"error: no {python}: run `bash -c 'source scripts/_venv.sh'`", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="same-outputs-"))
    sides: list[Side] = []
    try:
        for label, revision in (("base", args.base), ("new", args.new)):
            commit = _git(repo, "rev-parse", "--verify", f"{revision}^{{commit}}")
            tree = scratch / label / "tree"
            tree.parent.mkdir()
            _git(repo, "worktree", "add", "--detach", str(tree), commit)
            sides.append(Side(label, revision, commit, tree, scratch / label / "out"))
        for side in sides:
            print(f"{side.label}: {side.revision} = {side.commit}", flush=True)
            print(f"  harness imported from {_check_import(side, python)}", flush=True)
            produce(side, python)
        if args.keep is not None:
            for side in sides:
                shutil.copytree(side.out, args.keep / side.label, dirs_exist_ok=False)
        found = compare_trees(sides[0].out, sides[1].out)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except DiffError as e:
        print(f"DIFFERENT: {e}")
        return 1
    finally:
        for side in sides:
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(side.tree)],
                capture_output=True,
                check=False,
            )
        subprocess.run(["git", "-C", str(repo), "worktree", "prune"], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return _report(*found)


def _report(tally: Tally, why: dict[bytes, str], lock_notes: list[str]) -> int:
    print(
        f"compared {tally.files} files per tree ({tally.bytes_base} bytes base, "
        f"{tally.bytes_new} bytes new; {tally.left_out} left out per tree: writer.lock)"
    )
    print(f"  {tally.identical} byte-identical")
    print(f"  {tally.lock_copies} copies of the study lock, compared as JSON:")
    for note in lock_notes:
        print(f"    {note}")
    print(
        f"  {tally.normalised} equal after mapping {len(why)} lock-derived digests, "
        "each re-derived:"
    )
    print(f"    the files: {', '.join(tally.changed)}")
    for line in _summary(why):
        print(f"  {line}")
    print(
        f"  {tally.sizes} byte counts that hold the lock differ by its growth "
        f"({tally.lock_growth:+d} bytes); {tally.clocks} run.log files with started_utc blanked"
    )
    print("IDENTICAL after normalisation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
