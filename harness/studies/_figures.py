"""Report figures for both studies: rates with 95% task-cluster intervals, PNG, SVG and PDF.

One drawing routine (``interval_panels``) draws horizontal bars with their interval whiskers;
``save_all`` writes the same figure as PNG and as vector SVG and PDF. Choices a reader of a
paper relies on:

- colours from the Okabe-Ito palette (distinguishable with every common colour-vision
  deficiency), and ECT additionally marked by a hatch, so colour is never the only cue;
- each bar's count label sits right of the bar's upper whisker (never under it), and the axis
  extends far enough to hold it;
- a caption under the axes names the provider, the model and whether the data is simulated.

Rendering uses matplotlib's Agg canvas on a standalone ``Figure`` (no pyplot, no global state)
inside an rc context that pins the SVG id salt, with every date and software stamp removed, so
the same results give the same bytes in every format. Matplotlib is the optional ``[plots]``
extra: callers check ``extra_installed`` first.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ECT_COLOUR",
    "FIGURE_FORMATS",
    "OTHER_COLOUR",
    "Bar",
    "Panel",
    "interval_figure",
    "interval_panels",
]

ECT_COLOUR: Final = "#0072B2"  # Okabe-Ito blue
OTHER_COLOUR: Final = "#E69F00"  # Okabe-Ito orange
WHISKER_COLOUR: Final = "#000000"
FIGURE_FORMATS: Final = ("png", "svg", "pdf")

_METADATA: Final[dict[str, dict[str, Any]]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}


@dataclass(frozen=True)
class Bar:
    """One bar: a label, a rate in percent with its interval, and the count it came from."""

    label: str
    pct: float
    low: float
    high: float
    events: int
    trials: int
    treatment: bool


@dataclass(frozen=True)
class Panel:
    """One axes: its x-axis title and its bars, first bar drawn at the top."""

    title: str
    bars: Sequence[Bar]


def interval_figure(panels: Sequence[Panel], *, title: str, caption: str) -> Any:
    """The matplotlib ``Figure`` of ``panels`` side by side (drawn, not yet saved)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width = 4.2 * len(panels) + 1.6
    lines = textwrap.wrap(caption, width=int(width * 17), break_on_hyphens=False)
    height = 2.6 + 0.16 * len(lines) + 0.22 * max(len(p.bars) for p in panels)
    figure = Figure(figsize=(width, height), dpi=150)
    FigureCanvasAgg(figure)
    for index, panel in enumerate(panels, start=1):
        axes = figure.add_subplot(1, len(panels), index)
        _draw(axes, panel, labels=index == 1)
    figure.suptitle(title, fontsize=9)
    figure.text(0.01, 0.01, "\n".join(lines), fontsize=6.5, ha="left", va="bottom")
    bottom = (0.12 * len(lines) + 0.3) / height
    figure.tight_layout(rect=(0.0, bottom, 1.0, 0.95))
    return figure


_DESCRIPTION_KEY: Final = {"png": "Description", "svg": "Description", "pdf": "Subject"}


def interval_panels(
    panels: Sequence[Panel], *, title: str, caption: str, description: str = ""
) -> dict[str, bytes]:
    """Draw ``panels`` side by side and return the figure as ``{"png", "svg", "pdf"}`` bytes.

    ``description`` (the run identity's line) is also written into each file's metadata as
    plain text, so a raster figure names its run to ``grep`` as the caption does to a reader.
    """
    import matplotlib

    # The SVG backend salts its element ids from this setting (random otherwise); text stays
    # text in the SVG, so a paper's editor can restyle it.
    with matplotlib.rc_context({"svg.hashsalt": "ect-harness", "svg.fonttype": "none"}):
        figure = interval_figure(panels, title=title, caption=caption)
        out = {}
        for fmt in FIGURE_FORMATS:
            buffer = io.BytesIO()
            metadata = dict(_METADATA[fmt])
            if description:
                metadata[_DESCRIPTION_KEY[fmt]] = description
            figure.savefig(buffer, format=fmt, metadata=metadata)
            out[fmt] = buffer.getvalue()
    return out


def _draw(axes: Any, panel: Panel, *, labels: bool) -> None:
    bars = list(reversed(panel.bars))  # barh draws bottom-up; the first bar goes on top
    ys = list(range(len(bars)))
    rates = [b.pct for b in bars]
    axes.barh(
        ys,
        rates,
        color=[ECT_COLOUR if b.treatment else OTHER_COLOUR for b in bars],
        height=0.6,
        edgecolor="black",
        linewidth=0.4,
    )
    for y, b in zip(ys, bars, strict=True):
        if b.treatment:
            axes.barh([y], [b.pct], height=0.6, fill=False, hatch="///", linewidth=0)
    axes.errorbar(
        rates,
        ys,
        xerr=[
            [max(0.0, b.pct - b.low) for b in bars],
            [max(0.0, b.high - b.pct) for b in bars],
        ],
        fmt="none",
        ecolor=WHISKER_COLOUR,
        capsize=3,
        lw=1,
    )
    # The label starts right of the whisker's end cap, whatever the bar's length.
    right = max([100.0, *(max(b.high, b.pct) for b in bars)])
    for y, b in zip(ys, bars, strict=True):
        axes.text(max(b.high, b.pct) + 2.0, y, f"{b.events}/{b.trials}", va="center", fontsize=7)
    axes.set_xlim(0, right + 22)
    axes.set_xticks([0, 20, 40, 60, 80, 100])
    axes.set_yticks(ys)
    axes.set_yticklabels([b.label for b in bars] if labels else [])
    axes.set_xlabel(panel.title, fontsize=7)
    axes.tick_params(labelsize=7)
