"""Path-bound preflight: judges a harness checkout, study lock, schedule and store before any
provider call. It is kept apart from ``harness`` because it judges the harness."""
