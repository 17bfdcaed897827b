"""What the scan decodes a record or journal entry into before checking it: the stored types
with every digest a plain string (compared with one computed during the scan, not re-checked by
pattern) and, for a cell record, the row, result and audit entries as raw JSON. A test pins that
only these differences exist (``tests/unit/test_store_fast_views.py``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from harness.store._model import Count

__all__ = ["AttemptView", "BeginView", "CellView", "EndView", "PosView", "SessionView"]


class PosView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``JournalPos`` as the scan reads it: ``head`` unchecked (compared with a computed one)."""

    count: Count
    head: str | None


class AttemptView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``AttemptRef`` as the scan reads it: the hashes unchecked (compared with computed ones)."""

    begin_seq: Count
    begin_hash: str
    end_seq: Count | None
    end_hash: str | None
    orphaned: bool


class CellView(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``CellRecord`` as the scan reads it (a test pins that only these differences exist).

    Digests are plain strings; row, result and audit entries stay raw JSON. Not a tagged
    Struct: decoded on its own, a tagged Struct would accept a body without the tag, and inside
    a union msgspec must look ahead for the tag, which sorts after most fields and costs a
    second parse of the body. ``kind`` is an ordinary required field instead.
    """

    kind: Literal["cell"]
    schema_version: Literal[1] = 1
    seq: Annotated[int, msgspec.Meta(ge=1)]
    prev: str
    row_index: Count
    row: msgspec.Raw
    row_digest: str
    result: msgspec.Raw
    audit: tuple[msgspec.Raw, ...]
    blobs: tuple[str, ...]
    journal: PosView
    attempts: tuple[AttemptView, ...]


class _EntryView(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind"
):
    """Base of the journal entry views: the entries with ``prev`` and blob digests unchecked."""


class SessionView(_EntryView, tag="session", frozen=True, kw_only=True):
    """``SessionEntry`` as the scan reads it (a test pins that only digest patterns differ)."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: str | None
    records: Annotated[int, msgspec.Meta(ge=1)]
    environment: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


class BeginView(_EntryView, tag="begin", frozen=True, kw_only=True):
    """``BeginEntry`` as the scan reads it."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: str | None
    attempt: dict[str, Any]


class EndView(_EntryView, tag="end", frozen=True, kw_only=True):
    """``EndEntry`` as the scan reads it."""

    schema_version: Literal[1] = 1
    seq: Count
    prev: str | None
    begin_seq: Count
    outcome: dict[str, Any]
    blobs: tuple[str, ...]
