"""Seeded worlds: a region > district > site hierarchy with integer metrics over monthly periods.

A world is generated from its two-digit id alone (``generate_world("03")``): the same id gives
byte-identical data on every machine, because every draw comes from a BLAKE3 stream keyed by the
id and all arithmetic is on integers. Values live at the site level; a few are null (sporadic
gaps, plus two outages of three consecutive months each, so every world has data to abstain on).

Worlds 00-01 are development, 02-07 held out, 10-13 the fresh worlds of the closed-loop (V2)
study. This module builds and describes worlds; it does not choose tasks (``families``) or
compute answers (``oracles``).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest
from harness.errors import UnknownWorldError
from harness.streams import Stream

__all__ = [
    "DEV_WORLDS",
    "HELDOUT_WORLDS",
    "LEVELS",
    "PERIODS",
    "SPLITS",
    "STATIC_WORLDS",
    "V2_WORLDS",
    "WORLD_IDS",
    "Entity",
    "Level",
    "Metric",
    "Split",
    "World",
    "generate_world",
    "split_of",
    "world_digest",
]

Split = Literal["dev", "heldout", "v2"]
Level = Literal["region", "district", "site"]

DEV_WORLDS: Final = ("00", "01")
HELDOUT_WORLDS: Final = ("02", "03", "04", "05", "06", "07")
V2_WORLDS: Final = ("10", "11", "12", "13")
STATIC_WORLDS: Final = DEV_WORLDS + HELDOUT_WORLDS
WORLD_IDS: Final = STATIC_WORLDS + V2_WORLDS
SPLITS: Final[dict[Split, tuple[str, ...]]] = {
    "dev": DEV_WORLDS,
    "heldout": HELDOUT_WORLDS,
    "v2": V2_WORLDS,
}
LEVELS: Final[tuple[Level, ...]] = ("region", "district", "site")
PERIODS: Final = tuple(f"2024-{month:02d}" for month in range(1, 9))

_WORLD_ID: Final = re.compile(r"[0-9]{2}")

# name, unit, inclusive range of a site's base level
_METRIC_POOL: Final = (
    ("visits", "visits", 300, 1500),
    ("revenue", "usd", 5000, 40000),
    ("incidents", "count", 0, 25),
    ("staff_hours", "hours", 400, 1600),
    ("deliveries", "count", 40, 400),
    ("complaints", "count", 0, 30),
)
_REGION_NAMES: Final = ("North", "South", "East", "West", "Central", "Coastal", "Upland", "Valley")
_DISTRICT_NAMES: Final = (
    "Ashford", "Brookvale", "Carrow", "Dunmere", "Elmstead", "Fenwick", "Glenholm", "Harwood",
    "Ivybridge", "Kestrel", "Larchmont", "Millbrook", "Northam", "Oakhurst", "Pendle", "Redcliff",
)  # fmt: skip
_SITE_PREFIXES: Final = (
    "Harbor", "Elm", "Stone", "Mill", "Cedar", "Fox", "Bright", "Oak",
    "Lake", "River", "Hill", "Ash", "Birch", "Copper", "Swan", "Wren",
)  # fmt: skip
_SITE_SUFFIXES: Final = ("Point", "Ridge", "Gate", "Field", "Cross", "Park", "Yard", "End")
_OUTAGES: Final = 2
_OUTAGE_MONTHS: Final = 3
_GAP_ODDS: Final = 40  # one sporadic null in this many values


class Metric(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A numeric metric recorded per site and period."""

    name: str
    unit: str


class Entity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One node of the hierarchy. Ids encode the path: ``R1``, ``R1.D2``, ``R1.D2.S3``."""

    name: str
    level: Level
    parent: str | None
    children: tuple[str, ...]


class World(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A generated world. ``values[site][metric][i]`` is the value in ``periods[i]`` (or null)."""

    schema_version: Literal[1] = 1
    world_id: str
    periods: tuple[str, ...]
    metrics: tuple[Metric, ...]
    entities: dict[str, Entity]
    values: dict[str, dict[str, tuple[int | None, ...]]]

    def to_plain(self) -> dict[str, Any]:
        """The world as plain JSON data (dicts, lists, str, int, None): what tools read.

        Exactly what a tool child decodes from the JSON it is sent.
        """
        plain: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(self))
        return plain

    def ids(self, level: Level) -> tuple[str, ...]:
        """Entity ids at ``level``, sorted."""
        return tuple(sorted(k for k, e in self.entities.items() if e.level == level))

    def metric_names(self) -> tuple[str, ...]:
        """Metric names in world order."""
        return tuple(m.name for m in self.metrics)

    def value(self, site: str, metric: str, period: str) -> int | None:
        """One site value (None when missing)."""
        return self.values[site][metric][self.periods.index(period)]


def split_of(world_id: str) -> Split:
    """The split a benchmark world belongs to.

    Raises:
        UnknownWorldError: when ``world_id`` is not one of ``WORLD_IDS``.
    """
    for split, ids in SPLITS.items():
        if world_id in ids:
            return split
    raise UnknownWorldError(
        f"world {world_id!r} is not a benchmark world (known: {', '.join(WORLD_IDS)})"
    )


def world_digest(world: World) -> str:
    """The pinned digest of a world."""
    return digest(Domain.WORLD, world)


def generate_world(world_id: str) -> World:
    """Generate the world with two-digit id ``world_id`` (same id, same bytes).

    Raises:
        UnknownWorldError: when ``world_id`` is not exactly two digits.
    """
    if not _WORLD_ID.fullmatch(world_id):
        raise UnknownWorldError(f"world id must be two digits, got {world_id!r}")
    stream = Stream("world", world_id)
    chosen = sorted(stream.sample(_METRIC_POOL, 4))
    metrics = tuple(Metric(name=name, unit=unit) for name, unit, _, _ in chosen)

    n_regions = stream.between(2, 3)
    region_names = stream.sample(_REGION_NAMES, n_regions)
    district_names = stream.sample(_DISTRICT_NAMES, 3 * n_regions)
    sizes = [stream.between(3, 4) for _ in range(3 * n_regions)]
    site_names = stream.sample(
        [f"{p} {s}" for p in _SITE_PREFIXES for s in _SITE_SUFFIXES], sum(sizes)
    )

    entities: dict[str, Entity] = {}
    sites: list[str] = []
    for r in range(n_regions):
        region = f"R{r + 1}"
        districts = tuple(f"{region}.D{d + 1}" for d in range(3))
        entities[region] = Entity(
            name=region_names[r], level="region", parent=None, children=districts
        )
        for d, district in enumerate(districts):
            index = 3 * r + d
            members = tuple(f"{district}.S{s + 1}" for s in range(sizes[index]))
            entities[district] = Entity(
                name=district_names[index], level="district", parent=region, children=members
            )
            for member in members:
                entities[member] = Entity(
                    name=site_names[len(sites)], level="site", parent=district, children=()
                )
                sites.append(member)

    values: dict[str, dict[str, list[int | None]]] = {}
    for site in sites:
        values[site] = {}
        for name, _, low, high in chosen:
            base = stream.between(low, high)
            values[site][name] = [
                None if stream.below(_GAP_ODDS) == 0 else base * stream.between(85, 115) // 100
                for _ in PERIODS
            ]
    for _ in range(_OUTAGES):
        site = stream.choice(sites)
        name = stream.choice([m.name for m in metrics])
        start = stream.below(len(PERIODS) - _OUTAGE_MONTHS + 1)
        for month in range(start, start + _OUTAGE_MONTHS):
            values[site][name][month] = None

    return World(
        world_id=world_id,
        periods=PERIODS,
        metrics=metrics,
        entities=entities,
        values={
            site: {name: tuple(series) for name, series in by_metric.items()}
            for site, by_metric in values.items()
        },
    )
