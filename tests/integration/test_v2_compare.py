"""``harness v2 compare``: two stores of different identities side by side.

Both stores hold the synthetic study of ``v2_report_support`` under the project's real study
lock; store B is an OpenAI-compatible run in which one ECT cell (``w90-b`` incomplete) ended
with a supported completion instead of an exhausted budget. The expected numbers are worked
out by hand from ``OUTCOMES``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from v2_report_support import CONFIG_PATH, all_results

from harness.cli import main
from harness.errors import StudyReportError
from harness.lock import build_lock, encode_lock
from harness.store import RunStore, finalize_store
from harness.studies.v2.compare import compare_stores
from harness.studies.v2.outcomes import CellResult

OPENAI = {
    "provider": "openai",
    "model": "my-model-7b",
    "endpoint": "http://127.0.0.1:8000/v1",
    "api_version": None,
    "generation_config_digest": "blake3:" + "1" * 64,
    "endpoint_host": "127.0.0.1:8000",
    "credential": "none",
}
SIMULATED = {
    "provider": "simulated",
    "model": None,
    "endpoint": None,
    "api_version": None,
    "generation_config_digest": "blake3:" + "1" * 64,
}


def _store(root: Path, results: list[CellResult], identity: dict[str, Any]) -> Path:
    rows = [{"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in results]
    with RunStore.create(
        root, encode_lock(build_lock()), rows, identity={"provider": identity}
    ) as writer:
        for index, result in enumerate(results):
            writer.commit_cell(index, msgspec.to_builtins(result), [])
    finalize_store(root)
    return root


def _b_results() -> list[CellResult]:
    out = []
    for r in all_results():
        if (r.task_id, r.checkpoint, r.policy) == ("w90-b", "incomplete", "ect"):
            r = msgspec.structs.replace(
                r,
                terminal="complete",
                terminal_decision=r.turns,
                proposals=1,
                supported_proposals=1,
                supported_completion=True,
                completed_after_recovery=True,
                final_answer={"slot": 1},
            )
        out.append(msgspec.structs.replace(r, provider="openai", simulated=False))
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("compare")
    a = _store(base / "a", all_results(), SIMULATED)
    b = _store(base / "b", _b_results(), OPENAI)
    return a, b


def test_v2_compare_pairs_the_table4_rates_by_task_cluster(stores: tuple[Path, Path]) -> None:
    a, b = stores
    c = compare_stores(a, b, CONFIG_PATH)
    assert c.paired_cells == 24
    assert c.a.provider == (
        "simulated (SIMULATED, not a language model); model simulated; endpoint none; "
        "planner none; credential none"
    )
    assert c.b.provider == (
        "openai; model my-model-7b; endpoint 127.0.0.1:8000; planner none; credential none"
    )
    assert c.b.not_frozen_study.startswith("NOT THE PAPER'S FROZEN STUDY")
    assert c.a.not_frozen_study == (
        "NOT THE PAPER'S FROZEN STUDY: the provider is simulated, not a language model."
    )
    ect = {d.rate: d for d in c.deltas if d.policy == "ect"}
    # ECT, primary clusters w90-a and w90-b: S is 3/4 in A and 4/4 in B.
    assert (ect["S"].trials, ect["S"].a_pct, ect["S"].b_pct) == (4, 75.0, 100.0)
    assert ect["S"].delta_pp == pytest.approx(-25.0)
    assert ect["S"].low_pp <= ect["S"].delta_pp <= ect["S"].high_pp
    assert ect["S"].clusters == 2
    # U and R did not change anywhere: zero deltas with zero-width intervals.
    for name in ("U", "R"):
        assert (ect[name].delta_pp, ect[name].low_pp, ect[name].high_pp) == (0.0, 0.0, 0.0)
    others = [d for d in c.deltas if d.policy != "ect"]
    assert others
    assert all(d.delta_pp == 0.0 for d in others)
    ect_row_b = next(row for row in c.b.table4 if row.policy == "ect")
    assert (ect_row_b.s, ect_row_b.s_n) == (4, 4)


def test_v2_compare_cli_prints_both_identities_and_the_deltas(stores: tuple[Path, Path]) -> None:
    a, b = stores
    result = CliRunner().invoke(main, ["v2", "compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "## A: simulated (SIMULATED, not a language model); model simulated;" in out
    assert "## B: openai; model my-model-7b; endpoint 127.0.0.1:8000;" in out
    assert "**NOT THE PAPER'S FROZEN STUDY: the run used provider openai; model my-model-7b" in out
    assert "| ECT | S | 4 | 75.0 | 100.0 | -25.0 |" in out
    as_json = CliRunner().invoke(main, ["v2", "compare", str(a), str(b), "--json"])
    assert as_json.exit_code == 0
    doc = msgspec.json.decode(as_json.stdout.encode())
    assert doc["paired_cells"] == 24


def test_v2_compare_refuses_stores_of_different_schedules(
    stores: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = stores
    other = _store(tmp_path / "c", all_results()[:6], SIMULATED)
    with pytest.raises(StudyReportError, match=r"ran different schedules"):
        compare_stores(a, other, CONFIG_PATH)
    result = CliRunner().invoke(main, ["v2", "compare", str(a), str(tmp_path / "missing")])
    assert result.exit_code != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _pilot(root: Path, results: list[CellResult], rows: list[dict[str, Any]] | None = None) -> Path:
    plain = rows or [
        {"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in results
    ]
    label = {"limit": len(results), "cells": [], "rows": len(results), "of": 24}
    with RunStore.create(
        root, encode_lock(build_lock()), plain, identity={"provider": OPENAI, "pilot": label}
    ) as writer:
        for index, result in enumerate(results):
            writer.commit_cell(index, msgspec.to_builtins(result), [])
    finalize_store(root)
    return root


def test_v2_compare_pairs_a_pilot_with_the_same_cells_of_a_full_run(
    stores: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = stores
    pilot = _pilot(tmp_path / "pilot", _b_results()[:10])
    c = compare_stores(a, pilot, CONFIG_PATH)
    assert c.paired_cells == 10
    # A pilot whose rows differ from the full run's for the same cell is not paired.
    results = _b_results()[:10]
    rows = [
        {"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy, "seed": 9} for r in results
    ]
    other = _pilot(tmp_path / "other", results, rows)
    with pytest.raises(StudyReportError, match=r"with different schedule rows"):
        compare_stores(a, other, CONFIG_PATH)
