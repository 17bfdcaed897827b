"""The static study's figure: unsafe-completion rate per policy with task-cluster 95% intervals.

Rendered with matplotlib's Agg canvas on a standalone ``Figure`` (no pyplot, no global state, no
display), with the PNG's software stamp removed, so the same results give the same bytes.
"""

from __future__ import annotations

import io

from harness.extras import require_extra
from harness.studies.static_report import StaticResults

__all__ = ["render_figure"]


def render_figure(results: StaticResults) -> bytes:
    """PNG bytes: one horizontal bar per Table 2 policy, UCR in percent, 95% interval whiskers."""
    require_extra("matplotlib", "plots", "the static study's figure (ucr.png)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = list(reversed(results.rows))  # first table row at the top
    labels = [row.label for row in rows]
    rates = [100 * row.ucr for row in rows]
    low = [100 * (row.ucr - row.ucr_low) for row in rows]
    high = [100 * (row.ucr_high - row.ucr) for row in rows]
    figure = Figure(figsize=(7.0, 3.6), dpi=150)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    colours = ["#b2182b" if row.policy == "ect" else "#4d4d4d" for row in rows]
    axes.barh(labels, rates, color=colours, height=0.6)
    axes.errorbar(rates, labels, xerr=[low, high], fmt="none", ecolor="black", capsize=3, lw=1)
    for y, (rate, row) in enumerate(zip(rates, rows, strict=True)):
        axes.text(min(rate + 1.5, 101), y, f"{row.unsafe}/{row.faults}", va="center", fontsize=7)
    axes.set_xlim(0, 110)
    axes.set_xlabel(
        f"Unsafe completion rate (%) on {results.faults} fault snapshots; "
        f"95% task-cluster bootstrap ({results.tasks} tasks, {results.ucr_replicates:,} draws)"
    )
    split = "held-out" if results.split == "heldout" else "development"
    title = f"Static study, {split} grid"
    if results.simulated:
        title += " (full-trace critic: simulated provider, not an LLM)"
    axes.set_title(title, fontsize=9)
    axes.tick_params(labelsize=8)
    axes.xaxis.label.set_fontsize(7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
