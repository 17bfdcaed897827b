"""Admission: a candidate becomes a task only when both oracles give canonically equal answers.

For each family in a world, candidates are drawn in order (attempt 0, 1, ...). A candidate both
oracles reject is ill posed and skipped; one they disagree on (different bytes, or one rejects
and the other answers) is skipped and logged; the first they agree on is admitted, with its
gold answer and the record of what was turned away. No candidate is ever admitted on one
oracle's word. If ``MAX_ATTEMPTS`` candidates pass without agreement the family fails loudly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from harness.canonical import canonical_bytes
from harness.errors import AdmissionError
from harness.log import get_logger
from harness.worlds.families import draw_candidate
from harness.worlds.oracles import BoundOracle, Rejection, python_oracle, sql_oracle
from harness.worlds.tasks import (
    FAMILIES,
    Admission,
    Family,
    Task,
    descriptor_for,
    requirements_for,
)
from harness.worlds.world import World, split_of

__all__ = ["MAX_ATTEMPTS", "admit", "build_tasks", "default_oracles"]

MAX_ATTEMPTS: Final = 64

_log = get_logger(__name__)


def default_oracles(world: World) -> tuple[BoundOracle, BoundOracle]:
    """The SQLite oracle and the pure-Python oracle, bound to ``world``."""
    return sql_oracle(world), python_oracle(world)


def admit(
    world: World,
    family: Family,
    oracles: Sequence[BoundOracle] | None = None,
    *,
    max_attempts: int = MAX_ATTEMPTS,
) -> Task:
    """Admit the first candidate of ``family`` in ``world`` that every oracle agrees on.

    Args:
        world: the world the task asks about (its id must be a benchmark world).
        family: the task family.
        oracles: at least two oracles bound to ``world``; default SQLite and pure Python.
        max_attempts: how many candidates to try before giving up.

    Raises:
        AdmissionError: when no candidate is admitted within ``max_attempts``.
        UnknownWorldError: when the world is not one of the benchmark's.
    """
    split = split_of(world.world_id)
    bound = default_oracles(world) if oracles is None else tuple(oracles)
    if len(bound) < 2:
        raise AdmissionError("admission needs at least two independent oracles")
    rejected: list[str] = []
    for attempt in range(max_attempts):
        candidate = draw_candidate(world, family, attempt)
        results = [oracle(family, candidate.params) for oracle in bound]
        if all(isinstance(r, Rejection) for r in results):
            rejected.append(f"{attempt}: ill-posed ({results[0].reason})")  # type: ignore[union-attr]
            continue
        answers = [r for r in results if not isinstance(r, Rejection)]
        encoded = {canonical_bytes(a) for a in answers}
        if len(answers) < len(results) or len(encoded) != 1:
            rejected.append(f"{attempt}: oracles disagree")
            _log.warning(
                "worlds.admission.disagreement",
                world=world.world_id,
                family=family,
                attempt=attempt,
            )
            continue
        descriptor = descriptor_for(candidate)
        return Task(
            descriptor=descriptor,
            requirements=requirements_for(descriptor, candidate.slots),
            split=split,
            question=candidate.question,
            gold=answers[0],
            plan=candidate.slots,
            discovery=candidate.discovery,
            admission=Admission(attempt=attempt, rejected=tuple(rejected)),
        )
    last = rejected[-1] if rejected else "no candidate"
    raise AdmissionError(
        f"no {family} task admitted in world {world.world_id} after {max_attempts} "
        f"candidates (last: {last})"
    )


def build_tasks(world: World) -> tuple[Task, ...]:
    """One admitted task per family for ``world``, in family order."""
    oracles = default_oracles(world)
    return tuple(admit(world, family, oracles) for family in FAMILIES)
