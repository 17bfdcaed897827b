"""Verification's fast path against its checked path: the same verdict and state, always.

``scan(root)`` skips the decode of a journal entry or cell record into its model type when the
entry's view passes every check; ``scan(root, fast=False)`` decodes every one first. These tests
damage real stores the way a tamperer who recomputes line hashes would (field by field: wrong
values, wrong types, unknown fields at the top and nested, other kinds; with and without
re-chaining the following lines) and require both to report the same status, code, reason and
prefix, and to hold the same verified state. A fast path that accepted anything the model type
refuses, or recorded different state, fails here; so does an edit set that stops reaching one
of the refusals.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.store import (
    Head,
    RunStore,
    VerifyCode,
    VerifyReport,
    VerifyStatus,
    finalize_store,
)
from harness.store.scan import Scan, scan

LOCK = b"study lock for fast-path tests\n"
ROWS = [{"cell": i, "policy": ["ect", "critic"][i % 2], "seed": i % 3 + 1} for i in range(4)]
FILES = {"journal.log": Domain.JOURNAL_ENTRY, "records.log": Domain.STORE_RECORD}
UPPER = "blake3:" + "AB" * 32
OTHER = "blake3:" + "cd" * 32

Edit = Callable[[dict[str, Any]], None]


def build(root: Path) -> None:
    """Two writer sessions, attempts with and without blobs, an orphan, a pending attempt."""
    with RunStore.create(root, LOCK, ROWS) as w:
        for i in range(2):
            for a in range(2):
                key = w.journal_begin({"role": "planner", "cell": i, "attempt": a})
                blobs = [w.put_blob(f"raw {i} {a}".encode())] if a == 0 else []
                w.journal_end(key, {"status": "ok", "tokens": 10 + a}, blobs=blobs)
            w.commit_cell(i, {"answer": i * 0.5}, [{"attempt": 0}, {"attempt": 1}])
        w.journal_begin({"role": "critic", "cell": 2})  # dies before its cell: an orphan
    with RunStore.open_for_resume(root, LOCK, ROWS).writer as w:
        for i in range(2, 4):
            key = w.journal_begin({"role": "planner", "cell": i})
            blob = w.put_blob(f"raw {i}".encode())
            w.journal_end(key, {"status": "ok"}, blobs=[blob])
            w.commit_cell(i, {"answer": i, "text": "é ✓"}, [{"raw": blob}])
        w.journal_begin({"role": "planner", "after": "last cell"})  # pending


def state(s: Scan) -> tuple[Any, ...]:
    """Everything verification learned, the verified cells decoded into the record type too."""
    cells = [
        (
            c.seq,
            tuple(c.blobs),
            [msgspec.structs.astuple(a) for a in c.attempts],
            (c.journal.count, c.journal.head),
        )
        for c in s.cells
    ]
    return (
        s.report,
        (s.lock_digest, s.schedule_digest, s.rows, s.row_bytes, s.row_digests, s.genesis),
        (cells, s.cell_bodies, s.record_hashes, s.record_starts, s.records_end, s.records_size),
        s.cell_records(),
        (s.journal, s.journal_end, s.journal_size, s.bound_journal, s.pending),
        (s.blobs, s.head_lags, s.manifest),
    )


def assert_same(root: Path) -> VerifyStatus:
    return same_report(root).status


def same_report(root: Path) -> VerifyReport:
    fast, checked = scan(root), scan(root, fast=False)
    assert state(fast) == state(checked), (fast.report, checked.report)
    return fast.report


def line_of(domain: Domain, body: bytes) -> bytes:
    return digest_bytes(domain, body)[7:].encode() + b" " + body + b"\n"


def rewrite(path: Path, index: int, edit: Edit, *, chain: bool, encode: str = "canonical") -> None:
    """Edit line ``index`` and rehash it; with ``chain``, relink every later line to it."""
    domain = FILES[path.name]
    lines = path.read_bytes().splitlines(keepends=True)
    out = lines[:index]
    for j in range(index, len(lines)):
        if j > index and not chain:
            out.extend(lines[j:])
            break
        body = msgspec.json.decode(lines[j][65:-1])
        if j == index:
            edit(body)
        if j > index:
            body["prev"] = "blake3:" + out[-1][:64].decode()
        if j == index and encode == "spaced":
            data = json.dumps(body, ensure_ascii=False).encode()
        elif j == index and encode == "unsorted":
            data = msgspec.json.encode(dict(reversed(list(body.items()))))
        else:
            data = canonical_bytes(body)
        out.append(line_of(domain, data))
    path.write_bytes(b"".join(out))


def setter(key: str, value: Any) -> Edit:
    def edit(body: dict[str, Any]) -> None:
        body[key] = value

    return edit


def mutate(key: str, fn: Callable[[Any], Any]) -> Edit:
    def edit(body: dict[str, Any]) -> None:
        if key in body:
            body[key] = fn(body[key])

    return edit


def nested(key: str, inner: str, value: Any) -> Edit:
    def edit(body: dict[str, Any]) -> None:
        item = body.get(key)
        if isinstance(item, list) and item and isinstance(item[0], dict):
            item[0][inner] = value
        elif isinstance(item, dict):
            item[inner] = value

    return edit


def drop(key: str) -> Edit:
    def edit(body: dict[str, Any]) -> None:
        body.pop(key, None)

    return edit


def as_entry(kind: str) -> Edit:
    """Replace the body by a well-formed journal entry of ``kind`` with the same seq and prev."""
    fields: dict[str, dict[str, Any]] = {
        "session": {"records": 1},
        "begin": {"attempt": {"role": "inserted"}},
        "end": {"outcome": {}, "blobs": []},
    }

    def edit(body: dict[str, Any]) -> None:
        seq, prev = body.get("seq", 0), body.get("prev")
        body.clear()
        body.update(kind=kind, seq=seq, prev=prev, schema_version=1, **fields[kind])
        if kind == "end":
            body["begin_seq"] = max(seq - 1, 0)

    return edit


def as_record(kind: str) -> Edit:
    """Replace the body by a well-formed record of ``kind`` with the same seq and prev."""
    fields: dict[str, dict[str, Any]] = {
        "genesis": {"lock_digest": OTHER, "schedule_digest": OTHER, "schedule_rows": 1},
        "cell": {
            "row_index": 0,
            "row": {},
            "row_digest": OTHER,
            "result": {},
            "audit": [],
            "blobs": [],
            "journal": {"count": 0, "head": None},
            "attempts": [],
        },
    }

    def edit(body: dict[str, Any]) -> None:
        seq, prev = body.get("seq", 0), body.get("prev")
        body.clear()
        body.update(kind=kind, seq=seq, prev=prev, schema_version=1, **fields[kind])
        if kind == "cell":
            body.update(seq=max(seq, 1), prev=prev or OTHER)

    return edit


def nothing(body: dict[str, Any]) -> None:
    """Leave the body as it is (with a non-canonical encoding, only the bytes change)."""


EDITS: dict[str, Edit] = {
    "prev-upper": setter("prev", UPPER),
    "prev-other": setter("prev", OTHER),
    "prev-null": setter("prev", None),
    "prev-short": setter("prev", "blake3:abc"),
    "seq-plus": mutate("seq", lambda v: v + 1),
    "seq-negative": setter("seq", -1),
    "schema-2": setter("schema_version", 2),
    "unknown-field": setter("extra", 1),
    "drop-prev": drop("prev"),
    "drop-kind": drop("kind"),
    "kind-begin": setter("kind", "begin"),
    "kind-end": setter("kind", "end"),
    "kind-session": setter("kind", "session"),
    "kind-genesis": setter("kind", "genesis"),
    "blobs-upper": mutate("blobs", lambda v: [UPPER, *v]),
    "blobs-other": mutate("blobs", lambda v: [*v, OTHER]),
    "blobs-duplicated": mutate("blobs", lambda v: v + v),
    "blobs-reversed": mutate("blobs", lambda v: list(reversed(v))),
    "blobs-empty": mutate("blobs", lambda v: []),
    "blobs-not-list": mutate("blobs", lambda v: "x"),
    "attempt-list": mutate("attempt", lambda v: [v]),
    "outcome-null": mutate("outcome", lambda v: None),
    "begin-seq-plus": mutate("begin_seq", lambda v: v + 2),
    "begin-seq-minus": mutate("begin_seq", lambda v: v - 2),
    "as-session": as_entry("session"),
    "as-begin": as_entry("begin"),
    "as-end": as_entry("end"),
    "records-zero": mutate("records", lambda v: 0),
    "records-plus": mutate("records", lambda v: v + 1),
    "as-genesis": as_record("genesis"),
    "as-cell": as_record("cell"),
    "row-changed": mutate("row", lambda v: {**v, "seed": 9}),
    "row-digest-upper": mutate("row_digest", lambda v: UPPER),
    "row-index-plus": mutate("row_index", lambda v: v + 1),
    "result-list": mutate("result", lambda v: [v]),
    "audit-item-list": mutate("audit", lambda v: [[item] for item in v]),
    "audit-dropped": mutate("audit", lambda v: v[:-1]),
    "journal-count-minus": nested("journal", "count", 0),
    "journal-head-upper": nested("journal", "head", UPPER),
    "attempt-hash-upper": nested("attempts", "begin_hash", UPPER),
    "attempt-end-hash-upper": nested("attempts", "end_hash", UPPER),
    "attempt-orphaned-flip": nested("attempts", "orphaned", True),
    "attempt-end-seq-null": nested("attempts", "end_seq", None),
    "attempts-reversed": mutate("attempts", lambda v: list(reversed(v))),
    "attempts-dropped": mutate("attempts", lambda v: v[1:]),
    "lock-digest-upper": setter("lock_digest", UPPER),
    # Wrong types and unknown fields, at the top and nested: only the model decode names them.
    "seq-string": mutate("seq", str),
    "seq-bool": mutate("seq", lambda v: True),
    "prev-int": setter("prev", 7),
    "schema-string": setter("schema_version", "1"),
    "records-string": mutate("records", str),
    "row-index-negative": mutate("row_index", lambda v: -1),
    "row-index-float": mutate("row_index", float),
    "row-list": mutate("row", lambda v: [v]),
    "row-null": mutate("row", lambda v: None),
    "result-null": mutate("result", lambda v: None),
    "result-string": mutate("result", lambda v: "{}"),
    "audit-not-list": mutate("audit", lambda v: {"0": v}),
    "audit-item-null": mutate("audit", lambda v: [None, *v]),
    "attempts-not-list": mutate("attempts", lambda v: {"0": v}),
    "attempt-unknown-field": nested("attempts", "extra", 1),
    "attempt-begin-seq-string": nested("attempts", "begin_seq", "1"),
    "attempt-orphaned-int": nested("attempts", "orphaned", 0),
    "journal-unknown-field": nested("journal", "extra", 1),
    "journal-not-object": mutate("journal", lambda v: [v]),
    "journal-head-int": nested("journal", "head", 3),
    "blobs-item-int": mutate("blobs", lambda v: [*v, 3]),
    "begin-seq-string": mutate("begin_seq", str),
    "attempt-string": mutate("attempt", lambda v: "attempt"),
    "outcome-list": mutate("outcome", lambda v: [v]),
    "kind-unknown": setter("kind", "other"),
    "kind-null": setter("kind", None),
    "schedule-rows-plus": mutate("schedule_rows", lambda v: v + 1),
    "schedule-digest-other": mutate("schedule_digest", lambda v: OTHER),
    "identity-list": mutate("identity", lambda v: [v]),
    "unchanged": nothing,
}

REFUSALS = {
    "journal.log": {
        VerifyCode.JOURNAL_BODY_INVALID,
        VerifyCode.JOURNAL_SEQ,
        VerifyCode.JOURNAL_PREV,
        VerifyCode.JOURNAL_SESSION,
        VerifyCode.JOURNAL_ATTEMPT,
        VerifyCode.JOURNAL_BLOBS,
    },
    "records.log": {
        VerifyCode.RECORD_BODY_INVALID,
        VerifyCode.RECORD_KIND,
        VerifyCode.RECORD_SEQ,
        VerifyCode.RECORD_PREV,
        VerifyCode.LOCK_COPY_MISMATCH,
        VerifyCode.SCHEDULE_COPY_MISMATCH,
        VerifyCode.ROW_INDEX,
        VerifyCode.ROW_MISMATCH,
        VerifyCode.RECORD_JOURNAL,
        VerifyCode.RECORD_ATTEMPTS,
        VerifyCode.RECORD_BLOBS,
    },
}

RAW_EDITS = ("unchanged", "row-changed", "prev-upper", "attempts-reversed", "blobs-reversed")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fast") / "run"
    build(root)
    assert assert_same(root) is VerifyStatus.OK
    return root


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fast-sealed") / "run"
    build(root)
    finalize_store(root)
    assert assert_same(root) is VerifyStatus.OK
    return root


def test_store_fast_path_agrees_on_intact_stores(template: Path, sealed: Path) -> None:
    for root in (template, sealed):
        fast = scan(root)
        assert fast.report.status is VerifyStatus.OK
        assert fast.report.pending_attempts == 1
        assert [len(cell.attempts) for cell in fast.cells] == [2, 2, 2, 1]
        assert [a.orphaned for a in fast.cells[2].attempts] == [True, False]
        assert state(fast) == state(scan(root, fast=False))


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("chain", [False, True], ids=["rehashed", "rehashed-and-chained"])
def test_store_fast_path_agrees_on_every_rehashed_edit(
    tmp_path: Path, template: Path, name: str, chain: bool
) -> None:
    root = tmp_path / "run"
    shutil.copytree(template, root)
    path = root / name
    original = path.read_bytes()
    count = len(original.splitlines())
    statuses, codes = set(), set()
    cases = [(label, "canonical") for label in EDITS if label != "unchanged"]
    # Non-canonical bytes of a valid body: the fast path compares raw bytes, so try them too.
    cases += [(label, encode) for label in RAW_EDITS for encode in ("spaced", "unsorted")]
    for index in range(count):
        for label, encode in cases:
            rewrite(path, index, EDITS[label], chain=chain, encode=encode)
            report = same_report(root)
            statuses.add(report.status)
            codes.add(report.code)
            path.write_bytes(original)
    # Every edit changed something verification sees, or kept the store intact; both occur.
    assert VerifyStatus.TAMPER in statuses
    # The edits reach every refusal of the file's entries or records.
    assert REFUSALS[name] <= codes, sorted(REFUSALS[name] - codes)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_store_fast_path_agrees_on_random_edit_sequences(
    template: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("fast-random") / "run"
    shutil.copytree(template, root)
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(sorted(FILES)))
        path = root / name
        index = data.draw(st.integers(0, len(path.read_bytes().splitlines()) - 1))
        label = data.draw(st.sampled_from(sorted(EDITS)))
        encode = data.draw(st.sampled_from(["canonical", "spaced", "unsorted"]))
        rewrite(path, index, EDITS[label], chain=data.draw(st.booleans()), encode=encode)
    assert_same(root)
    shutil.rmtree(root.parent)


def test_store_fast_path_agrees_on_blob_damage(tmp_path: Path, template: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(template, root)
    blobs = sorted((root / "blobs").iterdir())
    blobs[0].write_bytes(blobs[0].read_bytes() + b"!")
    assert assert_same(root) is VerifyStatus.TAMPER
    blobs[0].unlink()
    assert assert_same(root) is VerifyStatus.TAMPER
    (root / "blobs" / ".tmp-leftover").write_bytes(b"partial")
    (root / "blobs" / ("A" * 64)).write_bytes(b"not a blob name")
    assert assert_same(root) is VerifyStatus.TAMPER


def test_store_fast_path_agrees_on_every_truncation(tmp_path: Path, template: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(template, root)
    for name in sorted(FILES):
        path = root / name
        original = path.read_bytes()
        for offset in range(0, len(original), 11):
            path.write_bytes(original[:offset])
            assert_same(root)
        path.write_bytes(original)


def test_store_fast_path_agrees_on_a_record_committed_with_an_open_attempt(
    tmp_path: Path,
) -> None:
    """A consistent rewrite (journal, record, HEAD) that only the open-attempt rule refuses."""
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:1]) as w:
        key = w.journal_begin({"role": "planner"})
        w.journal_end(key, {"status": "ok"})
        w.commit_cell(0, {}, [])
    journal = root / "journal.log"
    entries = journal.read_bytes().splitlines(keepends=True)
    assert len(entries) == 3  # session, begin, end
    journal.write_bytes(b"".join(entries[:2]))
    begin_hash = "blake3:" + entries[1][:64].decode()

    def reopen(body: dict[str, Any]) -> None:
        body["journal"] = {"count": 2, "head": begin_hash}
        body["attempts"][0].update(end_seq=None, end_hash=None)

    rewrite(root / "records.log", 1, reopen, chain=False)
    last = (root / "records.log").read_bytes().splitlines()[-1]
    head = canonical_bytes(Head(count=2, head="blake3:" + last[:64].decode()))
    (root / "HEAD").write_bytes(line_of(Domain.STORE_HEAD, head))
    assert assert_same(root) is VerifyStatus.TAMPER
    assert scan(root).report.code is VerifyCode.RECORD_ATTEMPTS


def test_store_fast_path_agrees_on_a_record_beyond_the_schedule(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:2]) as w:
        w.commit_cell(0, {}, [])
        w.commit_cell(1, {}, [])
    log = root / "records.log"
    lines = log.read_bytes().splitlines(keepends=True)
    body = msgspec.json.decode(lines[-1][65:-1])
    body.update(seq=3, row_index=2, prev="blake3:" + lines[-1][:64].decode())
    extra = line_of(Domain.STORE_RECORD, canonical_bytes(body))
    log.write_bytes(b"".join(lines) + extra)
    head = canonical_bytes(Head(count=4, head="blake3:" + extra[:64].decode()))
    (root / "HEAD").write_bytes(line_of(Domain.STORE_HEAD, head))
    assert assert_same(root) is VerifyStatus.TAMPER
    assert scan(root).report.code is VerifyCode.ROW_OUT_OF_RANGE


def test_store_fast_path_agrees_on_a_journal_count_going_back(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS[:2]) as w:
        key = w.journal_begin({"role": "planner"})
        w.journal_end(key, {"status": "ok"})
        w.commit_cell(0, {}, [])
        w.commit_cell(1, {}, [])  # binds no new entry: the same count, 3
    entries = (root / "journal.log").read_bytes().splitlines()
    rewrite(
        root / "records.log",
        2,
        setter("journal", {"count": 2, "head": "blake3:" + entries[1][:64].decode()}),
        chain=False,
    )
    last = (root / "records.log").read_bytes().splitlines()[-1]
    head = canonical_bytes(Head(count=3, head="blake3:" + last[:64].decode()))
    (root / "HEAD").write_bytes(line_of(Domain.STORE_HEAD, head))
    assert assert_same(root) is VerifyStatus.TAMPER
    assert scan(root).report.code is VerifyCode.RECORD_JOURNAL
