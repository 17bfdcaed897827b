"""The frozen V2 config and the canonical 576-row schedule: current, ordered, fault rule kept."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec
import pytest

from harness.errors import V2ConfigError, V2ScheduleError
from harness.faults import ALL_FAULTS
from harness.lock import project_root
from harness.providers.config import config_digest, default_generation_config
from harness.store import schedule_digest
from harness.studies.v2.config import (
    DEFAULT_CONFIG_PATH,
    ORDER,
    decode_config,
    encode_config,
    load_config,
)
from harness.studies.v2.schedule import (
    DEFAULT_DIGEST_PATH,
    DEFAULT_SCHEDULE_PATH,
    assign_faults,
    build_rows,
    canonical_schedule,
    digest_line,
    encode_schedule,
    load_schedule,
    plain_rows,
)
from harness.worlds import FAMILIES, V2_WORLDS

ROOT = project_root()


@pytest.fixture(scope="module")
def config_bytes() -> bytes:
    return (ROOT / DEFAULT_CONFIG_PATH).read_bytes()


def test_v2_committed_schedule_and_digest_are_current() -> None:
    # Fails until scripts/make_v2_schedule.py is run after a change to the config.
    config, _ = load_config(ROOT / DEFAULT_CONFIG_PATH)
    rows = build_rows(config)
    assert (ROOT / DEFAULT_SCHEDULE_PATH).read_bytes() == encode_schedule(rows)
    assert (ROOT / DEFAULT_DIGEST_PATH).read_bytes() == digest_line(rows)
    loaded, plain = load_schedule(ROOT / DEFAULT_SCHEDULE_PATH, config)
    assert loaded == rows
    assert canonical_schedule() == plain
    assert digest_line(rows).split()[0].decode() == schedule_digest(plain)


def test_v2_config_is_canonical_and_freezes_the_default_generation_config(
    config_bytes: bytes,
) -> None:
    config = decode_config(config_bytes, origin="committed")
    assert encode_config(config) == config_bytes
    assert config.generation_config == default_generation_config()
    assert config.generation_config_digest == config_digest(default_generation_config())
    assert config.budget.decisions == 4
    assert config.budget.additional_tool_calls == 3
    assert config.seeds == (1, 2, 3)
    assert config.analysis.bootstrap_replicates == 10_000
    assert config.analysis.h3.noninferiority_margin_pp == -10.0


def test_v2_schedule_has_576_rows_in_canonical_order() -> None:
    config, _ = load_config(ROOT / DEFAULT_CONFIG_PATH)
    rows = build_rows(config)
    assert len(rows) == 576 == 24 * 2 * 4 * 3
    assert [r.index for r in rows] == list(range(576))
    assert len({r.cell_id for r in rows}) == 576
    tasks = [f"w{w}-{f}" for w in V2_WORLDS for f in FAMILIES]
    expected = [
        (seed, task, checkpoint, policy)
        for seed in (1, 2, 3)
        for task in tasks
        for checkpoint in ("clean", "incomplete")
        for policy in ("critic", "controller", "full_trace", "ect")
    ]
    assert [(r.seed, r.task_id, r.checkpoint, r.policy) for r in rows] == expected
    assert ORDER == ("seed", "task", "checkpoint", "policy")


def test_v2_fault_rule_gives_every_fault_two_tasks_of_two_families() -> None:
    table = assign_faults(V2_WORLDS, FAMILIES)
    assert len(table) == 24
    assert Counter(table.values()) == dict.fromkeys(ALL_FAULTS, 2)
    for fault in ALL_FAULTS:
        tasks = [t for t, f in table.items() if f == fault]
        assert len({t.split("-", 1)[1] for t in tasks}) == 2, fault
        assert len({t[1:3] for t in tasks}) == 2, fault
    # U1 needs a parameterised transform: never aggregation or missing-data abstention.
    assert all(
        not t.endswith(("aggregation", "missing_data_abstention"))
        for t, f in table.items()
        if f == "U1"
    )


def test_v2_t1_clusters_are_excluded_and_nothing_else() -> None:
    config, _ = load_config(ROOT / DEFAULT_CONFIG_PATH)
    rows = build_rows(config)
    t1 = {t for t, f in config.fault_assignment.tasks.items() if f == "T1"}
    assert set(config.excluded_from_confirmatory.tasks) == t1
    assert len(t1) == 2
    assert {r.task_id for r in rows if not r.primary} == t1
    assert sum(r.primary for r in rows) == 528  # 22 primary clusters x 24 cells


def test_v2_config_with_a_hand_edited_fault_table_is_refused(config_bytes: bytes) -> None:
    config = decode_config(config_bytes, origin="committed")
    tasks = dict(config.fault_assignment.tasks)
    tasks["w10-lookup"], tasks["w10-aggregation"] = tasks["w10-aggregation"], tasks["w10-lookup"]
    edited = msgspec.structs.replace(
        config,
        fault_assignment=msgspec.structs.replace(config.fault_assignment, tasks=tasks),
    )
    with pytest.raises(V2ConfigError, match=r"differs from what the stated rule assigns$"):
        build_rows(edited)


def test_v2_config_with_an_unknown_field_or_missing_value_is_refused(
    config_bytes: bytes,
) -> None:
    doc = msgspec.json.decode(config_bytes)
    doc["extra"] = 1
    unknown = r"^V2 study config x is malformed: Object contains unknown"
    with pytest.raises(V2ConfigError, match=unknown):
        decode_config(msgspec.json.encode(doc), origin="x")
    doc = msgspec.json.decode(config_bytes)
    del doc["budget"]
    with pytest.raises(V2ConfigError, match=r"missing required field `budget`"):
        decode_config(msgspec.json.encode(doc), origin="x")
    doc = msgspec.json.decode(config_bytes)
    doc["generation_config"]["gemini"]["temperature"] = 0.3
    with pytest.raises(V2ConfigError, match=r"generation_config_digest does not match"):
        decode_config(msgspec.json.encode(doc), origin="x")


def test_v2_stale_schedule_file_is_refused(tmp_path: Path) -> None:
    config, _ = load_config(ROOT / DEFAULT_CONFIG_PATH)
    rows = build_rows(config)
    stale = tmp_path / "schedule.json"
    stale.write_bytes(encode_schedule(rows[:-1]))
    with pytest.raises(V2ScheduleError, match=r"run scripts/make_v2_schedule.py$"):
        load_schedule(stale, config)
    with pytest.raises(V2ScheduleError, match=r"^cannot read the V2 schedule"):
        load_schedule(tmp_path / "missing.json", config)
    assert plain_rows(rows[:1])[0]["cell_id"] == "w10-lookup.clean.critic.s1"
