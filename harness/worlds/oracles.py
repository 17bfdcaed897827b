"""Two independent oracles for a candidate's answer: real SQL over SQLite, and plain Python.

``sql_oracle(world)`` loads the world into an in-memory SQLite database (tables ``entity``,
``period`` and ``measure``) and answers every family with SQL: aggregates, ordering, grouping
and ratios are computed by the database. ``python_oracle(world)`` walks the world's structs with
loops and the builtins. Neither uses the transform language or the other's code, so an answer
both give (canonically equal bytes) is independently confirmed.

Both also judge whether a candidate is well posed, by the same written rules, and return a
``Rejection`` when it is not:

- lookup: both values recorded; the per-unit denominator is not zero.
- aggregation: every site of the district has a value.
- top_k: every site has a value, all values differ, more sites than k.
- temporal_comparison: all six months recorded; the first month is not zero; one highest month.
- hierarchy_join: every site of the region has a value; district totals all differ; one lowest
  site.
- missing_data_abstention: no month of the window has a value.

Neither oracle is an LLM and neither sees a trace or certificate.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from harness.worlds.tasks import Family
from harness.worlds.world import World

__all__ = ["BoundOracle", "OracleResult", "Rejection", "python_oracle", "sql_oracle"]


class Rejection(NamedTuple):
    """The candidate is not well posed; ``reason`` says why."""

    reason: str


OracleResult = dict[str, Any] | Rejection
BoundOracle = Callable[[Family, Mapping[str, Any]], OracleResult]
"""An oracle bound to one world: (family, params) -> answer or rejection."""


# ---------------------------------------------------------------------------------------------
# SQLite oracle

_SCHEMA: Final = """
CREATE TABLE entity (id TEXT PRIMARY KEY, name TEXT NOT NULL, level TEXT NOT NULL, parent TEXT);
CREATE TABLE period (period TEXT PRIMARY KEY, idx INTEGER NOT NULL UNIQUE);
CREATE TABLE measure (
    entity TEXT NOT NULL REFERENCES entity(id),
    metric TEXT NOT NULL,
    period TEXT NOT NULL REFERENCES period(period),
    value INTEGER,
    PRIMARY KEY (entity, metric, period)
);
"""

_SITE_MEASURES: Final = """
    FROM entity s JOIN measure m ON m.entity = s.id
    WHERE s.parent = :district AND m.metric = :metric AND m.period = :period
"""

_REGION_MEASURES: Final = """
    FROM entity s JOIN entity d ON s.parent = d.id JOIN measure m ON m.entity = s.id
    WHERE d.parent = :region AND m.metric = :metric AND m.period = :period
"""


def _load(world: World) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.executescript(_SCHEMA)
    db.executemany(
        "INSERT INTO entity VALUES (?, ?, ?, ?)",
        [(k, e.name, e.level, e.parent) for k, e in world.entities.items()],
    )
    db.executemany(
        "INSERT INTO period VALUES (?, ?)", [(p, i) for i, p in enumerate(world.periods)]
    )
    db.executemany(
        "INSERT INTO measure VALUES (?, ?, ?, ?)",
        [
            (site, metric, world.periods[i], value)
            for site, by_metric in world.values.items()
            for metric, series in by_metric.items()
            for i, value in enumerate(series)
        ],
    )
    return db


def _one(db: sqlite3.Connection, sql: str, params: Mapping[str, Any]) -> tuple[Any, ...]:
    row = db.execute(sql, dict(params)).fetchone()
    assert row is not None  # aggregate queries always return a row
    return tuple(row)


def _column(db: sqlite3.Connection, sql: str, params: Mapping[str, Any]) -> list[Any]:
    return [row[0] for row in db.execute(sql, dict(params))]


def _sql_lookup(db: sqlite3.Connection, p: Mapping[str, Any]) -> OracleResult:
    row = db.execute(
        """
        SELECT a.value, b.value, CAST(a.value AS REAL) / NULLIF(b.value, 0)
        FROM measure a JOIN measure b ON a.entity = b.entity AND a.period = b.period
        WHERE a.entity = :site AND a.period = :period
          AND a.metric = :metric AND b.metric = :per_metric
        """,
        dict(p),
    ).fetchone()
    if row is None or row[0] is None or row[1] is None:
        return Rejection("a looked-up value is missing")
    if row[2] is None:
        return Rejection("per-unit denominator is zero")
    return {
        "value": row[0],
        "per_unit": row[2],
        "profile": {p["metric"]: row[0], p["per_metric"]: row[1]},
    }


def _sql_aggregation(db: sqlite3.Connection, p: Mapping[str, Any]) -> OracleResult:
    n, present, total, average, lowest, highest = _one(
        db,
        "SELECT COUNT(*), COUNT(m.value), SUM(m.value), AVG(m.value), MIN(m.value), MAX(m.value)"
        + _SITE_MEASURES,
        p,
    )
    if n == 0 or present < n:
        return Rejection("a site value is missing")
    return {"total": total, "average": average, "lowest": lowest, "highest": highest}


def _sql_top_k(db: sqlite3.Connection, p: Mapping[str, Any]) -> OracleResult:
    n, present, distinct = _one(
        db, "SELECT COUNT(*), COUNT(m.value), COUNT(DISTINCT m.value)" + _SITE_MEASURES, p
    )
    if present < n:
        return Rejection("a site value is missing")
    if distinct < n:
        return Rejection("two sites tie")
    if n <= p["k"]:
        return Rejection("not more sites than k")
    top = _column(db, "SELECT s.id" + _SITE_MEASURES + " ORDER BY m.value DESC, s.id LIMIT :k", p)
    ranking = _column(db, "SELECT s.id" + _SITE_MEASURES + " ORDER BY m.value ASC, s.id", p)
    return {"top_sites": top, "leader": top[0], "ranking": ranking}


def _sql_temporal(db: sqlite3.Connection, p: Mapping[str, Any]) -> OracleResult:
    span = [*p["window_b"], *p["window_a"]]
    names = {f"s{i}": period for i, period in enumerate(span)}
    names |= {f"a{i}": period for i, period in enumerate(p["window_a"])}
    names |= {f"b{i}": period for i, period in enumerate(p["window_b"])}
    params = {**p, **names}
    in_span = ", ".join(f":s{i}" for i in range(len(span)))
    in_a = ", ".join(f":a{i}" for i in range(len(p["window_a"])))
    in_b = ", ".join(f":b{i}" for i in range(len(p["window_b"])))
    where = f" FROM measure WHERE entity = :site AND metric = :metric AND period IN ({in_span})"
    n, present, change, growth, window_change, peaks = _one(
        db,
        f"""
        SELECT COUNT(*), COUNT(value),
          SUM(CASE WHEN period = :last THEN value END)
            - SUM(CASE WHEN period = :first THEN value END),
          CAST(SUM(CASE WHEN period = :last THEN value END) AS REAL)
            / NULLIF(SUM(CASE WHEN period = :first THEN value END), 0),
          SUM(CASE WHEN period IN ({in_a}) THEN value END)
            - SUM(CASE WHEN period IN ({in_b}) THEN value END),
          (SELECT COUNT(*) {where} AND value = (SELECT MAX(value) {where}))
        {where}
        """,
        params,
    )
    if n < len(span) or present < n:
        return Rejection("a month is missing")
    if growth is None:
        return Rejection("the first month is zero")
    if peaks != 1:
        return Rejection("two months tie for the highest value")
    peak = _column(db, f"SELECT period {where} ORDER BY value DESC, period LIMIT 1", params)
    return {
        "change": change,
        "growth": growth,
        "window_change": window_change,
        "peak_month": peak[0],
    }


def _sql_hierarchy(db: sqlite3.Connection, p: Mapping[str, Any]) -> OracleResult:
    n, present, lows = _one(
        db,
        "SELECT COUNT(*), COUNT(m.value), SUM(m.value = (SELECT MIN(m.value)"
        + _REGION_MEASURES
        + "))"
        + _REGION_MEASURES,
        p,
    )
    if n == 0 or present < n:
        return Rejection("a site value is missing")
    if lows != 1:
        return Rejection("two sites tie for the lowest value")
    totals = """
        SELECT d.id AS district, SUM(m.value) AS total
        FROM entity d JOIN entity s ON s.parent = d.id JOIN measure m ON m.entity = s.id
        WHERE d.parent = :region AND m.metric = :metric AND m.period = :period
        GROUP BY d.id
    """
    # S608: every SQL fragment here is a module constant; values travel as bound parameters.
    districts, distinct = _one(db, f"SELECT COUNT(*), COUNT(DISTINCT total) FROM ({totals})", p)  # noqa: S608
    if distinct < districts:
        return Rejection("two districts tie on their total")
    sites = _column(
        db,
        "SELECT s.id FROM entity s JOIN entity d ON s.parent = d.id WHERE d.parent = :region"
        " ORDER BY s.id",
        p,
    )
    top = _column(db, f"SELECT district FROM ({totals}) ORDER BY total DESC, district LIMIT :k", p)  # noqa: S608
    lowest = _column(
        db, "SELECT s.id" + _REGION_MEASURES + " ORDER BY m.value ASC, s.id LIMIT 1", p
    )
    return {"sites": sites, "top_districts": top, "lowest_site": lowest[0]}


def _sql_missing(db: sqlite3.Connection, p: Mapping[str, Any]) -> OracleResult:
    names = {f"w{i}": period for i, period in enumerate(p["window"])}
    params = {**p, **names}
    where = (
        " FROM measure WHERE entity = :site AND metric = :metric"
        f" AND period IN ({', '.join(':' + k for k in names)})"
    )
    n, present = _one(db, "SELECT COUNT(*), COUNT(value)" + where, params)
    if n < len(names) or present > 0:
        return Rejection("a month of the window has a value")
    observed = {
        row[0]: row[1]
        for row in db.execute("SELECT period, value" + where + " ORDER BY period", params)
    }
    return {"window_total": None, "observed": observed, "reported": present}


_SQL: Final[dict[str, Callable[[sqlite3.Connection, Mapping[str, Any]], OracleResult]]] = {
    "lookup": _sql_lookup,
    "aggregation": _sql_aggregation,
    "top_k": _sql_top_k,
    "temporal_comparison": _sql_temporal,
    "hierarchy_join": _sql_hierarchy,
    "missing_data_abstention": _sql_missing,
}


def sql_oracle(world: World) -> BoundOracle:
    """The SQLite oracle for ``world`` (its in-memory database lives as long as the oracle)."""
    db = _load(world)

    def answer(family: Family, params: Mapping[str, Any]) -> OracleResult:
        return _SQL[family](db, params)

    return answer


# ---------------------------------------------------------------------------------------------
# Pure-Python oracle


def _py_lookup(w: World, p: Mapping[str, Any]) -> OracleResult:
    a = w.value(p["site"], p["metric"], p["period"])
    b = w.value(p["site"], p["per_metric"], p["period"])
    if a is None or b is None:
        return Rejection("a looked-up value is missing")
    if b == 0:
        return Rejection("per-unit denominator is zero")
    return {"value": a, "per_unit": a / b, "profile": {p["metric"]: a, p["per_metric"]: b}}


def _site_values(
    w: World, sites: tuple[str, ...], metric: str, period: str
) -> dict[str, int] | None:
    out: dict[str, int] = {}
    for site in sites:
        value = w.value(site, metric, period)
        if value is None:
            return None
        out[site] = value
    return out


def _py_aggregation(w: World, p: Mapping[str, Any]) -> OracleResult:
    values = _site_values(w, w.entities[p["district"]].children, p["metric"], p["period"])
    if not values:
        return Rejection("a site value is missing")
    numbers = list(values.values())
    total = sum(numbers)
    return {
        "total": total,
        "average": total / len(numbers),
        "lowest": min(numbers),
        "highest": max(numbers),
    }


def _py_top_k(w: World, p: Mapping[str, Any]) -> OracleResult:
    values = _site_values(w, w.entities[p["district"]].children, p["metric"], p["period"])
    if values is None:
        return Rejection("a site value is missing")
    if len(set(values.values())) < len(values):
        return Rejection("two sites tie")
    if len(values) <= p["k"]:
        return Rejection("not more sites than k")
    descending = sorted(values, key=lambda site: (-values[site], site))
    return {"top_sites": descending[: p["k"]], "leader": descending[0], "ranking": descending[::-1]}


def _py_temporal(w: World, p: Mapping[str, Any]) -> OracleResult:
    span = [*p["window_b"], *p["window_a"]]
    values = {period: w.value(p["site"], p["metric"], period) for period in span}
    if any(v is None for v in values.values()):
        return Rejection("a month is missing")
    numbers: dict[str, int] = {k: v for k, v in values.items() if v is not None}
    if numbers[p["first"]] == 0:
        return Rejection("the first month is zero")
    highest = max(numbers.values())
    peaks = [period for period in span if numbers[period] == highest]
    if len(peaks) != 1:
        return Rejection("two months tie for the highest value")
    return {
        "change": numbers[p["last"]] - numbers[p["first"]],
        "growth": numbers[p["last"]] / numbers[p["first"]],
        "window_change": sum(numbers[d] for d in p["window_a"])
        - sum(numbers[d] for d in p["window_b"]),
        "peak_month": peaks[0],
    }


def _py_hierarchy(w: World, p: Mapping[str, Any]) -> OracleResult:
    districts = w.entities[p["region"]].children
    members = {d: w.entities[d].children for d in districts}
    sites = tuple(s for d in districts for s in members[d])
    values = _site_values(w, sites, p["metric"], p["period"])
    if not values:
        return Rejection("a site value is missing")
    lowest = min(values.values())
    lows = [s for s in values if values[s] == lowest]
    if len(lows) != 1:
        return Rejection("two sites tie for the lowest value")
    totals = {d: sum(values[s] for s in members[d]) for d in districts}
    if len(set(totals.values())) < len(totals):
        return Rejection("two districts tie on their total")
    ranked = sorted(totals, key=lambda d: (-totals[d], d))
    return {"sites": sorted(sites), "top_districts": ranked[: p["k"]], "lowest_site": lows[0]}


def _py_missing(w: World, p: Mapping[str, Any]) -> OracleResult:
    observed = {period: w.value(p["site"], p["metric"], period) for period in p["window"]}
    reported = sum(1 for v in observed.values() if v is not None)
    if reported:
        return Rejection("a month of the window has a value")
    return {"window_total": None, "observed": observed, "reported": reported}


_PY: Final[dict[str, Callable[[World, Mapping[str, Any]], OracleResult]]] = {
    "lookup": _py_lookup,
    "aggregation": _py_aggregation,
    "top_k": _py_top_k,
    "temporal_comparison": _py_temporal,
    "hierarchy_join": _py_hierarchy,
    "missing_data_abstention": _py_missing,
}


def python_oracle(world: World) -> BoundOracle:
    """The pure-Python oracle for ``world``."""

    def answer(family: Family, params: Mapping[str, Any]) -> OracleResult:
        return _PY[family](world, params)

    return answer
