"""Dual-oracle admission, the families' contracts, and the closed-language coverage."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from harness.benchmark.build import benchmark
from harness.canonical import canonical_bytes
from harness.ect import OPS
from harness.errors import AdmissionError
from harness.worlds import (
    FAMILIES,
    Family,
    OracleResult,
    Rejection,
    admit,
    draw_candidate,
    generate_world,
    python_oracle,
    sql_oracle,
)


def test_benchmark_has_72_tasks_one_per_family_per_world() -> None:
    tasks = benchmark().tasks
    assert len(tasks) == 72
    assert len({t.task_id for t in tasks}) == 72
    for split, count in (("dev", 12), ("heldout", 36), ("v2", 24)):
        chosen = benchmark().tasks_in(split)  # type: ignore[arg-type]
        assert len(chosen) == count
        assert {t.family for t in chosen} == set(FAMILIES)
        assert all(sum(t.family == f for t in chosen) == count // 6 for f in FAMILIES)


def test_both_oracles_agree_with_gold_on_every_admitted_task() -> None:
    bench = benchmark()
    for world in bench.worlds:
        sql, py = sql_oracle(world), python_oracle(world)
        for task in (t for t in bench.tasks if t.world_id == world.world_id):
            family: Family = task.family  # type: ignore[assignment]
            gold = canonical_bytes(task.gold)
            assert canonical_bytes(sql(family, task.descriptor.params)) == gold, task.task_id
            assert canonical_bytes(py(family, task.descriptor.params)) == gold, task.task_id


def test_every_task_has_two_or_more_slots_and_exact_contract() -> None:
    for task in benchmark().tasks:
        assert len(task.descriptor.required_slots) >= 2
        assert set(task.gold) == set(task.descriptor.required_slots)
        for plan, slot in zip(task.plan, task.requirements.slots, strict=True):
            assert plan.slot == slot.slot
            assert slot.transforms == (plan.transform,)
            assert slot.min_evidence == slot.max_evidence == len(plan.evidence)
            planned = {
                (i.scope.entity, i.scope.attribute, i.scope.level, i.scope.date)
                for i in plan.evidence
            }
            rule = slot.scope
            allowed = set(
                itertools.product(rule.entities, rule.attributes, rule.levels, rule.dates)
            )
            assert allowed == planned, (task.task_id, slot.slot)


def test_families_together_use_every_closed_transform_op() -> None:
    used = {type(p.transform).__struct_config__.tag for t in benchmark().tasks for p in t.plan}
    assert used == set(OPS)
    # the static and V2 halves each cover the whole language on their own
    for splits in (("dev", "heldout"), ("v2",)):
        tasks = [t for t in benchmark().tasks if t.split in splits]
        assert {type(p.transform).__struct_config__.tag for t in tasks for p in t.plan} == set(OPS)


def test_ill_posed_candidates_are_skipped_and_recorded() -> None:
    skipped = [t for t in benchmark().tasks if t.admission.rejected]
    assert skipped, "generation never exercised rejection"
    for task in skipped:
        assert task.admission.attempt == len(task.admission.rejected)
        world = generate_world(task.world_id)
        family: Family = task.family  # type: ignore[assignment]
        for attempt in range(task.admission.attempt):
            params = draw_candidate(world, family, attempt).params
            assert isinstance(sql_oracle(world)(family, params), Rejection)
            assert isinstance(python_oracle(world)(family, params), Rejection)


def _off_by_one(world: Any) -> Any:
    honest = python_oracle(world)

    def broken(family: Family, params: Mapping[str, Any]) -> OracleResult:
        answer = honest(family, params)
        if isinstance(answer, Rejection):
            return answer
        slot = sorted(answer)[0]
        value = answer[slot]
        return {**answer, slot: value + 1 if isinstance(value, int) else [value]}

    return broken


@pytest.mark.parametrize("family", FAMILIES)
def test_a_broken_oracle_makes_admission_fail(family: Family) -> None:
    world = generate_world("02")
    with pytest.raises(AdmissionError, match=rf"^no {family} task admitted in world 02 after 64 "):
        admit(world, family, (sql_oracle(world), _off_by_one(world)))


def test_an_oracle_that_rejects_everything_blocks_admission() -> None:
    world = generate_world("04")

    def refuses(family: Family, params: Mapping[str, Any]) -> OracleResult:
        return Rejection("refuses")

    with pytest.raises(AdmissionError, match=r"oracles disagree\)$"):
        admit(world, "lookup", (python_oracle(world), refuses), max_attempts=3)


def test_admission_needs_two_oracles() -> None:
    world = generate_world("04")
    with pytest.raises(AdmissionError, match=r"^admission needs at least two"):
        admit(world, "lookup", (python_oracle(world),))


def test_candidates_are_deterministic_per_attempt() -> None:
    world = generate_world("06")
    for family in FAMILIES:
        assert draw_candidate(world, family, 3) == draw_candidate(world, family, 3)
