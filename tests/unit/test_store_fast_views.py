"""The fast-path Structs of store verification mirror the checked ones, digest patterns aside.

The fast path decodes journal entries and cell records with every digest field a plain string
and accepts a body only when each such field equals a digest it computed. That is sound only if
the fast Structs differ from the checked ones in nothing else: same fields, order, defaults,
constraints, tags and unknown-field policy. These tests compare msgspec's own description of
both, with the digest pattern (and nothing else) erased.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi

from harness.store import AttemptRef, BeginEntry, EndEntry, JournalPos, SessionEntry
from harness.store._journal import derive_range
from harness.store._scan import (
    _CellView,
    _FastAttempt,
    _FastBegin,
    _FastCell,
    _FastEnd,
    _FastPos,
    _FastSession,
)

DIGEST_PATTERN = "^blake3:[0-9a-f]{64}$"


def shape(t: Any) -> Any:
    """msgspec's type description with the digest pattern and Struct classes erased."""
    if isinstance(t, mi.StrType):
        return msgspec.structs.replace(t, pattern=None) if t.pattern == DIGEST_PATTERN else t
    if isinstance(t, mi.StructType):
        fields = (
            (f.name, f.encode_name, shape(f.type), f.required, f.default, f.default_factory)
            for f in t.fields
        )
        return ("struct", t.tag_field, t.tag, t.array_like, t.forbid_unknown_fields, *fields)
    if isinstance(t, mi.UnionType):
        return ("union", *(shape(x) for x in t.types))
    if isinstance(t, (mi.VarTupleType, mi.ListType)):
        return (type(t).__name__, shape(t.item_type))
    if isinstance(t, mi.DictType):
        return ("dict", shape(t.key_type), shape(t.value_type))
    return t


def test_store_fast_journal_entries_mirror_the_entries() -> None:
    pairs = [(SessionEntry, _FastSession), (BeginEntry, _FastBegin), (EndEntry, _FastEnd)]
    for checked, fast in pairs:
        assert shape(mi.type_info(fast)) == shape(mi.type_info(checked)), fast.__name__


def test_store_fast_cell_parts_mirror_the_record_parts() -> None:
    assert shape(mi.type_info(_FastPos)) == shape(mi.type_info(JournalPos))
    assert shape(mi.type_info(_FastAttempt)) == shape(mi.type_info(AttemptRef))


def test_store_fast_cell_is_the_cell_view_with_kind_as_a_required_field() -> None:
    view = shape(mi.type_info(_CellView))
    fast = shape(mi.type_info(_FastCell))
    assert view[:5] == ("struct", "kind", "cell", False, True)
    assert fast[:5] == ("struct", None, None, False, True)
    kind = fast[5]
    assert kind == ("kind", "kind", mi.LiteralType(values=("cell",)), True, *kind[4:])
    assert fast[6:] == view[5:]


def test_store_derived_attempt_fields_follow_attempt_ref_field_order() -> None:
    # The fast path compares derive_range's plain tuples with astuple() of decoded attempts.
    assert AttemptRef.__struct_fields__ == (
        "begin_seq",
        "begin_hash",
        "end_seq",
        "end_hash",
        "orphaned",
    )
    assert _FastAttempt.__struct_fields__ == AttemptRef.__struct_fields__
    assert derive_range([]) == ([], set(), [])
