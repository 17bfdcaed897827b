"""The views store verification decodes mirror the model types, digest patterns and raw JSON aside.

Verification decodes each journal entry and cell record into a view with every digest field a
plain string (and, for a cell, the row, result and audit entries as raw JSON), and skips the
decode into the model type only when each such field equals a digest it computed and each raw
field is a JSON object. That is sound only if the views differ from the model types in nothing
else: same fields, order, defaults, constraints, tags and unknown-field policy. These tests
compare msgspec's own description of both, with those differences (and nothing else) erased.
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi

from harness.store import AttemptRef, BeginEntry, CellRecord, EndEntry, JournalPos, SessionEntry
from harness.store._journal import derive_range
from harness.store.scan.views import AttemptView, BeginView, CellView, EndView, PosView, SessionView

DIGEST_PATTERN = "^blake3:[0-9a-f]{64}$"
JSON_OBJECT = ("dict", mi.StrType(), mi.AnyType())


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


def test_store_journal_entry_views_mirror_the_entries() -> None:
    pairs = [(SessionEntry, SessionView), (BeginEntry, BeginView), (EndEntry, EndView)]
    for model, view in pairs:
        assert shape(mi.type_info(view)) == shape(mi.type_info(model)), view.__name__


def test_store_cell_view_parts_mirror_the_record_parts() -> None:
    assert shape(mi.type_info(PosView)) == shape(mi.type_info(JournalPos))
    assert shape(mi.type_info(AttemptView)) == shape(mi.type_info(AttemptRef))


def test_store_cell_view_is_the_cell_record_with_raw_objects_and_kind_as_a_field() -> None:
    model = shape(mi.type_info(CellRecord))
    view = shape(mi.type_info(CellView))
    assert model[:5] == ("struct", "kind", "cell", False, True)
    assert view[:5] == ("struct", None, None, False, True)
    kind = view[5]
    assert kind == ("kind", "kind", mi.LiteralType(values=("cell",)), True, *kind[4:])
    raw = {"row": mi.RawType(), "result": mi.RawType(), "audit": ("VarTupleType", mi.RawType())}
    objects = {"row": JSON_OBJECT, "result": JSON_OBJECT, "audit": ("VarTupleType", JSON_OBJECT)}
    assert len(view[6:]) == len(model[5:])
    for seen, expected in zip(view[6:], model[5:], strict=True):
        name, _, kind_of, *rest = seen
        if name in raw:
            assert kind_of == raw[name], name
            assert expected[2] == objects[name], name
            assert (name, *rest) == (expected[0], *expected[3:]), name
        else:
            assert seen == expected, name


def test_store_derived_attempt_fields_follow_attempt_ref_field_order() -> None:
    # The checks compare derive_range's plain tuples with astuple() of decoded attempts.
    assert AttemptRef.__struct_fields__ == (
        "begin_seq",
        "begin_hash",
        "end_seq",
        "end_hash",
        "orphaned",
    )
    assert AttemptView.__struct_fields__ == AttemptRef.__struct_fields__
    assert derive_range([]) == ([], set(), [])
