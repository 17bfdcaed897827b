"""Hypothesis: store round-trip, determinism, and damage at random never verifying as ok."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import conftest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.store import RunStore, VerifyStatus, read_store, verify_store

LOCK = b"study lock for property tests\n"

json_values = conftest.json_values(leaves=12)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
cells = st.lists(
    st.tuples(json_objects, st.lists(json_objects, max_size=3), st.binary(max_size=64)),
    min_size=1,
    max_size=4,
)


def _write(root: Path, content: list[tuple[dict[str, Any], list[dict[str, Any]], bytes]]) -> None:
    rows = [{"cell": i} for i in range(len(content))]
    with RunStore.create(root, LOCK, rows) as writer:
        for row, (result, audit, raw) in enumerate(content):
            key = writer.journal_begin({"row": row})
            writer.journal_end(key, {"ok": True}, blobs=[writer.put_blob(raw)])
            writer.commit_cell(row, result, audit)


@settings(max_examples=40, deadline=None)
@given(content=cells)
def test_store_round_trip_and_determinism(
    content: list[tuple[dict[str, Any], list[dict[str, Any]], bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp) / "a", Path(tmp) / "b"
        _write(first, content)
        _write(second, content)
        view = read_store(first)
        assert view.report.status is VerifyStatus.OK
        assert [cell.result for cell in view.cells] == [result for result, _, _ in content]
        assert [list(cell.audit) for cell in view.cells] == [audit for _, audit, _ in content]
        for name in ("records.log", "journal.log", "HEAD", "schedule.json"):
            assert (first / name).read_bytes() == (second / name).read_bytes()


@settings(max_examples=60, deadline=None)
@given(
    content=cells,
    where=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    mask=st.integers(min_value=1, max_value=255),
    name=st.sampled_from(["records.log", "journal.log", "HEAD", "schedule.json"]),
)
def test_store_any_byte_flip_fails_verification(
    content: list[tuple[dict[str, Any], list[dict[str, Any]], bytes]],
    where: float,
    mask: int,
    name: str,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        _write(root, content)
        path = root / name
        data = bytearray(path.read_bytes())
        data[int(where * len(data))] ^= mask
        path.write_bytes(bytes(data))
        # Every record and journal entry is bound and claimed: any flip is tamper.
        assert verify_store(root).status is VerifyStatus.TAMPER
