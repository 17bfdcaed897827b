"""Report figures: intervals drawn, labels clear of the whiskers, a colour-blind-safe palette,
the caption naming provider, model and simulation, and the same bytes every time in PNG, SVG
and PDF (needs the [plots] extra, which the test environment installs)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from v2_report_support import CONFIG_PATH, all_results, synthetic_store

pytest.importorskip("matplotlib")

from matplotlib.colors import to_hex

from harness.studies._figures import (
    ECT_COLOUR,
    OTHER_COLOUR,
    Bar,
    Panel,
    interval_figure,
    interval_panels,
)
from harness.studies.v2.report import build_report

# Bars whose labels sat under the whisker before: 200/288 with an interval reaching past the bar.
_BARS = [
    Bar(
        label="Critic core", pct=69.4, low=60.0, high=79.0, events=200, trials=288, treatment=False
    ),
    Bar(
        label="Full-trace", pct=97.0, low=93.0, high=100.0, events=280, trials=288, treatment=False
    ),
    Bar(label="ECT", pct=0.0, low=0.0, high=1.4, events=0, trials=288, treatment=True),
]


def test_figure_labels_never_overlap_the_error_bars() -> None:
    figure = interval_figure([Panel("Rate (%)", _BARS)], title="t", caption="c")
    renderer = figure.canvas.get_renderer()
    (axes,) = figure.axes
    labels = [t for t in axes.texts if "/" in t.get_text()]
    assert sorted(t.get_text() for t in labels) == ["0/288", "200/288", "280/288"]
    whiskers = [c for c in axes.collections if c.get_segments()]
    ends = [
        axes.transData.transform(point)[0]
        for collection in whiskers
        for segment in collection.get_segments()
        for point in segment
    ]
    rightmost = max(ends)
    for text in labels:
        box = text.get_window_extent(renderer)
        y = text.get_position()[1]
        on_row = [
            axes.transData.transform(point)[0]
            for collection in whiskers
            for segment in collection.get_segments()
            for point in segment
            if abs(point[1] - y) < 0.4
        ]
        assert box.x0 > max(on_row), text.get_text()  # right of its whisker and cap
        assert box.x1 < axes.get_window_extent(renderer).x1  # inside the axes
    assert rightmost < axes.get_window_extent(renderer).x1


def test_figure_palette_is_okabe_ito_and_marks_ect_by_hatch_too() -> None:
    figure = interval_figure([Panel("Rate (%)", _BARS)], title="t", caption="c")
    (axes,) = figure.axes
    filled = [p for p in axes.patches if p.get_fill()]
    colours = [to_hex(p.get_facecolor()) for p in filled]
    # barh draws bottom-up: ECT, Full-trace, Critic core.
    assert colours == [ECT_COLOUR.lower(), OTHER_COLOUR.lower(), OTHER_COLOUR.lower()]
    assert [p.get_hatch() for p in axes.patches if not p.get_fill()] == ["///"]


def test_figure_formats_are_deterministic_and_dateless() -> None:
    first = interval_panels([Panel("Rate (%)", _BARS)], title="t", caption="caption text")
    again = interval_panels([Panel("Rate (%)", _BARS)], title="t", caption="caption text")
    assert first == again
    assert first["png"].startswith(b"\x89PNG\r\n\x1a\n")
    assert first["svg"].lstrip().startswith(b"<?xml")
    assert first["pdf"].startswith(b"%PDF-")
    assert b"<dc:date>" not in first["svg"]
    assert b"CreationDate" not in first["pdf"]
    assert b"caption text" in first["svg"]  # text stays text in the SVG


def test_v2_figures_carry_intervals_and_name_provider_model_and_simulation(
    tmp_path: Path,
) -> None:
    store = synthetic_store(tmp_path / "run", results=all_results())
    files = build_report(store, CONFIG_PATH).files
    assert {"figure.png", "figure.svg", "figure.pdf"} <= set(files)
    svg = files["figure.svg"].decode()
    # The caption is wrapped into several text elements: read them back as one line.
    svg = " ".join(html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg))
    assert "SIMULATED provider, not an LLM" in svg
    assert "95% task-cluster bootstrap intervals" in svg
    line = build_report(store, CONFIG_PATH).document.store.run_line
    assert line.startswith("Run: provider simulated (SIMULATED, not a language model); model ")
    assert line in svg  # the run identity, worded as in every other report file
    # Each format also names the run in its metadata, as plain text a search finds.
    for name in ("figure.png", "figure.svg"):
        assert line.encode() in files[name], name
    pdf = line.replace("(", "\\(").replace(")", "\\)")  # a PDF string escapes parentheses
    assert pdf.encode() in files["figure.pdf"]
    # ECT's supported completion: 3/4, interval [50, 100] drawn as a whisker with caps.
    assert "3/4" in svg
