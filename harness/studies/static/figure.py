"""The static study's figure: unsafe-completion rate per policy with task-cluster 95% intervals.

Drawn by ``harness.studies._figures`` (Okabe-Ito palette, labels right of the whiskers, a caption
naming the provider, model and whether the data is simulated) as PNG, SVG and PDF, with every
date and software stamp removed, so the same results give the same bytes.
"""

from __future__ import annotations

from harness.extras import require_extra
from harness.studies._figures import Bar, Panel, interval_panels
from harness.studies.static.analysis import StaticResults
from harness.studies.static.report import figure_caption, run_of

__all__ = ["render_figure"]


def render_figure(results: StaticResults) -> dict[str, bytes]:
    """``{"ucr.png", "ucr.svg", "ucr.pdf"}``: one bar per Table 2 policy, UCR in percent."""
    require_extra("matplotlib", "plots", "the static study's figures (ucr.png, .svg, .pdf)")
    bars = [
        Bar(
            label=row.label,
            pct=100 * row.ucr,
            low=100 * row.ucr_low,
            high=100 * row.ucr_high,
            events=row.unsafe,
            trials=row.faults,
            treatment=row.policy == "ect",
        )
        for row in results.rows
    ]
    split = "held-out" if results.split == "heldout" else "development"
    title = f"Static study, {split} grid"
    marks = run_of(results).marks()
    if marks:
        title += f" ({'; '.join(marks)})"
    drawn = interval_panels(
        [Panel("Unsafe completion rate (%) on fault snapshots", bars)],
        title=title,
        caption=figure_caption(results),
        description=run_of(results).line(),
    )
    return {f"ucr.{fmt}": data for fmt, data in drawn.items()}
