"""The frozen V2 closed-loop study: 576 trajectory cells run in canonical order into a store.

Per-cell results are ``harness.studies.v2.outcomes.CellResult`` (what the analysis reads).
"""
