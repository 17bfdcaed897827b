"""What a static run commits to the run store: its identity, schedule rows and cell results.

The static study writes through ``harness.store`` like V2 (no files of its own):

- **genesis** binds the study lock, the canonical schedule and the run identity
  (``StaticIdentity``): ``study`` = ``"static"``, the split, the provider identity exactly as
  V2 binds it (provider, model, endpoint, generation-config digest, planner plug-in), the
  model name the tables print, the benchmark manifest digest, the fourteen policies in record
  order and the two critic seeds;
- **schedule**: one ``SnapshotRow`` per snapshot of the split, in run order (task by task, C0
  then F1..F8). A row identifies the snapshot (id, task, fault, split) and nothing more: the
  scoring labels (world, family, gold decision) are attached by the runner to each decision
  *after* the policy decided, and never reach a policy, which sees ``snapshot.view()`` only;
- **one cell record per snapshot**: its result (``StaticCellResult``) holds the snapshot's
  ``DecisionRecord`` of every policy in the fixed order, and its audit group the provider
  attempts the snapshot's policies made (journaled before and after each call; raw responses
  are store blobs).

The study kind of a store is told by its genesis identity (``harness.audit.study_kind``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from harness.ect.model import Verdict
from harness.errors import StudyKindError
from harness.policies import DecisionSource
from harness.providers.selection import ProviderIdentity
from harness.run_identity import PARTIAL_MARK
from harness.worlds.snapshots import FaultId, GoldDecision, Snapshot
from harness.worlds.world import Split

__all__ = [
    "FIGURE_FILES",
    "PARTIAL_MARK",
    "REPORT_DIR",
    "REPORT_FILES",
    "REPORT_MANIFEST_SCHEMA",
    "STATIC_STUDY",
    "DecisionRecord",
    "SnapshotRow",
    "StaticCellResult",
    "StaticIdentity",
    "StudySplit",
    "decode_identity",
    "snapshot_rows",
]

STATIC_STUDY: Final = "static"
"""The ``study`` value a static store's genesis identity carries."""

StudySplit = Literal["heldout", "dev"]

REPORT_DIR: Final = "report"
"""Where ``harness static report STORE`` writes its files by default (``STORE/report``)."""

REPORT_FILES: Final = (
    "table2.md",
    "table2.csv",
    "table2.tex",
    "table2.json",
    "table3.md",
    "table3.csv",
    "table3.tex",
    "table3.json",
    "endpoints.md",
    "endpoints.json",
    "report.html",
    "ucr.png",
    "ucr.svg",
    "ucr.pdf",
)
"""Every file a report writes (the figures only with the [plots] extra)."""

REPORT_MANIFEST_SCHEMA: Final = "harness.static-report-manifest.v1"
"""The schema of the static report's ``report-manifest.json`` (``studies.report_manifest``),
written beside ``REPORT_FILES``: their digests and the partial-report mark."""

FIGURE_FILES: Final = ("ucr.png", "ucr.svg", "ucr.pdf")
"""Written only with the [plots] extra installed."""


class DecisionRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A policy's decision on one snapshot, with its labels.

    The labels (``fault`` .. ``gold_decision``) are scoring data attached by the runner; the
    policy decided without them.
    """

    schema_version: Literal[1] = 1
    policy: str
    snapshot_id: str
    task_id: str
    world_id: str
    family: str
    fault: FaultId
    split: Split
    gold_decision: GoldDecision
    decision: Verdict
    reason_codes: tuple[str, ...]
    source: DecisionSource
    attempt_ids: tuple[str, ...]


class SnapshotRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One schedule row: which snapshot a cell decides (no scoring label)."""

    snapshot_id: str
    task_id: str
    fault: FaultId
    split: Split


class StaticCellResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A snapshot's cell result: every policy's decision on it, in the study's policy order."""

    schema_version: Literal[1] = 1
    snapshot_id: str
    decisions: tuple[DecisionRecord, ...]


class StaticIdentity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The identity a static store's genesis binds (everything that shapes its results)."""

    study: Literal["static"] = "static"
    split: StudySplit
    provider: ProviderIdentity
    model: str
    manifest_digest: str
    policies: tuple[str, ...]
    critic_core_seed: int
    full_trace_critic_seed: int

    @property
    def simulated(self) -> bool:
        """True when the simulated provider answered the model calls."""
        return self.provider.provider.value == "simulated"


def snapshot_rows(snapshots: Sequence[Snapshot]) -> list[dict[str, Any]]:
    """The canonical schedule of a static run: one plain row per snapshot, in run order."""
    return [
        msgspec.to_builtins(
            SnapshotRow(snapshot_id=s.snapshot_id, task_id=s.task_id, fault=s.fault, split=s.split)
        )
        for s in snapshots
    ]


def decode_identity(identity: dict[str, Any], where: str) -> StaticIdentity:
    """The static identity a genesis binds.

    Raises:
        StudyKindError: the identity is not a static study's (one line naming ``where``).
    """
    if identity.get("study") != STATIC_STUDY:
        raise StudyKindError(f"{where} is not a static study store (its genesis names no study)")
    try:
        return msgspec.convert(identity, StaticIdentity, strict=True)
    except msgspec.ValidationError as e:
        raise StudyKindError(f"{where}: its genesis holds no valid static identity ({e})") from e
