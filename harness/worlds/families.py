"""The six task families: each draws a candidate parameterisation and its evidence plan.

Together the families use every op of the closed transform language:

==========================  ====================================================================
family                      slots (transform)
==========================  ====================================================================
lookup                      value (identity), per_unit (ratio by attribute), profile (collect by
                            attribute)
aggregation                 total (sum), average (mean), lowest (min), highest (max)
top_k                       top_sites (top_k by entity, desc), leader (argmax by entity),
                            ranking (sort by entity, asc)
temporal_comparison         change (difference by date), growth (ratio by date), window_change
                            (window_sum_difference), peak_month (argmax by date)
hierarchy_join              sites (union of child lists), top_districts (grouped_sum_top_k),
                            lowest_site (argmin by entity)
missing_data_abstention     window_total (all_null: abstain), observed (collect by date),
                            reported (count)
==========================  ====================================================================

A candidate is drawn from a BLAKE3 stream keyed by (world, family, attempt), so attempt ``n``
is always the same candidate. Whether it is well posed (no nulls where numbers are needed, no
ties where an order is asked, no zero denominator, an all-null window to abstain on) is for the
oracles to judge; this module only draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from harness.ect.model import Scope
from harness.ect.transforms import (
    AllNull,
    ArgMax,
    ArgMin,
    Collect,
    Count,
    Difference,
    GroupedSumTopK,
    Identity,
    Max,
    Mean,
    Min,
    Ratio,
    Sort,
    Sum,
    TopK,
    Union,
    WindowSumDifference,
)
from harness.errors import AdmissionError
from harness.streams import Stream
from harness.worlds.tasks import CallSpec, Candidate, EvidenceItem, Family, SlotPlan
from harness.worlds.world import World

__all__ = ["FLOAT_REL_TOL", "TOP_K", "draw_candidate"]

TOP_K: Final = 2
FLOAT_REL_TOL: Final = 1e-9
_SPAN: Final = 6  # temporal comparisons cover two adjacent 3-month windows
_ABSTAIN_MONTHS: Final = 3


def _metric(site: str, metric: str, period: str) -> EvidenceItem:
    return EvidenceItem(
        scope=Scope(entity=site, attribute=metric, level="site", date=period),
        call=CallSpec(
            tool_id="get_metric", args={"entity": site, "metric": metric, "period": period}
        ),
    )


def _children(parent: str) -> CallSpec:
    return CallSpec(tool_id="list_children", args={"entity": parent})


def _children_item(district: str) -> EvidenceItem:
    return EvidenceItem(
        scope=Scope(entity=district, attribute="children", level="district", date=None),
        call=_children(district),
    )


def _name(world: World, entity: str) -> str:
    return f"{world.entities[entity].name} ({entity})"


def _lookup(world: World, stream: Stream, attempt: int) -> Candidate:
    site = stream.choice(world.ids("site"))
    metric, per_metric = stream.sample(world.metric_names(), 2)
    period = stream.choice(world.periods)
    a, b = _metric(site, metric, period), _metric(site, per_metric, period)
    return Candidate(
        world_id=world.world_id,
        family="lookup",
        attempt=attempt,
        params={"site": site, "metric": metric, "per_metric": per_metric, "period": period},
        question=(
            f"For site {_name(world, site)} in {period}: report its {metric} (value), its "
            f"{metric} per unit of {per_metric} (per_unit), and both values keyed by metric "
            f"name (profile)."
        ),
        slots=(
            SlotPlan(slot="value", transform=Identity(), evidence=(a,)),
            SlotPlan(
                slot="per_unit",
                transform=Ratio(key="attribute", numerator=metric, denominator=per_metric),
                evidence=(a, b),
                rel_tol=FLOAT_REL_TOL,
            ),
            SlotPlan(slot="profile", transform=Collect(key="attribute"), evidence=(a, b)),
        ),
        discovery=(),
    )


def _aggregation(world: World, stream: Stream, attempt: int) -> Candidate:
    district = stream.choice(world.ids("district"))
    metric = stream.choice(world.metric_names())
    period = stream.choice(world.periods)
    items = tuple(_metric(s, metric, period) for s in world.entities[district].children)
    return Candidate(
        world_id=world.world_id,
        family="aggregation",
        attempt=attempt,
        params={"district": district, "metric": metric, "period": period},
        question=(
            f"Across the sites of district {_name(world, district)} in {period}: report the "
            f"total, average, lowest and highest {metric}."
        ),
        slots=(
            SlotPlan(slot="total", transform=Sum(), evidence=items),
            SlotPlan(slot="average", transform=Mean(), evidence=items, rel_tol=FLOAT_REL_TOL),
            SlotPlan(slot="lowest", transform=Min(), evidence=items),
            SlotPlan(slot="highest", transform=Max(), evidence=items),
        ),
        discovery=(_children(district),),
    )


def _top_k(world: World, stream: Stream, attempt: int) -> Candidate:
    district = stream.choice(world.ids("district"))
    metric = stream.choice(world.metric_names())
    period = stream.choice(world.periods)
    items = tuple(_metric(s, metric, period) for s in world.entities[district].children)
    return Candidate(
        world_id=world.world_id,
        family="top_k",
        attempt=attempt,
        params={"district": district, "metric": metric, "period": period, "k": TOP_K},
        question=(
            f"Among the sites of district {_name(world, district)} in {period}, by {metric}: "
            f"report the top {TOP_K} site ids, highest first (top_sites), the leading site "
            f"(leader), and all site ids from lowest to highest (ranking)."
        ),
        slots=(
            SlotPlan(
                slot="top_sites",
                transform=TopK(key="entity", k=TOP_K, order="desc"),
                evidence=items,
            ),
            SlotPlan(slot="leader", transform=ArgMax(key="entity"), evidence=items),
            SlotPlan(slot="ranking", transform=Sort(key="entity", order="asc"), evidence=items),
        ),
        discovery=(_children(district),),
    )


def _temporal(world: World, stream: Stream, attempt: int) -> Candidate:
    site = stream.choice(world.ids("site"))
    metric = stream.choice(world.metric_names())
    start = stream.below(len(world.periods) - _SPAN + 1)
    span = world.periods[start : start + _SPAN]
    earlier, later = span[: _SPAN // 2], span[_SPAN // 2 :]
    first, last = span[0], span[-1]
    items = tuple(_metric(site, metric, p) for p in span)
    ends = (items[0], items[-1])
    return Candidate(
        world_id=world.world_id,
        family="temporal_comparison",
        attempt=attempt,
        params={
            "site": site,
            "metric": metric,
            "first": first,
            "last": last,
            "window_a": list(later),
            "window_b": list(earlier),
        },
        question=(
            f"For site {_name(world, site)} and {metric}: report the change from {first} to "
            f"{last} (change), the ratio of {last} to {first} (growth), the total over "
            f"{later[0]}..{later[-1]} minus the total over {earlier[0]}..{earlier[-1]} "
            f"(window_change), and the month of {first}..{last} with the highest value "
            f"(peak_month)."
        ),
        slots=(
            SlotPlan(
                slot="change",
                transform=Difference(key="date", minuend=last, subtrahend=first),
                evidence=ends,
            ),
            SlotPlan(
                slot="growth",
                transform=Ratio(key="date", numerator=last, denominator=first),
                evidence=ends,
                rel_tol=FLOAT_REL_TOL,
            ),
            SlotPlan(
                slot="window_change",
                transform=WindowSumDifference(window_a=later, window_b=earlier),
                evidence=items,
            ),
            SlotPlan(slot="peak_month", transform=ArgMax(key="date"), evidence=items),
        ),
        discovery=(),
    )


def _hierarchy(world: World, stream: Stream, attempt: int) -> Candidate:
    region = stream.choice(world.ids("region"))
    metric = stream.choice(world.metric_names())
    period = stream.choice(world.periods)
    districts = world.entities[region].children
    groups = {d: world.entities[d].children for d in districts}
    items = tuple(_metric(s, metric, period) for d in districts for s in groups[d])
    return Candidate(
        world_id=world.world_id,
        family="hierarchy_join",
        attempt=attempt,
        params={"region": region, "metric": metric, "period": period, "k": TOP_K},
        question=(
            f"In region {_name(world, region)}: report the ids of all sites in its districts "
            f"(sites), the {TOP_K} districts with the highest total {metric} over their sites "
            f"in {period}, highest first (top_districts), and the site with the lowest "
            f"{metric} in {period} (lowest_site)."
        ),
        slots=(
            SlotPlan(
                slot="sites",
                transform=Union(),
                evidence=tuple(_children_item(d) for d in districts),
            ),
            SlotPlan(
                slot="top_districts",
                transform=GroupedSumTopK(groups=groups, k=TOP_K, order="desc"),
                evidence=items,
            ),
            SlotPlan(slot="lowest_site", transform=ArgMin(key="entity"), evidence=items),
        ),
        discovery=(_children(region),),
    )


def _abstention_windows(world: World) -> list[tuple[str, str, int]]:
    """Every (site, metric, start) whose three months are all missing, in a stable order."""
    out = []
    for site in world.ids("site"):
        for metric in world.metric_names():
            series = world.values[site][metric]
            for start in range(len(series) - _ABSTAIN_MONTHS + 1):
                if all(v is None for v in series[start : start + _ABSTAIN_MONTHS]):
                    out.append((site, metric, start))
    return out


def _missing(world: World, stream: Stream, attempt: int) -> Candidate:
    windows = _abstention_windows(world)
    if not windows:
        raise AdmissionError(f"world {world.world_id} has no all-missing window to abstain on")
    site, metric, start = stream.choice(windows)
    months = world.periods[start : start + _ABSTAIN_MONTHS]
    items = tuple(_metric(site, metric, p) for p in months)
    return Candidate(
        world_id=world.world_id,
        family="missing_data_abstention",
        attempt=attempt,
        params={"site": site, "metric": metric, "window": list(months)},
        question=(
            f"For site {_name(world, site)}: report the total {metric} over "
            f"{months[0]}..{months[-1]}, or abstain (null) if no value was recorded "
            f"(window_total); the recorded values by month (observed); and how many months "
            f"have a recorded value (reported)."
        ),
        slots=(
            SlotPlan(slot="window_total", transform=AllNull(), evidence=items, nullable=True),
            SlotPlan(slot="observed", transform=Collect(key="date"), evidence=items),
            SlotPlan(slot="reported", transform=Count(), evidence=items),
        ),
        discovery=(),
    )


_DRAW: Final[dict[Family, Callable[[World, Stream, int], Candidate]]] = {
    "lookup": _lookup,
    "aggregation": _aggregation,
    "top_k": _top_k,
    "temporal_comparison": _temporal,
    "hierarchy_join": _hierarchy,
    "missing_data_abstention": _missing,
}


def draw_candidate(world: World, family: Family, attempt: int) -> Candidate:
    """Candidate number ``attempt`` of ``family`` in ``world`` (deterministic).

    Raises:
        AdmissionError: when the world offers nothing the family can ask about.
    """
    stream = Stream("task", world.world_id, family, str(attempt))
    return _DRAW[family](world, stream, attempt)
