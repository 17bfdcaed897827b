"""World generation: same id -> same bytes, hierarchy shape, nulls, disjoint splits."""

from __future__ import annotations

import json

import pytest

from harness.canonical import canonical_bytes
from harness.errors import UnknownWorldError
from harness.worlds import (
    DEV_WORLDS,
    HELDOUT_WORLDS,
    PERIODS,
    SPLITS,
    STATIC_WORLDS,
    V2_WORLDS,
    WORLD_IDS,
    generate_world,
    split_of,
    world_digest,
)


def test_split_world_ids_are_disjoint_and_as_specified() -> None:
    assert DEV_WORLDS == ("00", "01")
    assert HELDOUT_WORLDS == ("02", "03", "04", "05", "06", "07")
    assert V2_WORLDS == ("10", "11", "12", "13")
    groups = [set(ids) for ids in SPLITS.values()]
    assert sum(len(g) for g in groups) == len(set().union(*groups)) == len(WORLD_IDS) == 12
    assert STATIC_WORLDS == DEV_WORLDS + HELDOUT_WORLDS
    assert [split_of(w) for w in WORLD_IDS] == ["dev"] * 2 + ["heldout"] * 6 + ["v2"] * 4


@pytest.mark.parametrize("world_id", WORLD_IDS)
def test_same_id_gives_byte_identical_world(world_id: str) -> None:
    first, second = generate_world(world_id), generate_world(world_id)
    assert canonical_bytes(first) == canonical_bytes(second)
    assert world_digest(first) == world_digest(second)


def test_different_ids_give_different_worlds() -> None:
    digests = {world_digest(generate_world(w)) for w in WORLD_IDS}
    assert len(digests) == len(WORLD_IDS)


@pytest.mark.parametrize("world_id", WORLD_IDS)
def test_world_has_three_level_hierarchy_metrics_and_nulls(world_id: str) -> None:
    world = generate_world(world_id)
    assert world.periods == PERIODS
    assert len(world.metrics) == 4
    regions, districts, sites = (world.ids(level) for level in ("region", "district", "site"))
    assert 2 <= len(regions) <= 3
    assert len(districts) == 3 * len(regions)
    for entity_id, entity in world.entities.items():
        if entity.parent is not None:
            assert entity_id.startswith(entity.parent + ".")
            assert entity_id in world.entities[entity.parent].children
        assert (entity.level == "site") == (not entity.children)
    for district in districts:
        assert 3 <= len(world.entities[district].children) <= 4
    assert set(world.values) == set(sites)
    cells = [v for s in sites for m in world.metric_names() for v in world.values[s][m]]
    assert len(cells) == len(sites) * 4 * len(PERIODS)
    assert all(v is None or (type(v) is int and v >= 0) for v in cells)
    assert 0 < sum(v is None for v in cells) < len(cells) // 5
    # an outage: some site-metric misses three consecutive months
    assert any(
        all(v is None for v in world.values[s][m][i : i + 3])
        for s in sites
        for m in world.metric_names()
        for i in range(len(PERIODS) - 2)
    )


def test_world_plain_form_is_json_and_round_trips() -> None:
    world = generate_world("05")
    plain = world.to_plain()
    assert json.loads(json.dumps(plain)) == plain
    assert plain["entities"]["R1"]["children"] == list(world.entities["R1"].children)


@pytest.mark.parametrize("bad", ["3", "003", "ab", "", "1a"])
def test_malformed_world_id_is_refused(bad: str) -> None:
    with pytest.raises(UnknownWorldError, match=r"^world id must be two digits"):
        generate_world(bad)


def test_non_benchmark_world_has_no_split() -> None:
    generate_world("42")  # any two-digit id is a world ...
    with pytest.raises(UnknownWorldError, match=r"^world '42' is not a benchmark world"):
        split_of("42")  # ... but only the twelve benchmark ids belong to a split
