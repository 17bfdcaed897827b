"""The one "Figure" section both study reports put in report.html."""

from __future__ import annotations

import base64

from harness.studies import _html


def test_figure_section_inlines_the_png_and_names_the_vector_copies() -> None:
    anchor, title, body = _html.figure_section(
        b"\x89PNG-bytes", alt="bars <a>", caption="x & y", vectors="ucr.svg, ucr.pdf"
    )
    assert (anchor, title) == ("figure", "Figure")
    data = base64.b64encode(b"\x89PNG-bytes").decode("ascii")
    assert body == (
        f'<figure><img src="data:image/png;base64,{data}" alt="bars &lt;a&gt;">'
        "<figcaption>x &amp; y</figcaption></figure>\n"
        "<p>The same figure as vector graphics: ucr.svg, ucr.pdf.</p>\n"
    )


def test_figure_section_without_plots_says_why() -> None:
    _, _, body = _html.figure_section(None, alt="a", caption="c", vectors="figure.svg, figure.pdf")
    assert body == (
        "<p>No figure: the report was made without the [plots] extra (matplotlib).</p>\n"
    )
