"""Hypothesis: verification's batched and inlined helpers equal their one-at-a-time definitions.

``iter_lines`` inlines the accepting path of ``parse_line``; ``blob_names`` checks a whole
directory's names at once; the scanner takes each schedule row's bytes from the schedule's own
spans instead of re-encoding every row. Each must give exactly what the plain definition gives.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import conftest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.store import RunStore, VerifyStatus
from harness.store._files import Line, LineFault, blob_names, is_blob_name, iter_lines, parse_line
from harness.store.scan import scan

LOCK = b"study lock for fast helper properties\n"
DOMAINS = [Domain.STORE_RECORD, Domain.JOURNAL_ENTRY]


def reference_lines(
    data: bytes, pos: int, domain: Domain
) -> tuple[list[Line], int, LineFault | None]:
    """``iter_lines`` by its definition: ``parse_line`` until the first fault."""
    lines: list[Line] = []
    while pos < len(data):
        parsed = parse_line(data, pos, domain)
        if isinstance(parsed, LineFault):
            return lines, pos, parsed
        lines.append(parsed)
        pos = parsed.end
    return lines, pos, None


def line(domain: Domain, body: bytes) -> bytes:
    return digest_bytes(domain, body)[7:].encode() + b" " + body + b"\n"


bodies = st.binary(max_size=40).filter(lambda b: b"\n" not in b)
damage = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(bodies, max_size=6),
    written=st.sampled_from(DOMAINS),
    read=st.sampled_from(DOMAINS),
    flips=damage,
    cut=st.integers(0, 10_000),
    tail=st.binary(max_size=80),
    upper=st.booleans(),
)
def test_store_iter_lines_equals_parse_line_one_at_a_time(
    parts: list[bytes],
    written: Domain,
    read: Domain,
    flips: list[tuple[int, int]],
    cut: int,
    tail: bytes,
    upper: bool,
) -> None:
    data = bytearray(b"".join(line(written, body) for body in parts) + tail)
    for offset, value in flips:
        if data:
            data[offset % len(data)] = value
    if upper and data:
        data[: min(len(data), 64)] = data[: min(len(data), 64)].upper()
    raw = bytes(data[: cut % (len(data) + 1)] if cut % 3 == 0 else data)
    for start in {0, len(raw) // 2}:
        assert iter_lines(raw, start, read) == reference_lines(raw, start, read)


hex_names = st.text("0123456789abcdef", min_size=64, max_size=64)
other_names = st.one_of(
    st.text("0123456789abcdef", min_size=63, max_size=65),
    st.text("0123456789abcdefABCDEF", min_size=64, max_size=64),
    st.text(min_size=0, max_size=70),
    hex_names.map(lambda name: ".tmp-" + name),
    hex_names.map(lambda name: name[:10] + "é" + name[11:]),
)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.one_of(hex_names, hex_names, other_names), max_size=8))
def test_store_blob_names_equals_checking_each_name(names: list[str]) -> None:
    assert blob_names(names) == [name for name in names if is_blob_name(name)]


json_scalars = conftest.json_scalars(text=8)
json_values = conftest.json_values(json_scalars, width=3, keys=6, leaves=8)
schedule_rows = st.lists(
    st.dictionaries(st.text(max_size=6), json_values, max_size=4), min_size=1, max_size=5
)


@settings(max_examples=40, deadline=None)
@given(rows=schedule_rows)
def test_store_scanned_row_bytes_are_each_rows_canonical_bytes(rows: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        RunStore.create(root, LOCK, rows).close()
        found = scan(root)
    assert found.report.status is VerifyStatus.OK, found.report.reason
    assert found.row_bytes == [canonical_bytes(row) for row in rows]
    assert found.row_digests == [
        digest_bytes(Domain.SCHEDULE_ROW, canonical_bytes(row)) for row in rows
    ]
