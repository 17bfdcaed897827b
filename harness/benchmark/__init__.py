"""The assembled benchmark: the worlds' tasks and clean snapshots with every fault applied.

``build``: ``build_benchmark()`` / ``benchmark()`` (the 12 worlds, 72 tasks, the static grid and
the V2 snapshots); ``manifest``: the pinned benchmark manifest and its check. This package sits
above both ``harness.worlds`` (generation) and ``harness.faults`` (the operators), so neither of
those imports the other's dependants.
"""
